// Bringing back a daemon that died: the real CLI and the six real daemons
// (no guests). Each daemon in turn is SIGKILLed and `airlock daemon start`
// must start it again and see it healthy about as soon as it serves. (The
// CLI's health poll used to spend some 5 s in gRPC's reconnect backoff on
// every daemon it restarted, though the daemon served within 100 ms.)
#include <signal.h>

#include <chrono>
#include <map>

#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

TEST(DaemonRestartTest, AKilledDaemonIsBackAndHealthyAtOnce) {
  testing::ShortTempDir dir;
  std::map<std::string, std::string> env = testing::AirlockEnv(dir.path());
  env["AIRLOCK_LIBEXEC_DIR"] = "";
  const std::string run = dir.path() + "/run";
  ASSERT_EQ(testing::RunAirlock(env, {"daemon", "start"}).exit_code, 0);
  for (const std::string name : {"policyd", "secretsd", "gitd", "proxyd", "vmmd", "apid"}) {
    pid_t old = testing::DaemonPid(run, name);
    ASSERT_GT(old, 0) << name;
    ASSERT_EQ(kill(old, SIGKILL), 0);
    AwaitExit(old, std::chrono::seconds(5));
    auto start = std::chrono::steady_clock::now();
    CommandResult r = testing::RunAirlock(env, {"daemon", "start", "--json"});
    int64_t took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - start)
                          .count();
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_LT(took_ms, 3000) << "restarting " << name << " took " << took_ms << " ms";
    nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(all.is_array()) << r.out;
    for (const auto& d : all) {
      EXPECT_EQ(d["state"], "running") << d["name"] << " after restarting " << name;
      if (d["name"] == name) {
        EXPECT_NE(d["pid"], old) << "a new " << name;
      }
    }
  }
  EXPECT_EQ(testing::RunAirlock(env, {"daemon", "stop"}).exit_code, 0);
  EXPECT_TRUE(testing::ProcessesOf(dir.path()).empty());
}

}  // namespace
}  // namespace airlock
