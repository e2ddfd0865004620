// The runtime every Airlock daemon runs in: configuration, the private
// runtime dir and pid lock, the SQLite state file, a gRPC server on a Unix
// socket (plus optional mTLS TCP) with health and reflection, peer
// credentials per connection, and a graceful stop on SIGTERM/SIGINT.
#ifndef AIRLOCK_COMMON_DAEMON_RUNTIME_H_
#define AIRLOCK_COMMON_DAEMON_RUNTIME_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/config.h"
#include "common/state_db.h"

namespace airlock {

// DaemonRuntime owns what a daemon process has besides its own services.
class DaemonRuntime {
 public:
  // Create makes the runtime and state dirs, takes the daemon's pid lock
  // (<runtime_dir>/<name>.pid; ALREADY_EXISTS when another instance holds
  // it) and opens the state file.
  static absl::StatusOr<std::unique_ptr<DaemonRuntime>> Create(DaemonConfig config);
  ~DaemonRuntime();

  const DaemonConfig& config() const { return config_; }
  StateDb& state() { return *state_; }

  // Serve registers `services` beside health, reflection and
  // airlock.daemon.v1.Daemon, listens, and blocks until SIGTERM or SIGINT
  // (or RequestStop). Then it stops accepting, runs `on_stopping` (which
  // ends calls that would otherwise run on, such as watch streams), lets
  // calls in flight finish for up to 5 s, runs `on_stop`, and removes the
  // socket.
  absl::Status Serve(const std::vector<grpc::Service*>& services,
                     std::function<void()> on_stop = nullptr,
                     std::function<void()> on_stopping = nullptr);

  // RequestStop makes Serve return as if SIGTERM had arrived.
  static void RequestStop();

 private:
  explicit DaemonRuntime(DaemonConfig config) : config_(std::move(config)) {}

  DaemonConfig config_;
  std::unique_ptr<StateDb> state_;
  int lock_fd_ = -1;
};

// DaemonMain is the whole main() of a daemon: it blocks the stop signals
// before any thread exists, parses flags, creates the runtime and calls
// `run`, which registers the daemon's services and calls Serve. Returns the
// process exit code (0 clean, 1 runtime error, 2 bad configuration).
int DaemonMain(const std::string& name, int argc, char** argv,
               const std::vector<OptionSpec>& options,
               const std::function<absl::Status(DaemonRuntime&)>& run);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_DAEMON_RUNTIME_H_
