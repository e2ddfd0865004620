// The client side of an exec stream: forwards the terminal (raw mode, window
// size, signals) and stdin, writes output, and returns the exit code.
#ifndef AIRLOCK_CLI_EXEC_CLIENT_H_
#define AIRLOCK_CLI_EXEC_CLIENT_H_

#include <string>
#include <variant>
#include <vector>

#include "protos/vmm/v1/vmm.grpc.pb.h"

namespace airlock::cli {

struct ExecOptions {
  std::string sandbox;
  std::vector<std::string> argv;
  std::vector<std::string> env;
  std::string user;
  std::string workdir;
  // Allocate a pseudo-terminal in the guest (-t).
  bool tty = false;
  // Forward stdin (-i).
  bool interactive = false;
  // Start and return at once (-d).
  bool detach = false;
};

// kExitCannotRun is the exit code when the sandbox cannot be found or
// reached (as docker's 125).
inline constexpr int kExitCannotRun = 125;

// RunExec runs the command and returns its exit code, or kExitCannotRun
// after printing why on stderr.
int RunExec(airlock::vmm::v1::Vmm::Stub& vmm, const ExecOptions& options);

// ExecRefusal is an exec vmmd refused before any answer: its status, so a
// caller can tell "the sandbox is not running" (FAILED_PRECONDITION) from
// the rest. TryExec returns it instead of printing it; anything else goes
// as RunExec's does (the exit code).
struct ExecRefusal {
  grpc::Status status;
};
std::variant<int, ExecRefusal> TryExec(airlock::vmm::v1::Vmm::Stub& vmm,
                                       const ExecOptions& options);

// ExecFailed says on stderr why the exec in `sandbox` did not run or end
// ("airlock: exec in NAME: WHY") and returns kExitCannotRun.
int ExecFailed(const std::string& sandbox, const std::string& why);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_EXEC_CLIENT_H_
