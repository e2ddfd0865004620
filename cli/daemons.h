// The CLI's view of the six daemons on this machine: where their binaries,
// sockets, pid files and logs are; starting them in the background, waiting
// until they are healthy, reporting on them and stopping them.
#ifndef AIRLOCK_CLI_DAEMONS_H_
#define AIRLOCK_CLI_DAEMONS_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/peer.h"

namespace airlock::cli {

// The daemons in start order: those others depend on come first.
inline const std::vector<std::string>& DaemonNames() {
  static const std::vector<std::string> names = {"policyd", "secretsd", "gitd", "proxyd",
                                                 "vmmd",    "apid"};
  return names;
}

// DaemonStatus is what `airlock daemon status` shows for one daemon.
struct DaemonStatus {
  std::string name;
  // "running", "stopped" or "unhealthy" (a process holds the pid file but
  // does not answer health checks).
  std::string state;
  int64_t pid = 0;
  std::string version;
  // The Unix socket, or HOST:PORT of a daemon on another host.
  std::string socket;
  std::string log;
  // The daemon runs on another host ($AIRLOCK_<NAME>): this CLI never
  // starts or stops it.
  bool remote = false;
};

// Daemons manages the daemons of one runtime dir and state dir. A daemon
// named by $AIRLOCK_<NAME> (AIRLOCK_VMMD=host:7443, or a socket path) is
// used where it is, over mutual TLS with $AIRLOCK_TLS_CERT, $AIRLOCK_TLS_KEY
// and $AIRLOCK_TLS_CA for HOST:PORT; it is never started or stopped here.
class Daemons {
 public:
  // Uses DefaultRuntimeDir() and DefaultStateDir().
  Daemons();

  // PeerOf is where daemon `name` is; INVALID_ARGUMENT naming the variable
  // when $AIRLOCK_<NAME> or the TLS files are wrong.
  absl::StatusOr<Peer> PeerOf(const std::string& name) const;
  // Dial returns a channel to daemon `name`; call it after EnsureRunning
  // (a PeerOf error there would leave it dialing the local socket). The
  // channel is held until the process exits (the CLI leaves with _exit).
  std::shared_ptr<grpc::Channel> Dial(const std::string& name) const;

  // Status reports every daemon.
  std::vector<DaemonStatus> Status() const;

  // Start launches every local daemon that is not healthy, in the
  // background, and waits until all are healthy; then UNAVAILABLE when a
  // remote one does not answer. Local daemons it starts read their peers
  // from <state-dir>/<name>.conf, not from $AIRLOCK_<NAME>. `progress`
  // lines go to stderr when set.
  absl::Status Start(bool progress);

  // Stop sends SIGTERM to every running local daemon, waits for it to exit
  // (SIGKILL after `grace_s` seconds), and reports what it stopped.
  absl::Status Stop(int grace_s, bool progress);

  // EnsureRunning makes sure daemon `name` answers, starting every local
  // daemon that is not running when it does not. A remote daemon that does
  // not answer is an error saying so. `channel`, when given, gets a
  // channel to it (the one that answered, so the caller dials no other),
  // held until the process exits as Dial's are.
  absl::Status EnsureRunning(const std::string& name,
                             std::shared_ptr<grpc::Channel>* channel = nullptr);

  // SocketOf is the Unix socket of daemon `name`.
  std::string SocketOf(const std::string& name) const;
  // LogOf is the log file the CLI sends daemon `name`'s output to.
  std::string LogOf(const std::string& name) const;
  // BinaryOf finds the executable of daemon `name`.
  absl::StatusOr<std::string> BinaryOf(const std::string& name) const;

 private:
  // IsRemote: $AIRLOCK_<NAME> is set.
  bool IsRemote(const std::string& name) const;
  std::string runtime_dir_;
  std::string state_dir_;
};

// ChannelTo returns a channel to daemon `name`, starting the daemons first
// when it does not answer. Null (after printing why and setting
// *exit_code to 1) when they cannot be started.
std::shared_ptr<grpc::Channel> ChannelTo(const std::string& name, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_DAEMONS_H_
