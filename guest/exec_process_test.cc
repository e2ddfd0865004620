#include "guest/exec_process.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "common/fd_io.h"
#include "gtest/gtest.h"

extern char** environ;

namespace airlock::guest {
namespace {

std::string RunToEnd(const ExecSpec& spec, ExecOutcome* outcome) {
  std::string message;
  auto p = ExecProcess::Start(spec, outcome, &message);
  if (!p) return "start failed: " + message;
  std::string out;
  *outcome = p->Pump([&](Stream s, absl::string_view d) {
    if (s == Stream::kStdout) out.append(d.data(), d.size());
  });
  return out;
}

// The Uid line of every thread of this process.
std::vector<std::string> ThreadUids() {
  std::vector<std::string> uids;
  DIR* d = opendir("/proc/self/task");
  while (dirent* e = d ? readdir(d) : nullptr) {
    if (e->d_name[0] == '.') continue;
    std::string status = ReadFileToString(std::string("/proc/self/task/") + e->d_name + "/status");
    size_t at = status.find("\nUid:");
    uids.push_back(status.substr(at + 5, status.find('\n', at + 1) - at - 5));
  }
  if (d) closedir(d);
  return uids;
}

// The child shares the agent's memory until it execs: dropping to the
// command's user there must change that process alone, never the agent's
// threads (glibc's setuid would change them all), and its environment must
// not become the agent's.
TEST(ExecProcessTest, TheCommandsUserAndEnvironmentAreItsOwn) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users";
  std::atomic<bool> stop{false};
  std::thread busy([&] {
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  });
  char** environ_before = environ;
  std::string path_before = getenv("PATH") ? getenv("PATH") : "";
  ExecSpec spec;
  spec.argv = {"sh", "-c", "id -u; id -g; echo $AIRLOCK_EXEC_TEST"};
  spec.user = "65534:65534";
  spec.workdir = "/";
  spec.env = {"AIRLOCK_EXEC_TEST=for the command"};
  for (int i = 0; i < 20; ++i) {
    ExecOutcome outcome;
    ASSERT_EQ(RunToEnd(spec, &outcome), "65534\n65534\nfor the command\n");
    EXPECT_EQ(outcome.code, 0);
  }
  stop = true;
  busy.join();
  for (const std::string& uid : ThreadUids()) EXPECT_EQ(uid, "\t0\t0\t0\t0") << "a thread lost root";
  EXPECT_EQ(geteuid(), 0u);
  EXPECT_EQ(environ, environ_before);
  EXPECT_EQ(getenv("AIRLOCK_EXEC_TEST"), nullptr);
  EXPECT_EQ(std::string(getenv("PATH") ? getenv("PATH") : ""), path_before);
}

TEST(ExecProcessTest, ProgramsAreLookedUpInTheCommandsPath) {
  EXPECT_EQ(ProgramCandidates("ls", {"HOME=/root", "PATH=/a::/b"}),
            (std::vector<std::string>{"/a/ls", "./ls", "/b/ls"}));
  EXPECT_EQ(ProgramCandidates("./run.sh", {"PATH=/a"}), (std::vector<std::string>{"./run.sh"}));
  EXPECT_EQ(ProgramCandidates("ls", {}), (std::vector<std::string>{"/bin/ls", "/usr/bin/ls"}));
  EXPECT_EQ(ProgramCandidates("ls", {"PATH=/a", "PATH=/b"}), (std::vector<std::string>{"/b/ls"}));

  // The agent (PID 1) has no PATH of its own: the command's decides.
  std::string saved = getenv("PATH") ? getenv("PATH") : "";
  unsetenv("PATH");
  ExecSpec spec;
  spec.workdir = "/";
  spec.argv = {"nologin"};  // /usr/sbin: not on execvp's default path
  ExecOutcome outcome;
  RunToEnd(spec, &outcome);
  EXPECT_EQ(outcome.code, 1) << "nologin was not found in /usr/sbin";
  spec.argv = {"true"};
  spec.env = {"PATH=/nonexistent"};
  std::string message;
  outcome = {};
  EXPECT_EQ(ExecProcess::Start(spec, &outcome, &message), nullptr);
  EXPECT_EQ(outcome.code, 127);
  // A file that is no executable format runs under /bin/sh, as execvp does.
  std::string dir = getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp";
  std::string script = dir + "/no-shebang";
  {
    std::ofstream(script) << "echo ran as a script: $1\n";
  }
  chmod(script.c_str(), 0755);
  spec.argv = {"no-shebang", "arg1"};
  spec.env = {"PATH=/nonexistent:" + dir};
  outcome = {};
  EXPECT_EQ(RunToEnd(spec, &outcome), "ran as a script: arg1\n");
  EXPECT_EQ(outcome.code, 0);
  setenv("PATH", saved.c_str(), 1);
}

TEST(ExecProcessTest, WhatCannotStartIsReportedAndTheAgentGoesOn) {
  ExecSpec spec;
  spec.workdir = "/";
  spec.argv = {"/no/such/program"};
  ExecOutcome outcome;
  std::string message;
  EXPECT_EQ(ExecProcess::Start(spec, &outcome, &message), nullptr);
  EXPECT_EQ(outcome.code, 127);
  EXPECT_NE(message.find("command not found"), std::string::npos) << message;
  spec.argv = {"true"};
  spec.workdir = "/no/such/dir";
  outcome = {};
  EXPECT_EQ(ExecProcess::Start(spec, &outcome, &message), nullptr);
  EXPECT_EQ(outcome.code, 126);
  EXPECT_NE(message.find("cannot change to directory /no/such/dir"), std::string::npos) << message;
  spec.workdir = "/";
  outcome = {};
  EXPECT_EQ(RunToEnd(spec, &outcome), "");
  EXPECT_EQ(outcome.code, 0);
}

}  // namespace
}  // namespace airlock::guest
