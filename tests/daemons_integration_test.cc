// Starts the six real daemon binaries on real Unix sockets in a temporary
// runtime dir, kills one, and checks that `airlock daemon start` brings it
// back and `airlock daemon stop` leaves nothing running.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "cli/daemons.h"
#include "common/client.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;
using testing::RunCommand;

class DaemonsIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
  }
  std::string Sock(const std::string& name) { return dir_.path() + "/run/" + name + ".sock"; }

  pid_t Spawn(const std::string& name) {
    std::string bin = BinaryPath(name + "/" + name);
    std::string rt = "--runtime-dir=" + dir_.path() + "/run";
    std::string st = "--state-dir=" + dir_.path() + "/state";
    pid_t pid = fork();
    if (pid == 0) {
      if (name == "apid") {
        execl(bin.c_str(), bin.c_str(), rt.c_str(), st.c_str(), "--listen=127.0.0.1:0", nullptr);
      }
      execl(bin.c_str(), bin.c_str(), rt.c_str(), st.c_str(), nullptr);
      _exit(127);
    }
    return pid;
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args);
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(DaemonsIntegrationTest, KilledDaemonIsRestartedAndStopLeavesNothing) {
  std::map<std::string, pid_t> pids;
  for (const auto& name : cli::DaemonNames()) pids[name] = Spawn(name);
  for (const auto& name : cli::DaemonNames()) {
    auto ch = DialUnix(Sock(name));
    EXPECT_TRUE(WaitHealthy(*ch, std::chrono::seconds(30)).ok()) << name;
  }

  // SIGKILL leaves a stale socket and pid file behind.
  ASSERT_EQ(kill(pids["secretsd"], SIGKILL), 0);
  waitpid(pids["secretsd"], nullptr, 0);
  EXPECT_FALSE(CheckHealth(*DialUnix(Sock("secretsd")), std::chrono::seconds(1)).ok());
  auto status = Airlock({"daemon", "status", "--json"});
  EXPECT_EQ(status.exit_code, 1) << status.err;
  auto before = nlohmann::json::parse(status.out);
  EXPECT_EQ(before[1]["name"], "secretsd");
  EXPECT_EQ(before[1]["state"], "stopped");

  auto start = Airlock({"daemon", "start", "--json"});
  ASSERT_EQ(start.exit_code, 0) << start.err;
  auto after = nlohmann::json::parse(start.out);
  ASSERT_EQ(after.size(), 6u);
  for (const auto& d : after) EXPECT_EQ(d["state"], "running") << d.dump();
  // The other five were found running, not restarted.
  EXPECT_EQ(after[0]["pid"], pids["policyd"]);
  EXPECT_NE(after[1]["pid"], pids["secretsd"]);
  EXPECT_TRUE(CheckHealth(*DialUnix(Sock("secretsd")), std::chrono::seconds(5)).ok());

  auto stop = Airlock({"daemon", "stop"});
  ASSERT_EQ(stop.exit_code, 0) << stop.err;
  for (const auto& [name, pid] : pids) {
    if (name != "secretsd") waitpid(pid, nullptr, 0);
  }
  std::vector<pid_t> left = testing::ProcessesNamed("--runtime-dir=" + dir_.path());
  EXPECT_TRUE(left.empty()) << left.size() << " daemon processes still running";
  for (const auto& name : cli::DaemonNames()) {
    EXPECT_NE(access(Sock(name).c_str(), F_OK), 0) << name << " socket left behind";
  }
  auto final_status = Airlock({"daemon", "status"});
  EXPECT_EQ(final_status.exit_code, 1);
  EXPECT_EQ(final_status.out.find("running"), std::string::npos) << final_status.out;
}

TEST_F(DaemonsIntegrationTest, DaemonRefusesPlaintextTcpAndBadFlags) {
  auto r = RunCommand({BinaryPath("gitd/gitd"), "--runtime-dir=" + dir_.path() + "/run",
                       "--listen-tcp=127.0.0.1:0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("mutual TLS"), std::string::npos) << r.err;
  auto bad = RunCommand({BinaryPath("gitd/gitd"), "--frobnicate"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown option --frobnicate"), std::string::npos) << bad.err;
  auto help = RunCommand({BinaryPath("policyd/policyd"), "--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_NE(help.out.find("--state-dir"), std::string::npos);
}

TEST_F(DaemonsIntegrationTest, StartRefusesAnOpenRuntimeDir) {
  ASSERT_EQ(mkdir((dir_.path() + "/run").c_str(), 0755), 0);
  ASSERT_EQ(chmod((dir_.path() + "/run").c_str(), 0755), 0);
  auto r = Airlock({"daemon", "start"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("chmod 700"), std::string::npos) << r.err;
  EXPECT_TRUE(testing::ProcessesNamed("--runtime-dir=" + dir_.path()).empty());
}

}  // namespace
}  // namespace airlock
