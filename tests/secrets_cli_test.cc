// `airlock secret` against a real secretsd on a real socket (no VM): set
// from each source, import, list without values, refusals that name the
// bad field and change nothing, rm, and values kept across a SIGKILL.
#include <signal.h>
#include <unistd.h>

#include <map>
#include <thread>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

class SecretsCliTest : public ::testing::Test {
 protected:
  void SetUp() override { env_ = testing::AirlockEnv(dir_.path()); }
  void TearDown() override { Airlock({"daemon", "stop"}); }
  CommandResult Airlock(const std::vector<std::string>& args, const std::string& input = "") {
    return testing::RunAirlock(env_, args, input);
  }
  nlohmann::json Ls() {
    auto ls = Airlock({"secret", "ls", "--json"});
    EXPECT_EQ(ls.exit_code, 0) << ls.err;
    return nlohmann::json::parse(ls.out);
  }
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(SecretsCliTest, SetFromEachSourceListWithoutValuesAndRemove) {
  auto t = Airlock({"secret", "set", "-g", "anthropic", "-t", "sk-flag-value-1"});
  ASSERT_EQ(t.exit_code, 0) << t.err;
  EXPECT_EQ(t.out, "anthropic@global\n");
  auto cmd = Airlock({"secret", "set", "box1", "openai", "--command", "echo sk-cmd-value-2"});
  ASSERT_EQ(cmd.exit_code, 0) << cmd.err;
  auto in = Airlock({"secret", "set", "-g", "github"}, "ghp_stdin_value_3\n");
  ASSERT_EQ(in.exit_code, 0) << in.err;
  auto custom = Airlock({"secret", "set-custom", "--host", "api.example.com", "--env",
                         "EXAMPLE_TOKEN"},
                        "custom-stdin-value-4\n");
  ASSERT_EQ(custom.exit_code, 0) << custom.err;
  EXPECT_NE(custom.out.find("EXAMPLE_TOKEN=sbx-cs-"), std::string::npos) << custom.out;

  auto ls = Airlock({"secret", "ls", "--json"});
  for (const char* v : {"sk-flag-value-1", "sk-cmd-value-2", "ghp_stdin_value_3",
                        "custom-stdin-value-4"}) {
    EXPECT_EQ(ls.out.find(v), std::string::npos) << "ls shows a value";
  }
  auto j = nlohmann::json::parse(ls.out);
  ASSERT_EQ(j.size(), 4u) << ls.out;
  std::map<std::string, nlohmann::json> by_id;
  for (const auto& s : j) by_id[s["id"]] = s;
  EXPECT_EQ(by_id["openai@box1"]["scope"], "box1");
  EXPECT_EQ(by_id["anthropic@global"]["sentinel"], "proxy-managed");
  EXPECT_EQ(by_id["anthropic@global"]["hosts"][0], "api.anthropic.com");

  auto table = Airlock({"secret", "ls"});
  EXPECT_NE(table.out.find("ID"), std::string::npos);
  auto services = Airlock({"secret", "ls", "--services"});
  for (const char* s : {"anthropic", "openai", "github", "google", "groq", "mistral", "xai",
                        "openrouter"}) {
    EXPECT_NE(services.out.find(s), std::string::npos) << s;
  }

  EXPECT_EQ(Airlock({"secret", "rm", "box1", "openai"}).exit_code, 0);
  EXPECT_EQ(Airlock({"secret", "rm", "-g", "anthropic"}).exit_code, 0);
  auto again = Airlock({"secret", "rm", "-g", "anthropic"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_EQ(Ls().size(), 2u);
}

TEST_F(SecretsCliTest, BadInputIsRefusedAndChangesNothing) {
  ASSERT_EQ(Airlock({"secret", "set", "-g", "anthropic", "-t", "sk-keep-me"}).exit_code, 0);
  struct Bad {
    std::vector<std::string> args;
    std::string says;
  } bad[] = {
      {{"secret", "set", "-g", "no-such-service", "-t", "x-secret-x"}, "no-such-service"},
      {{"secret", "set", "anthropic", "-t", "x-secret-x"}, "usage"},
      {{"secret", "set", "Bad_Name", "anthropic", "-t", "x-secret-x"}, "sandbox"},
      {{"secret", "set", "global", "anthropic", "-t", "x-secret-x"}, "reserved"},
      {{"secret", "set-custom", "--host", "api.example.com", "--env", "lower", "--value",
        "x-secret-x"},
       "lower"},
      {{"secret", "set-custom", "--host", "not a host", "--env", "TOK", "--value", "x-secret-x"},
       "host"},
      {{"secret", "set", "-g", "openai", "--command", "exit 3"}, "exit code 3"},
  };
  for (const auto& b : bad) {
    auto r = Airlock(b.args);
    EXPECT_NE(r.exit_code, 0) << b.args[2];
    EXPECT_NE(r.err.find(b.says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("x-secret-x"), std::string::npos) << "an error echoes the value";
  }
  auto j = Ls();
  ASSERT_EQ(j.size(), 1u) << j.dump();
  EXPECT_EQ(j[0]["id"], "anthropic@global");
}

TEST_F(SecretsCliTest, ImportFromTheHostEnvironment) {
  env_["OPENAI_API_KEY"] = "sk-from-env-5";
  env_["GROQ_API_KEY"] = "gsk-from-env-6";
  auto dry = Airlock({"secret", "import", "--all", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("would import openai from $OPENAI_API_KEY"), std::string::npos)
      << dry.out;
  EXPECT_EQ(dry.out.find("sk-from-env-5"), std::string::npos);
  EXPECT_EQ(Ls().size(), 0u) << "a dry run stores nothing";
  auto one = Airlock({"secret", "import", "groq"});
  ASSERT_EQ(one.exit_code, 0) << one.err;
  EXPECT_EQ(Ls().size(), 1u);
  ASSERT_EQ(Airlock({"secret", "import", "--all"}).exit_code, 0);
  EXPECT_EQ(Ls().size(), 2u);
  EXPECT_EQ(Airlock({"secret", "import", "nope"}).exit_code, 2);
}

TEST_F(SecretsCliTest, SecretsSurviveASigkill) {
  ASSERT_EQ(Airlock({"secret", "set", "-g", "xai", "-t", "xai-value-7"}).exit_code, 0);
  std::string pid = ReadFileToString(dir_.path() + "/run/secretsd.pid");
  ASSERT_FALSE(pid.empty());
  kill(std::atoi(pid.c_str()), SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto j = Ls();  // starts secretsd again
  ASSERT_EQ(j.size(), 1u);
  EXPECT_EQ(j[0]["id"], "xai@global");
}

}  // namespace
}  // namespace airlock
