// `airlock policy` against a real policyd on a real socket: rules added,
// decided, refused when malformed, kept across a SIGKILL of policyd.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>

#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

class PolicyIntegrationTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
  }
  void TearDown() override { Airlock({"daemon", "stop"}); }
  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args);
  }
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(PolicyIntegrationTest, RulesDecideAndPersist) {
  auto ls = Airlock({"policy", "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(nlohmann::json::parse(ls.out)["preset"], "balanced") << "new installs start balanced";

  EXPECT_EQ(Airlock({"policy", "check", "network", "api.anthropic.com"}).exit_code, 0);
  auto denied = Airlock({"policy", "check", "network", "169.254.169.254"});
  EXPECT_EQ(denied.exit_code, 1);
  EXPECT_NE(denied.out.find("default deny"), std::string::npos) << denied.out;

  ASSERT_EQ(Airlock({"policy", "allow", "network", "api.github.com"}).exit_code, 0);
  ASSERT_EQ(Airlock({"policy", "deny", "network", "--method", "DELETE", "--path", "/repos/**",
                     "api.github.com"}).exit_code, 0);
  auto del = Airlock({"policy", "check", "network", "--json", "--method", "DELETE",
                      "https://api.github.com/repos/o/r"});
  EXPECT_EQ(del.exit_code, 1);
  auto d = nlohmann::json::parse(del.out);
  EXPECT_EQ(d["verdict"], "deny");
  EXPECT_EQ(d["rule"]["methods"][0], "DELETE");
  EXPECT_EQ(Airlock({"policy", "check", "network", "--method", "POST",
                     "https://api.github.com/repos/o/r"}).exit_code, 0);

  ASSERT_EQ(Airlock({"policy", "allow", "network", "--sandbox", "box1", "10.0.0.0/8"}).exit_code, 0);
  EXPECT_EQ(Airlock({"policy", "check", "network", "--sandbox", "box1", "10.1.2.3"}).exit_code, 0);
  EXPECT_EQ(Airlock({"policy", "check", "network", "--sandbox", "box2", "10.1.2.3"}).exit_code, 1);

  // Malformed rules point at the bad part and change nothing.
  size_t before = nlohmann::json::parse(Airlock({"policy", "ls", "--json"}).out)["rules"].size();
  for (auto args : std::vector<std::vector<std::string>>{
           {"policy", "allow", "network", "ok.example.com,a.*.com"},
           {"policy", "allow", "network", "--path", "nope", "x.com"},
           {"policy", "allow", "network", "--path", "/a/../b", "x.com"},
           {"policy", "deny", "network", "10.0.0.0/40"},
           {"policy", "allow", "network", "--method", "GET;x", "x.com"}}) {
    auto r = Airlock(args);
    EXPECT_EQ(r.exit_code, 2) << args.back();
    EXPECT_NE(r.err.find("invalid"), std::string::npos) << r.err;
  }
  EXPECT_EQ(nlohmann::json::parse(Airlock({"policy", "ls", "--json"}).out)["rules"].size(), before);

  // SIGKILL policyd: every acknowledged rule is still there after restart.
  pid_t pid = 0;
  std::ifstream(dir_.path() + "/run/policyd.pid") >> pid;
  ASSERT_GT(pid, 0);
  kill(pid, SIGKILL);
  AwaitExit(pid, std::chrono::seconds(2));
  EXPECT_EQ(nlohmann::json::parse(Airlock({"policy", "ls", "--json"}).out)["rules"].size(), before);
  EXPECT_EQ(Airlock({"policy", "check", "network", "--method", "DELETE",
                     "https://api.github.com/repos/o/r"}).exit_code, 1);

  ASSERT_EQ(Airlock({"policy", "rm", "network", "--resource", "api.github.com"}).exit_code, 0);
  EXPECT_EQ(Airlock({"policy", "rm", "network", "--resource", "api.github.com"}).exit_code, 1);
  ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
  EXPECT_EQ(Airlock({"policy", "check", "network", "api.anthropic.com"}).exit_code, 1);
  EXPECT_EQ(Airlock({"policy", "init", "most"}).exit_code, 2);
}

}  // namespace
}  // namespace airlock
