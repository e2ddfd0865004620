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
  std::string socket;
  std::string log;
};

// Daemons manages the daemons of one runtime dir and state dir.
class Daemons {
 public:
  // Uses DefaultRuntimeDir() and DefaultStateDir().
  Daemons();

  // Status reports every daemon.
  std::vector<DaemonStatus> Status() const;

  // Start launches every daemon that is not healthy, in the background, and
  // waits until all are healthy. `progress` lines go to stderr when set.
  absl::Status Start(bool progress);

  // Stop sends SIGTERM to every running daemon, waits for it to exit
  // (SIGKILL after `grace_s` seconds), and reports what it stopped.
  absl::Status Stop(int grace_s, bool progress);

  // EnsureRunning makes sure daemon `name` answers, starting every daemon
  // that is not running when it does not.
  absl::Status EnsureRunning(const std::string& name);

  // SocketOf is the Unix socket of daemon `name`.
  std::string SocketOf(const std::string& name) const;
  // LogOf is the log file the CLI sends daemon `name`'s output to.
  std::string LogOf(const std::string& name) const;
  // BinaryOf finds the executable of daemon `name`.
  absl::StatusOr<std::string> BinaryOf(const std::string& name) const;

 private:
  std::string runtime_dir_;
  std::string state_dir_;
};

// ChannelTo returns a channel to daemon `name`, starting the daemons first
// when it does not answer. Null (after printing why and setting
// *exit_code to 1) when they cannot be started.
std::shared_ptr<grpc::Channel> ChannelTo(const std::string& name, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_DAEMONS_H_
