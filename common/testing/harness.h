// Helpers for tests that run real binaries: short temporary directories
// (Unix socket paths must fit in 107 bytes), binaries from runfiles, and
// the subprocess helpers under their test names.
#ifndef AIRLOCK_COMMON_TESTING_HARNESS_H_
#define AIRLOCK_COMMON_TESTING_HARNESS_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "common/subprocess.h"

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

using ::airlock::CommandResult;
using ::airlock::ProcessAlive;
using ::airlock::RunCommand;

// ProcessesNamed lists live pids whose command line contains `needle`.
inline std::vector<pid_t> ProcessesNamed(const std::string& needle) {
  return ::airlock::ProcessesMatching(needle);
}

// AirlockEnv is the environment that points the CLI and the daemons at a
// runtime and state dir of their own under `dir`.
std::map<std::string, std::string> AirlockEnv(const std::string& dir);

// RunAirlock runs the built `airlock` CLI with `args` in `env`.
CommandResult RunAirlock(const std::map<std::string, std::string>& env,
                         const std::vector<std::string>& args, const std::string& input = "",
                         int timeout_s = 300);

// FixtureServer is a test server from tests/fixtures, running detached.
struct FixtureServer {
  pid_t pid = 0;
  // 0 when it did not report a port within 10 s.
  int port = 0;
};

// StartFixtureServer runs `argv` plus "--port 0 --ready FILE" detached
// (log: dir/name.log) and waits for the port it writes to FILE.
FixtureServer StartFixtureServer(const std::string& dir, const std::string& name,
                                 std::vector<std::string> argv);

// MakeTestCerts writes a test CA (dir/ca.pem, ca.key) and a server
// certificate for `names` signed by it (dir/up.pem, up.key), with openssl.
CommandResult MakeTestCerts(const std::string& dir, const std::vector<std::string>& names);

// FailureDiagnostics is what a failed end-to-end test prints about the
// daemon set under `dir` (AirlockEnv's): the tail of each daemon's log and,
// per sandbox, of its hypervisor log and console. CI keeps only the test's
// output, and the test's directory is gone after it.
std::string FailureDiagnostics(const std::string& dir);

// BinaryPath resolves a Bazel data dependency such as "vmmd/vmmd" to an
// absolute path in the test's runfiles.
std::string BinaryPath(const std::string& workspace_relative);

}  // namespace airlock::testing

#endif  // AIRLOCK_COMMON_TESTING_HARNESS_H_
