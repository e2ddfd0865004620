// Helpers for tests that run real binaries: short temporary directories
// (Unix socket paths must fit in 107 bytes), child processes, and commands
// whose output and exit code are captured.
#ifndef AIRLOCK_COMMON_TESTING_HARNESS_H_
#define AIRLOCK_COMMON_TESTING_HARNESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace airlock::testing {

// ShortTempDir makes a fresh directory under /tmp and returns its path. It is
// removed with everything in it when the object is destroyed.
class ShortTempDir {
 public:
  ShortTempDir();
  ~ShortTempDir();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// CommandResult is what a finished command left behind.
struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// RunCommand runs argv (argv[0] looked up in PATH) with extra environment
// and optional stdin, waits at most `timeout_s` seconds (then kills it,
// exit_code -1), and captures stdout and stderr.
CommandResult RunCommand(const std::vector<std::string>& argv,
                         const std::map<std::string, std::string>& env = {},
                         const std::string& stdin_data = "", int timeout_s = 300);

// ProcessAlive is true while `pid` exists and is not a zombie.
bool ProcessAlive(pid_t pid);

// ProcessesNamed lists pids whose /proc/<pid>/cmdline contains `needle`.
std::vector<pid_t> ProcessesNamed(const std::string& needle);

// BinaryPath resolves a Bazel data dependency such as "vmmd/vmmd" to an
// absolute path in the test's runfiles.
std::string BinaryPath(const std::string& workspace_relative);

}  // namespace airlock::testing

#endif  // AIRLOCK_COMMON_TESTING_HARNESS_H_
