// Runs the built secretsd binary: how it treats its key file at startup,
// and that no plaintext value reaches its state files or its log.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>

#include "common/client.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock {
namespace {

namespace pb = airlock::secrets::v1;

using testing::BinaryPath;
using testing::RunCommand;

const char kMarker[] = "PLAINTEXT-9c2e1f-MARKER";

std::string SelfExe() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

class SecretsdIntegrationTest : public ::testing::Test {
 protected:
  std::string Run() { return dir_.path() + "/run"; }
  std::string State() { return dir_.path() + "/state"; }
  std::string Log() { return dir_.path() + "/secretsd.log"; }
  std::vector<std::string> Args(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {BinaryPath("secretsd/secretsd"), "--runtime-dir=" + Run(),
                                     "--state-dir=" + State(), "--log-level=debug"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }

  // Starts secretsd with its log in Log() and waits until it serves.
  void Start(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = Args(std::move(extra));
    pid_ = fork();
    if (pid_ == 0) {
      int fd = open(Log().c_str(), O_WRONLY | O_CREAT | O_APPEND, 0600);
      dup2(fd, 2);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    ASSERT_GT(pid_, 0);
    // Dial once the socket exists: a channel that first met no socket
    // waits seconds before it tries again.
    std::string sock = Run() + "/secretsd.sock";
    struct stat st;
    for (int i = 0; i < 400 && stat(sock.c_str(), &st) != 0; ++i) usleep(25000);
    channel_ = DialUnix(sock);
    ASSERT_TRUE(WaitHealthy(*channel_, std::chrono::seconds(20)).ok()) << ReadFileToString(Log());
    stub_ = pb::Secrets::NewStub(channel_);
  }

  // Stops it with SIGTERM; its exit code.
  int Stop() {
    stub_.reset();
    channel_.reset();
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = 0;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  void TearDown() override {
    if (pid_ > 0) Stop();
  }

  testing::ShortTempDir dir_;
  pid_t pid_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Secrets::Stub> stub_;
};

TEST_F(SecretsdIntegrationTest, CreatesItsKeyAndKeepsPlaintextOutOfStateAndLog) {
  // This test binary plays proxyd, so Resolve decrypts for real.
  Start({"--proxyd-exe=" + SelfExe()});
  struct stat st;
  ASSERT_EQ(stat((State() + "/secrets.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600);
  EXPECT_EQ(st.st_size, 32);

  const std::string v = kMarker;
  auto set = [&](pb::Scope scope, const std::string& sandbox, const std::string& service,
                 const std::string& value, const std::string& env = "") {
    grpc::ClientContext ctx;
    pb::SetRequest req;
    req.set_scope(scope);
    req.set_sandbox(sandbox);
    req.set_service(service);
    req.set_value(value);
    if (!env.empty()) {
      req.set_env(env);
      req.add_hosts("*.example.com");
    }
    pb::SecretInfo info;
    return stub_->Set(&ctx, req, &info);
  };
  ASSERT_TRUE(set(pb::GLOBAL, "", "anthropic", v + "-a").ok());
  ASSERT_TRUE(set(pb::GLOBAL, "", "", v + "-custom", "MY_TOKEN").ok());
  ASSERT_TRUE(set(pb::SANDBOX, "box1", "github", v + "-gh").ok());
  ASSERT_TRUE(set(pb::GLOBAL, "", "anthropic", v + "-rotated").ok());
  grpc::Status bad = set(pb::GLOBAL, "", "anthropic", v + "\n");
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message().find(kMarker), std::string::npos);

  grpc::ClientContext sctx;
  pb::SentinelsRequest sreq;
  sreq.set_sandbox("box1");
  pb::SentinelsResponse env;
  ASSERT_TRUE(stub_->Sentinels(&sctx, sreq, &env).ok());
  EXPECT_EQ(env.env().at("ANTHROPIC_API_KEY"), "proxy-managed");
  EXPECT_EQ(env.env().at("MY_TOKEN").rfind("sbx-cs-", 0), 0u);

  for (const char* host : {"api.anthropic.com", "api.github.com", "x.example.com"}) {
    grpc::ClientContext ctx;
    pb::ResolveRequest req;
    req.set_sandbox("box1");
    req.set_host(host);
    pb::ResolveResponse resp;
    ASSERT_TRUE(stub_->Resolve(&ctx, req, &resp).ok()) << host;
    ASSERT_EQ(resp.credentials_size(), 1) << host;
    EXPECT_EQ(resp.credentials(0).value().rfind(kMarker, 0), 0u) << host;
  }

  grpc::ClientContext lctx;
  pb::ListResponse list;
  ASSERT_TRUE(stub_->List(&lctx, {}, &list).ok());
  EXPECT_EQ(list.secrets_size(), 3);
  EXPECT_EQ(list.SerializeAsString().find(kMarker), std::string::npos);

  grpc::ClientContext dctx;
  pb::DeleteRequest dreq;
  dreq.set_id("github@box1");
  pb::DeleteResponse dresp;
  ASSERT_TRUE(stub_->Delete(&dctx, dreq, &dresp).ok());

  auto scan = [&](const std::string& when) {
    std::string db = ReadFileToString(State() + "/secretsd.db") +
                     ReadFileToString(State() + "/secretsd.db-wal") +
                     ReadFileToString(State() + "/secretsd.db-shm");
    std::string log = ReadFileToString(Log());
    // The scans see real content: ids are stored and logged in clear.
    EXPECT_NE(db.find("custom:MY_TOKEN@global"), std::string::npos) << when;
    EXPECT_NE(log.find("resolved"), std::string::npos) << when;
    EXPECT_NE(log.find("github@box1"), std::string::npos) << when;
    EXPECT_EQ(db.find(kMarker), std::string::npos) << when;
    EXPECT_EQ(log.find(kMarker), std::string::npos) << when << "\n" << log;
    EXPECT_EQ(ReadFileToString(State() + "/secrets.key").find(kMarker), std::string::npos);
  };
  scan("while running");
  EXPECT_EQ(Stop(), 0);
  scan("after stop");
}

TEST_F(SecretsdIntegrationTest, RefusesAKeyFileOthersCanRead) {
  ASSERT_EQ(system(("mkdir -p " + State() + " && head -c 32 /dev/urandom > " + State() +
                    "/secrets.key && chmod 644 " + State() + "/secrets.key")
                       .c_str()),
            0);
  CommandResult r = RunCommand(Args(), {}, "", 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(State() + "/secrets.key"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("chmod 600"), std::string::npos) << r.err;
  EXPECT_FALSE(CheckHealth(*DialUnix(Run() + "/secretsd.sock"), std::chrono::seconds(1)).ok());
}

TEST_F(SecretsdIntegrationTest, UsesAnOperatorKeyFileAndRefusesOneOfTheWrongSize) {
  std::string key = dir_.path() + "/operator.key";
  ASSERT_EQ(system(("head -c 16 /dev/urandom > " + key + " && chmod 600 " + key).c_str()), 0);
  CommandResult r = RunCommand(Args({"--key-file=" + key}), {}, "", 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exactly 32"), std::string::npos) << r.err;

  ASSERT_EQ(system(("head -c 32 /dev/urandom > " + key).c_str()), 0);
  Start({"--key-file=" + key});
  struct stat st;
  EXPECT_NE(stat((State() + "/secrets.key").c_str(), &st), 0) << "the default key was not made";
  grpc::ClientContext ctx;
  pb::SetRequest req;
  req.set_scope(pb::GLOBAL);
  req.set_service("openai");
  req.set_value("v");
  pb::SecretInfo info;
  ASSERT_TRUE(stub_->Set(&ctx, req, &info).ok());
  EXPECT_EQ(Stop(), 0);

  // Restarted without that key, it refuses instead of starting over.
  r = RunCommand(Args(), {}, "", 30);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("missing"), std::string::npos) << r.err;
}

TEST_F(SecretsdIntegrationTest, WithoutAProxydBinaryNobodyResolves) {
  // Under Bazel the test's secretsd has no proxyd beside it, unless
  // //proxyd was built; name one that is surely not this test.
  Start({"--proxyd-exe=/bin/sh"});
  grpc::ClientContext ctx;
  pb::ResolveRequest req;
  req.set_sandbox("box1");
  req.set_host("api.openai.com");
  pb::ResolveResponse resp;
  grpc::Status s = stub_->Resolve(&ctx, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(s.error_message(), "only proxyd may resolve secrets");
  EXPECT_EQ(Stop(), 0);
  std::string log = ReadFileToString(Log());
  EXPECT_NE(log.find("resolve refused"), std::string::npos) << log;
  EXPECT_NE(log.find("\"caller\":\"pid " + std::to_string(getpid())), std::string::npos) << log;
}

}  // namespace
}  // namespace airlock
