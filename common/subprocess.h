// Running other programs: to completion with captured output, or detached
// into their own session so they outlive the caller.
#ifndef AIRLOCK_COMMON_SUBPROCESS_H_
#define AIRLOCK_COMMON_SUBPROCESS_H_

#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock {

// CommandResult is what a finished command left behind.
struct CommandResult {
  // Exit code; 128+N when killed by signal N; -1 when it timed out.
  int exit_code = -1;
  std::string out;
  std::string err;
};

// RunCommand runs argv (argv[0] looked up in PATH) with extra environment
// and optional stdin, waits at most `timeout_s` seconds (then kills it), and
// captures stdout and stderr. The child starts with no blocked signals.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         const std::string& stdin_data = "", int timeout_s = 300);

// SpawnDetached starts argv in a new session, reparented to init (double
// fork), with stdin from /dev/null and stdout and stderr appended to
// `log_path`. Returns the pid of the running program; the caller never
// waits for it. Fails when exec fails. `pass_fd`, when not -1, is an open
// descriptor the program gets as fd `pass_as` (the caller keeps its own).
absl::StatusOr<pid_t> SpawnDetached(const std::vector<std::string>& argv,
                                    const std::string& log_path, int pass_fd = -1,
                                    int pass_as = 3);

// ProcessAlive is true while `pid` exists and one of its threads has not
// exited (a zombie leader whose other threads still run is alive: they hold
// the process's files).
bool ProcessAlive(pid_t pid);

// AwaitExit waits up to `timeout` for ProcessAlive(pid) to turn false and
// says whether it did. It is woken by the exit itself (a pidfd), not by
// polling, where the kernel has pidfds; elsewhere it looks every 20 ms.
// `woken_by_pidfd`, when given, says whether the pidfd saw the exit.
bool AwaitExit(pid_t pid, std::chrono::milliseconds timeout, bool* woken_by_pidfd = nullptr);

// ProcessCmdline is /proc/<pid>/cmdline with NULs turned into spaces, or ""
// when the process is gone.
std::string ProcessCmdline(pid_t pid);

// ProcessesMatching lists live pids whose command line contains `needle`.
std::vector<pid_t> ProcessesMatching(const std::string& needle);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_SUBPROCESS_H_
