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

#include <algorithm>
#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/fd_io.h"

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
  // apid on a port of its own, so test daemon sets never share 7777.
  return {{"AIRLOCK_RUNTIME_DIR", dir + "/run"},
          {"AIRLOCK_STATE_DIR", dir + "/state"},
          {"AIRLOCK_API_LISTEN", "127.0.0.1:0"}};
}

CommandResult RunAirlock(const std::map<std::string, std::string>& env,
                         const std::vector<std::string>& args, const std::string& input,
                         int timeout_s) {
  std::vector<std::string> argv = {BinaryPath("cli/airlock")};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, env, input, timeout_s);
}

namespace {

// The names in `dir`, sorted (none when it cannot be read).
std::vector<std::string> Entries(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') names.push_back(e->d_name);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

std::string FailureDiagnostics(const std::string& dir) {
  std::string out = "---- daemon logs and consoles under " + dir + " ----\n";
  auto tail = [&](const std::string& path, int lines) {
    std::string text = FileTail(path, lines);
    if (!text.empty()) out += "== " + path + "\n" + text + "\n";
  };
  for (const std::string& log : Entries(dir + "/state/logs")) {
    tail(dir + "/state/logs/" + log, 30);
  }
  for (const std::string& sb : Entries(dir + "/state/sandboxes")) {
    std::string sandbox = dir + "/state/sandboxes/" + sb;
    tail(sandbox + "/vmm.log", 10);
    tail(sandbox + "/console.log", 15);
  }
  return out;
}

std::string BinaryPath(const std::string& workspace_relative) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* ws = getenv("TEST_WORKSPACE");
  if (srcdir != nullptr && ws != nullptr) {
    return std::string(srcdir) + "/" + ws + "/" + workspace_relative;
  }
  return workspace_relative;
}

FixtureServer StartFixtureServer(const std::string& dir, const std::string& name,
                                 std::vector<std::string> argv) {
  std::string ready = dir + "/" + name + ".port";
  argv.insert(argv.end(), {"--port", "0", "--ready", ready});
  FixtureServer s;
  auto pid = SpawnDetached(argv, dir + "/" + name + ".log");
  if (!pid.ok()) return s;
  s.pid = *pid;
  for (int i = 0; i < 100 && s.port == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s.port = std::atoi(ReadFileToString(ready).c_str());
  }
  return s;
}

CommandResult MakeTestCerts(const std::string& dir, const std::vector<std::string>& names) {
  std::string sans;
  for (const auto& n : names) sans += (sans.empty() ? "DNS:" : ",DNS:") + n;
  return RunCommand(
      {"sh", "-c",
       "set -e; cd " + dir +
           "; openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
           "-keyout ca.key -out ca.pem -days 2 -subj '/CN=airlock test CA' 2>/dev/null;"
           "openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout up.key "
           "-out up.csr -subj '/CN=" +
           names.front() +
           "' 2>/dev/null;"
           "printf 'subjectAltName=" +
           sans +
           "\\n' > ext;"
           "openssl x509 -req -in up.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out up.pem "
           "-days 2 -extfile ext 2>/dev/null"});
}

}  // namespace airlock::testing
