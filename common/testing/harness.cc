#include "common/testing/harness.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace airlock::testing {

ShortTempDir::ShortTempDir() {
  char tmpl[] = "/tmp/airlock-test-XXXXXX";
  char* p = mkdtemp(tmpl);
  path_ = p ? p : "/tmp";
}

ShortTempDir::~ShortTempDir() {
  if (path_.rfind("/tmp/airlock-test-", 0) == 0) {
    std::string cmd = "rm -rf '" + path_ + "'";
    int unused = system(cmd.c_str());
    (void)unused;
  }
}

std::map<std::string, std::string> AirlockEnv(const std::string& dir) {
  return {{"AIRLOCK_RUNTIME_DIR", dir + "/run"}, {"AIRLOCK_STATE_DIR", dir + "/state"}};
}

CommandResult RunAirlock(const std::map<std::string, std::string>& env,
                         const std::vector<std::string>& args, const std::string& input,
                         int timeout_s) {
  std::vector<std::string> argv = {BinaryPath("cli/airlock")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, env, input, timeout_s);
}

std::string BinaryPath(const std::string& workspace_relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && ws != nullptr) {
    return std::string(srcdir) + "/" + ws + "/" + workspace_relative;
  }
  return workspace_relative;
}

}  // namespace airlock::testing
