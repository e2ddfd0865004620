#include "common/agent_link.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <random>

#include <grpcpp/create_channel_posix.h>

#include "absl/strings/str_cat.h"
#include "common/channel_hello.h"

namespace airlock {

using std::chrono::milliseconds;
using std::chrono::steady_clock;

absl::StatusOr<std::shared_ptr<grpc::Channel>> AgentLink::Channel(milliseconds timeout) {
  std::lock_guard<std::mutex> lock(mu_);
  // A channel made from an fd has no connectivity state to ask (it always
  // reports SHUTDOWN); callers Reset() the link when a call finds it broken.
  if (channel_ != nullptr) return channel_;
  auto ch = Connect(timeout);
  if (!ch.ok()) return ch.status();
  channel_ = *ch;
  return channel_;
}

void AgentLink::Reset() {
  std::lock_guard<std::mutex> lock(mu_);
  channel_.reset();
}

void AgentLink::Relocate(std::string socket_path) {
  std::lock_guard<std::mutex> lock(mu_);
  socket_path_ = std::move(socket_path);
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> AgentLink::Connect(milliseconds timeout) {
  auto fd = ConnectAgentPort(socket_path_, timeout, first_resend_);
  if (!fd.ok()) return fd.status();
  fcntl(*fd, F_SETFL, fcntl(*fd, F_GETFL) | O_NONBLOCK);
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  return grpc::CreateCustomInsecureChannelFromFd("airlock-agent", *fd, args);
}

absl::StatusOr<int> ConnectJailSocket(const std::string& path) {
  int path_fd = open(path.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
  if (path_fd < 0) return absl::UnavailableError(strerror(errno));
  struct stat st;
  if (fstat(path_fd, &st) != 0 || !S_ISSOCK(st.st_mode)) {
    close(path_fd);
    return absl::FailedPreconditionError("not a socket (a symlink is refused)");
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "/proc/self/fd/%d", path_fd);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    close(path_fd);
    return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  }
  int rc = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int connect_errno = errno;
  close(path_fd);
  if (rc != 0) {
    close(fd);
    return absl::UnavailableError(strerror(connect_errno));
  }
  return fd;
}

absl::StatusOr<int> ConnectAgentPort(const std::string& socket_path, milliseconds timeout,
                                     milliseconds first_resend) {
  auto deadline = steady_clock::now() + timeout;
  auto connected = ConnectJailSocket(socket_path);
  if (!connected.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot connect to ", socket_path, ": ", connected.status().message()));
  }
  int fd = *connected;
  // Say hello until the agent answers one of ours; junk from an earlier
  // connection (a GOAWAY, say) is skipped.
  std::random_device rd;
  std::string buf;
  std::vector<std::string> sent;
  milliseconds wait = std::min(first_resend, milliseconds(3000));
  while (steady_clock::now() < deadline) {
    std::string nonce = absl::StrCat(rd(), rd());
    sent.push_back(nonce);
    std::string hello = absl::StrCat(airlock::kHelloPrefix, nonce, "\n");
    if (write(fd, hello.data(), hello.size()) != static_cast<ssize_t>(hello.size())) break;
    auto attempt_end = std::min(deadline, steady_clock::now() + wait);
    wait = std::min(wait * 2, milliseconds(3000));
    while (steady_clock::now() < attempt_end) {
      int left = static_cast<int>(
          std::chrono::duration_cast<milliseconds>(attempt_end - steady_clock::now()).count());
      pollfd p = {fd, POLLIN, 0};
      if (poll(&p, 1, std::max(left, 1)) <= 0) continue;
      // One byte at a time: the agent's HTTP/2 preface may follow its answer
      // at once, and must be left for the caller.
      char c;
      ssize_t n = read(fd, &c, 1);
      if (n <= 0) {
        close(fd);
        return absl::UnavailableError("the hypervisor closed the agent channel");
      }
      buf.push_back(c);
      if (c != '\n') continue;
      std::string answered;
      while (airlock::FindLine(&buf, airlock::kOkPrefix, &answered)) {
        for (const auto& s : sent) {
          if (s == answered) return fd;
        }
      }
    }
  }
  close(fd);
  return absl::DeadlineExceededError("the guest agent did not answer the channel handshake");
}

}  // namespace airlock
