// Who is calling: the credentials of the process at the other end of a Unix
// socket (SO_PEERCRED), kept per gRPC connection so a service handler can
// authorize by identity, never by a claim inside the request.
#ifndef AIRLOCK_COMMON_PEER_CRED_H_
#define AIRLOCK_COMMON_PEER_CRED_H_

#include <sys/types.h>

#include <map>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace grpc {
class ServerContext;
class CallbackServerContext;
}  // namespace grpc

namespace airlock {

// PeerCredentials are the kernel's record of the connecting process, taken
// when it connected.
struct PeerCredentials {
  pid_t pid = 0;
  uid_t uid = 0;
  gid_t gid = 0;
};

// ReadPeerCredentials returns SO_PEERCRED of a connected Unix socket.
absl::StatusOr<PeerCredentials> ReadPeerCredentials(int fd);

// PeerExecutable is the absolute path of the executable of `pid`
// (/proc/<pid>/exe), for callers that authorize a specific binary.
absl::StatusOr<std::string> PeerExecutable(pid_t pid);

// PeerRegistry maps gRPC peer strings ("fd:12") of accepted Unix connections
// to their credentials. The daemon runtime registers each connection before
// gRPC sees a byte of it, so a lookup can never see a previous connection
// that had the same fd number.
class PeerRegistry {
 public:
  // Global is the registry the daemon runtime fills.
  static PeerRegistry& Global();

  void Register(int fd, const PeerCredentials& creds);
  // Lookup finds the credentials for a gRPC peer string; NOT_FOUND for TCP
  // peers and unknown connections.
  absl::StatusOr<PeerCredentials> Lookup(absl::string_view peer) const;

 private:
  mutable std::mutex mu_;
  std::map<int, PeerCredentials> by_fd_;
};

// CallerCredentials is PeerRegistry::Global().Lookup(ctx.peer()).
absl::StatusOr<PeerCredentials> CallerCredentials(const grpc::ServerContext& ctx);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_PEER_CRED_H_
