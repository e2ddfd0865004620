#include "common/peer_cred.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <grpcpp/server_context.h>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace airlock {

absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred uc;
  socklen_t len = sizeof(uc);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) != 0) {
    return absl::InternalError(absl::StrCat("SO_PEERCRED: ", strerror(errno)));
  }
  return PeerCredentials{uc.pid, uc.uid, uc.gid};
}

absl::StatusOr<std::string> PeerExecutable(pid_t pid) {
  char buf[PATH_MAX];
  std::string link = absl::StrCat("/proc/", pid, "/exe");
  ssize_t n = readlink(link.c_str(), buf, sizeof(buf) - 1);
  if (n < 0) {
    return absl::NotFoundError(absl::StrCat("cannot read ", link, ": ", strerror(errno)));
  }
  return std::string(buf, n);
}

PeerRegistry& PeerRegistry::Global() {
  static PeerRegistry* registry = new PeerRegistry();
  return *registry;
}

void PeerRegistry::Register(int fd, const PeerCredentials& creds) {
  std::lock_guard<std::mutex> lock(mu_);
  by_fd_[fd] = creds;
}

absl::StatusOr<PeerCredentials> PeerRegistry::Lookup(absl::string_view peer) const {
  absl::string_view rest = peer;
  int fd;
  if (!absl::ConsumePrefix(&rest, "fd:") || !absl::SimpleAtoi(rest, &fd)) {
    return absl::NotFoundError(absl::StrCat("peer ", peer, " is not a local Unix connection"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) {
    return absl::NotFoundError(absl::StrCat("no credentials recorded for ", peer));
  }
  return it->second;
}

absl::StatusOr<PeerCredentials> CallerCredentials(const grpc::ServerContext& ctx) {
  return PeerRegistry::Global().Lookup(ctx.peer());
}

}  // namespace airlock
