// Built-in agents end to end: `airlock run claude` installs Claude Code
// for real, from the npm registry this machine reaches, inside a sandbox,
// through proxyd under the kit's install-phase rules, and keeps the result
// as the image agents/claude:VERSION; the next run starts from that image
// without the network. The operator settings tools/configure_network.sh
// writes (split DNS, re-signed TLS) are this test's proxyd.conf, as for a
// real install.
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

constexpr char kClaudeVersion[] = "2.1.332";
constexpr char kAnthropicKey[] = "sk-ant-real-key-never-in-the-guest-5f2c";

class AgentsE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    auto conf = RunCommand({"bash", BinaryPath("tools/configure_network.sh"), d + "/state"});
    ASSERT_EQ(conf.exit_code, 0) << conf.err;
    // A loopback stand-in for api.anthropic.com (a test CA proxyd trusts
    // for upstreams; the guest trusts only Airlock's CA).
    auto certs = testing::MakeTestCerts(d, {"api.anthropic.com"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    messages_ = testing::StartFixtureServer(
        d, "messages",
        {"python3", BinaryPath("tests/fixtures/messages_api.py"), "--tls", d + "/up.pem",
         d + "/up.key", "--log", d + "/messages.log"});
    ASSERT_GT(messages_.port, 0);
    std::ofstream(d + "/state/proxyd.conf", std::ios::app)
        << "\nresolve = api.anthropic.com=127.0.0.1\nupstream-ca = " << d << "/ca.pem\n";
    // Nothing but what the agent kit allows, per phase.
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    if (messages_.pid > 0) kill(messages_.pid, SIGTERM);
    delete env_;
    delete dir_;
  }
  static CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(*env_, args, "", 1500);
  }
  static std::string Log() { return Airlock({"policy", "log", "--limit", "100000"}).out; }
  // Lines of the proxyd log that name `sandbox`.
  static std::string LogOf(const std::string& sandbox) {
    return Airlock({"policy", "log", "--sandbox", sandbox, "--limit", "100000"}).out;
  }

  static size_t Count(const std::string& text, const std::string& word) {
    size_t n = 0;
    for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
    return n;
  }
  // ImageDigest is agents/claude:VERSION's manifest digest ("" when none).
  static std::string ImageDigest() {
    auto j = nlohmann::json::parse(
        Airlock({"template", "inspect", absl::StrCat("agents/claude:", kClaudeVersion)}).out,
        nullptr, false);
    return j.is_object() && j.contains("digest") ? j["digest"].get<std::string>() : "";
  }
  // HasLine says whether one line of `text` holds every word of `words`.
  static bool HasLine(const std::string& text, const std::vector<std::string>& words) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      std::string line = text.substr(start, end - start);
      bool all = true;
      for (const auto& w : words) all = all && absl::StrContains(line, w);
      if (all) return true;
      start = end + 1;
    }
    return false;
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static testing::FixtureServer messages_;
};

testing::ShortTempDir* AgentsE2ETest::dir_;
std::map<std::string, std::string>* AgentsE2ETest::env_;
testing::FixtureServer AgentsE2ETest::messages_;

// Tests run in file order: the first installs, the others use the image.

TEST_F(AgentsE2ETest, FirstRunInstallsTheRealClaudeCodeAndKeepsItAsAnImage) {
  auto r = Airlock({"run", "--rm", "--name", "first", "claude", "--", "--version"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(kClaudeVersion), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Claude Code"), std::string::npos) << r.out;
  auto images = Airlock({"template", "ls", "--json"});
  ASSERT_EQ(images.exit_code, 0) << images.err;
  EXPECT_NE(images.out.find(absl::StrCat("agents/claude:", kClaudeVersion)), std::string::npos)
      << images.out;
  // The install reached the real registry through proxyd, in the install
  // phase of a sandbox of its own; the install sandbox is gone.
  std::string log = Log();
  EXPECT_TRUE(HasLine(log, {"allow", "install-claude-", "registry.npmjs.org:443"}))
      << log.substr(0, 3000);
  auto ls = Airlock({"ls", "-q"});
  EXPECT_EQ(ls.out, "") << ls.out;
}

TEST_F(AgentsE2ETest, SecondRunStartsFromTheImageWithoutTheNetwork) {
  std::string digest_before = ImageDigest();
  size_t installs_before = Count(Log(), "install-claude-");
  auto r = Airlock({"run", "--rm", "--name", "second", "claude", "--", "--version"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find(kClaudeVersion), std::string::npos) << r.out;
  EXPECT_FALSE(absl::StrContains(LogOf("second"), "registry.npmjs.org")) << LogOf("second");
  // No install sandbox ran again, and the image is the same one.
  EXPECT_EQ(Count(Log(), "install-claude-"), installs_before);
  EXPECT_EQ(ImageDigest(), digest_before);
}

TEST_F(AgentsE2ETest, ACommandAfterDashesReplacesTheAgentsCommand) {
  auto r = Airlock({"run", "--rm", "--name", "cmd", "claude", "--", "sh", "-c",
                    "id -un; pwd; node --version; command -v claude; "
                    "docker info --format 'engine {{.Name}}'"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "agent\n/home/agent/workspace\nv")) << r.out;
  // Node.js 22 or later: what every listed agent CLI accepts.
  size_t v = r.out.find("\nv") + 2;
  EXPECT_GE(std::stoi(r.out.substr(v)), 22) << r.out;
  EXPECT_NE(r.out.find("/usr/local/bin/claude"), std::string::npos) << r.out;
  // A built-in agent has its own Docker Engine by default.
  EXPECT_NE(r.out.find("engine cmd\n"), std::string::npos) << r.out;
}

TEST_F(AgentsE2ETest, NoDockerLeavesTheEngineOut) {
  auto r = Airlock({"run", "--rm", "--no-docker", "--name", "nodock", "claude", "--", "sh", "-c",
                    "test -S /var/run/docker.sock; echo socket=$?; ls /var/lib/docker | wc -l"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out, "socket=1\n0\n") << r.out;
}

TEST_F(AgentsE2ETest, WithoutASecretTheAgentShowsItsOwnSignInMessage) {
  // Options after -- go to the agent's own command.
  auto r = Airlock({"run", "--rm", "--name", "nokey", "claude", "--", "-p", "hello"});
  EXPECT_NE(r.out.find("Not logged in"), std::string::npos) << r.out << r.err;
  EXPECT_NE(r.out.find("/login"), std::string::npos) << r.out << r.err;
}

TEST_F(AgentsE2ETest, RunningAgentHasItsRuntimeRulesAndOnlyTheSentinel) {
  ASSERT_EQ(Airlock({"secret", "set", "-g", "anthropic", "-t", kAnthropicKey}).exit_code, 0);
  auto c = Airlock({"create", "--name", "agent1", "claude"});
  ASSERT_EQ(c.exit_code, 0) << c.err;
  auto ls = Airlock({"ls", "--json"});
  auto arr = nlohmann::json::parse(ls.out, nullptr, false);
  ASSERT_TRUE(arr.is_array() && arr.size() == 1) << ls.out;
  EXPECT_EQ(arr[0]["agent"], "claude");
  EXPECT_EQ(arr[0]["image"]["name"], absl::StrCat("agents/claude:", kClaudeVersion));
  auto env = Airlock({"exec", "agent1", "--", "sh", "-c", "env"});
  ASSERT_EQ(env.exit_code, 0) << env.err;
  EXPECT_NE(env.out.find("ANTHROPIC_API_KEY=proxy-managed"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find(kAnthropicKey), std::string::npos);
  // The registry was allowed only while installing: now proxyd refuses it,
  // while the kit's runtime hosts pass (what the real host answers does
  // not matter here: only Debian's archive and npm are reachable).
  auto npm = Airlock({"exec", "agent1", "--", "sh", "-c",
                      "curl -sS -o /dev/null https://registry.npmjs.org/ 2>&1; echo exit=$?"});
  EXPECT_NE(npm.out.find("CONNECT tunnel failed, response 403"), std::string::npos) << npm.out;
  // curl 7.88 reports a refused CONNECT as "could not connect" (7).
  EXPECT_NE(npm.out.find("exit=7\n"), std::string::npos) << npm.out;
  Airlock({"exec", "agent1", "--", "sh", "-c",
           "curl -s -o /dev/null --max-time 20 https://api.anthropic.com/v1/models; true"});
  std::string log = LogOf("agent1");
  EXPECT_TRUE(HasLine(log, {"deny", "registry.npmjs.org:443"})) << log;
  EXPECT_TRUE(HasLine(log, {"allow", "api.anthropic.com:443"})) << log;
  // Claude Code's own API call carries the real key, placed by proxyd.
  // The stand-in listens on a port of its own, so the test points Claude at
  // it and allows that port (the kit allows :443).
  std::string base = absl::StrCat("api.anthropic.com:", messages_.port);
  ASSERT_EQ(Airlock({"policy", "allow", "network", base}).exit_code, 0);
  auto call = Airlock({"exec", "-e", "ANTHROPIC_BASE_URL=https://" + base, "agent1", "--",
                       "claude", "-p", "hello"});
  EXPECT_EQ(call.exit_code, 0) << call.out << call.err;
  EXPECT_NE(call.out.find("reply from the airlock test upstream"), std::string::npos)
      << call.out << call.err;
  std::string seen = ReadFileToString(dir_->path() + "/messages.log");
  EXPECT_NE(seen.find(absl::StrCat("\"x-api-key\": \"", kAnthropicKey, "\"")),
            std::string::npos)
      << seen;
  EXPECT_EQ(seen.find("proxy-managed"), std::string::npos) << seen;
  ASSERT_EQ(Airlock({"rm", "-f", "agent1"}).exit_code, 0);
}

TEST_F(AgentsE2ETest, AMixinKitComposesWithTheAgent) {
  const std::string mixin = dir_->path() + "/notes.yaml";
  std::ofstream(mixin) << "schemaVersion: \"3\"\nkind: mixin\ndisplayName: notes\n"
                          "capabilities:\n"
                          "  - type: com.docker.sandbox/lifecycle@1\n"
                          "    config:\n"
                          "      files:\n"
                          "        - path: /home/agent/NOTES.md\n"
                          "          content: from the mixin\n";
  auto r = Airlock({"run", "--rm", "--name", "mix", "--kit", mixin, "claude", "--", "sh", "-c",
                    "cat /home/agent/NOTES.md; echo; claude --version"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, "from the mixin\n")) << r.out;
  EXPECT_NE(r.out.find(kClaudeVersion), std::string::npos) << r.out;
}

TEST_F(AgentsE2ETest, AnotherVersionInstallsAgainAndAFailedInstallLeavesNothing) {
  // A version npm does not have: the install runs (a new version is a new
  // install), npm's refusal is the reason given, and no image is named.
  auto r = Airlock({"run", "--rm", "--name", "nover", "--kit-arg", "version=0.0.1-airlock-none",
                    "claude", "--", "--version"});
  EXPECT_EQ(r.exit_code, 125) << r.out << r.err;
  EXPECT_NE(r.err.find("installing claude 0.0.1-airlock-none failed"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("No matching version found for @anthropic-ai/claude-code@0.0.1-airlock-"
                       "none"),
            std::string::npos)
      << r.err;
  auto images = Airlock({"template", "ls"});
  EXPECT_EQ(images.out.find("0.0.1-airlock-none"), std::string::npos) << images.out;
  EXPECT_NE(images.out.find(kClaudeVersion), std::string::npos) << images.out;
  EXPECT_EQ(Airlock({"ls", "-q"}).out, "");
}

TEST_F(AgentsE2ETest, VmmdKilledDuringAnInstallLeavesNoInstallSandboxOrVm) {
  const std::string d = dir_->path();
  std::vector<std::string> argv = {"env"};
  for (const auto& [k, v] : *env_) argv.push_back(k + "=" + v);
  argv.insert(argv.end(), {BinaryPath("cli/airlock"), "create", "--name", "waiting",
                           "--kit-arg", "version=0.0.2-airlock-none", "claude"});
  ASSERT_TRUE(SpawnDetached(argv, d + "/bgcreate.log").ok());
  // Wait until the install sandbox is booting, then kill vmmd outright.
  bool seen = false;
  for (int i = 0; i < 300 && !seen; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    seen = absl::StrContains(Airlock({"ls", "-q"}).out, "install-claude-");
  }
  ASSERT_TRUE(seen) << Airlock({"ls"}).out;
  std::string pid = ReadFileToString(d + "/run/vmmd.pid");
  ASSERT_FALSE(pid.empty());
  ASSERT_EQ(kill(std::atoi(pid.c_str()), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  // The next command starts vmmd again: it removes the install sandbox
  // (and its VM), and the sandbox that waited says what to do.
  std::string names;
  for (int i = 0; i < 100; ++i) {
    names = Airlock({"ls", "-q"}).out;
    if (!absl::StrContains(names, "install-claude-")) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_EQ(names, "waiting\n");
  auto ls = nlohmann::json::parse(Airlock({"ls", "--json"}).out, nullptr, false);
  ASSERT_TRUE(ls.is_array() && ls.size() == 1);
  EXPECT_EQ(ls[0]["state"], "failed");
  EXPECT_NE(ls[0]["failure"].get<std::string>().find("`airlock start` finishes it"),
            std::string::npos)
      << ls[0]["failure"];
  auto vms =
      RunCommand({"sh", "-c", "pgrep -f '[q]emu.*" + d + "/state/sandboxes/install-' | wc -l"});
  EXPECT_EQ(vms.out, "0\n");
  // Starting it again runs the install again (this version fails in npm).
  auto start = Airlock({"start", "waiting"});
  auto after = nlohmann::json::parse(Airlock({"ls", "--json"}).out, nullptr, false);
  ASSERT_TRUE(after.is_array() && after.size() == 1) << start.err;
  EXPECT_NE(after[0]["failure"].get<std::string>().find("No matching version found"),
            std::string::npos)
      << after[0]["failure"] << start.err;
  EXPECT_EQ(Airlock({"rm", "-f", "waiting"}).exit_code, 0);
}

TEST_F(AgentsE2ETest, BadInputIsRefusedAndChangesNothing) {
  auto unknown = Airlock({"run", "--rm", "nosuchagent"});
  EXPECT_EQ(unknown.exit_code, 125) << unknown.err;
  EXPECT_NE(unknown.err.find("unknown agent \"nosuchagent\"; this release has: shell, claude, "
                             "codex, copilot, gemini, opencode, qwen"),
            std::string::npos)
      << unknown.err;
  auto bad = Airlock({"run", "--rm", "--kit-arg", "version=1;rm -rf /", "claude", "--", "true"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("version"), std::string::npos) << bad.err;
  EXPECT_EQ(Airlock({"ls", "-q"}).out, "");
}

}  // namespace
}  // namespace airlock
