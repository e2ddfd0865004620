#include "vmmd/peer_clients.h"

#include <grpcpp/grpcpp.h>

#include <set>

#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/git/v1/git.grpc.pb.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::vmmd {
namespace {

namespace gitpb = airlock::git::v1;
namespace policypb = airlock::policy::v1;

Peer UnixPeer() { return Peer::Unix("/run/airlock/gitd.sock"); }

TEST(PeerCallErrorTest, OkIsOk) {
  EXPECT_TRUE(PeerCallError("gitd", UnixPeer(), "x", grpc::Status::OK).ok());
}

TEST(PeerCallErrorTest, APeerThatDoesNotAnswerIsUnavailableWithHowToStartIt) {
  for (auto code : {grpc::StatusCode::UNAVAILABLE, grpc::StatusCode::DEADLINE_EXCEEDED}) {
    absl::Status s = PeerCallError("gitd", UnixPeer(), "record the baseline",
                                   grpc::Status(code, "connect failed"));
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_EQ(s.message(),
              "gitd at /run/airlock/gitd.sock did not record the baseline (connect failed); "
              "start it with `airlock daemon start`");
  }
  auto tls = std::make_shared<PeerTls>();
  auto tcp = ParsePeer("--policyd", "policy.internal:7441", tls);
  ASSERT_TRUE(tcp.ok());
  absl::Status s = PeerCallError("policyd", *tcp, "resolve the kits",
                                 grpc::Status(grpc::StatusCode::UNAVAILABLE, "handshake failed"));
  EXPECT_NE(s.message().find("check that it runs and answers at policy.internal:7441"),
            absl::string_view::npos)
      << s;
  EXPECT_EQ(s.message().find("airlock daemon start"), absl::string_view::npos) << s;
}

TEST(PeerCallErrorTest, ARefusalKeepsItsCodeAndNeverSaysStartTheDaemon) {
  for (auto code : {grpc::StatusCode::INVALID_ARGUMENT, grpc::StatusCode::FAILED_PRECONDITION,
                    grpc::StatusCode::NOT_FOUND, grpc::StatusCode::ALREADY_EXISTS,
                    grpc::StatusCode::OUT_OF_RANGE, grpc::StatusCode::RESOURCE_EXHAUSTED}) {
    absl::Status s =
        PeerCallError("gitd", UnixPeer(), "prepare the clone", grpc::Status(code, "not a repo"));
    EXPECT_EQ(static_cast<int>(s.code()), static_cast<int>(code));
    EXPECT_EQ(s.message(), "gitd refused to prepare the clone: not a repo");
  }
}

TEST(PeerCallErrorTest, APeerRefusingVmmdItselfIsNotTheCallersAuthFailure) {
  for (auto code : {grpc::StatusCode::PERMISSION_DENIED, grpc::StatusCode::UNAUTHENTICATED}) {
    absl::Status s = PeerCallError("secretsd", UnixPeer(), "resolve the registry credential",
                                   grpc::Status(code, "not vmmd"));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ(s.message().rfind("secretsd at /run/airlock/gitd.sock refused vmmd's call to "
                                "resolve the registry credential: not vmmd",
                                0),
              0u)
        << s;
  }
}

TEST(PeerCallErrorTest, APeersBugIsInternalNeverTheUsersBadInput) {
  for (auto code : {grpc::StatusCode::INTERNAL, grpc::StatusCode::UNKNOWN,
                    grpc::StatusCode::DATA_LOSS, grpc::StatusCode::ABORTED,
                    grpc::StatusCode::CANCELLED}) {
    absl::Status s =
        PeerCallError("gitd", UnixPeer(), "prepare the clone", grpc::Status(code, "boom"));
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
    EXPECT_EQ(s.message(), "gitd failed to prepare the clone: boom");
  }
  absl::Status old = PeerCallError("gitd", UnixPeer(), "prepare the clone",
                                   grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "no method"));
  EXPECT_EQ(old.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(old.message().find("another version of Airlock"), absl::string_view::npos);
}

// A gitd and a policyd that answer as the test says, on real sockets.
class FakeGit final : public gitpb::Git::Service {
 public:
  grpc::Status prepare = grpc::Status::OK;
  grpc::Status unpublish = grpc::Status::OK;
  grpc::Status PrepareClone(grpc::ServerContext*, const gitpb::PrepareCloneRequest* req,
                            gitpb::PrepareCloneResponse* resp) override {
    resp->set_source_root(req->path());
    resp->set_branch(req->branch().empty() ? "main" : req->branch());
    return prepare;
  }
  grpc::Status Unpublish(grpc::ServerContext*, const gitpb::UnpublishRequest*,
                         gitpb::UnpublishResponse*) override {
    return unpublish;
  }
};

class FakePolicy final : public policypb::Policy::Service {
 public:
  std::mutex mu;
  std::vector<policypb::Rule> rules;
  std::set<std::string> vanish;  // ids that are gone by the time they are removed
  std::vector<std::string> removed;
  grpc::Status ListRules(grpc::ServerContext*, const policypb::ListRulesRequest*,
                         policypb::ListRulesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& r : rules) *resp->add_rules() = r;
    return grpc::Status::OK;
  }
  grpc::Status RemoveRules(grpc::ServerContext*, const policypb::RemoveRulesRequest* req,
                           policypb::RemoveRulesResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    if (vanish.count(req->id())) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such rule");
    if (req->id() == "broken") return grpc::Status(grpc::StatusCode::INTERNAL, "disk I/O error");
    removed.push_back(req->id());
    return grpc::Status::OK;
  }
};

class FakeProxy final : public airlock::proxy::v1::Proxy::Service {
 public:
  grpc::Status Detach(grpc::ServerContext*, const airlock::proxy::v1::DetachRequest* req,
                      airlock::proxy::v1::DetachResponse*) override {
    if (req->sandbox() == "known") return grpc::Status::OK;
    if (req->sandbox() == "broken") return grpc::Status(grpc::StatusCode::INTERNAL, "boom");
    return grpc::Status(grpc::StatusCode::NOT_FOUND, "no attachment");
  }
};

class PeerClientsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_.path() + "/peers.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&git_);
    b.RegisterService(&policy_);
    b.RegisterService(&proxy_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    Peer at = Peer::Unix(dir_.path() + "/peers.sock");
    clients_ = GrpcPeerClients(at, at, at, at);
  }
  void TearDown() override { server_->Shutdown(); }

  testing::ShortTempDir dir_;
  FakeGit git_;
  FakePolicy policy_;
  FakeProxy proxy_;
  std::unique_ptr<grpc::Server> server_;
  PeerClients clients_;
};

policypb::Rule RuleOf(const std::string& id, const std::string& sandbox) {
  policypb::Rule r;
  r.set_id(id);
  r.set_sandbox(sandbox);
  return r;
}

TEST_F(PeerClientsTest, ForgetSandboxRulesRemovesOnlyThatSandboxsRules) {
  policy_.rules = {RuleOf("g1", ""), RuleOf("a1", "a"), RuleOf("b1", "b"), RuleOf("a2", "a"),
                   RuleOf("a3", "a")};
  policy_.vanish = {"a2"};
  ASSERT_TRUE(clients_.policy->ForgetSandboxRules("a").ok());
  EXPECT_EQ(policy_.removed, (std::vector<std::string>{"a1", "a3"}));
}

TEST_F(PeerClientsTest, APolicydFailureWhileForgettingIsInternal) {
  policy_.rules = {RuleOf("broken", "a")};
  absl::Status s = clients_.policy->ForgetSandboxRules("a");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "policyd failed to drop the sandbox's own rules: disk I/O error");
}

TEST_F(PeerClientsTest, GitdsAnswersReachTheCallerWithTheirOwnCodes) {
  auto ok = clients_.git->PrepareClone("s", "/src/repo", "");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->source_root(), "/src/repo");
  EXPECT_EQ(ok->branch(), "main");
  // Was INVALID_ARGUMENT "clone mode: ..." for any failure.
  git_.prepare = grpc::Status(grpc::StatusCode::INTERNAL, "git exited 128");
  auto broken = clients_.git->PrepareClone("s", "/src/repo", "");
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kInternal);
  git_.prepare = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "/src/repo is not a git repo");
  auto refused = clients_.git->PrepareClone("s", "/src/repo", "");
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(refused.status().message(),
            "gitd refused to prepare the clone-mode workspace: /src/repo is not a git repo");
  // Was UNAVAILABLE "... (`airlock daemon start`)" for any failure.
  git_.unpublish = grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "remote is not ours");
  absl::Status un = clients_.git->Unpublish("s");
  EXPECT_EQ(un.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(un.message().find("daemon start"), absl::string_view::npos) << un;
}

TEST_F(PeerClientsTest, DetachOfASandboxProxydDoesNotKnowIsDone) {
  EXPECT_TRUE(clients_.proxy->Detach("known").ok());
  EXPECT_TRUE(clients_.proxy->Detach("unknown").ok());
  EXPECT_EQ(clients_.proxy->Detach("broken").code(), absl::StatusCode::kInternal);
}

TEST_F(PeerClientsTest, APeerThatIsNotThereIsUnavailable) {
  server_->Shutdown();
  Peer gone = Peer::Unix(dir_.path() + "/nobody.sock");
  PeerClients c = GrpcPeerClients(gone, gone, gone, gone);
  absl::Status s = c.proxy->Attach("s", "/x");
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("proxyd at " + dir_.path() + "/nobody.sock did not attach"),
            absl::string_view::npos)
      << s;
  // Detach through a proxyd that cannot be reached is not done.
  EXPECT_EQ(c.proxy->Detach("s").code(), absl::StatusCode::kUnavailable);
}

class FakeSecrets final : public airlock::secrets::v1::Secrets::Service {
 public:
  explicit FakeSecrets(std::string value) : value_(std::move(value)) {}
  grpc::Status Sentinels(grpc::ServerContext*, const airlock::secrets::v1::SentinelsRequest* req,
                         airlock::secrets::v1::SentinelsResponse* resp) override {
    (*resp->mutable_env())["TOKEN"] = value_ + ":" + req->sandbox();
    return grpc::Status::OK;
  }

 private:
  std::string value_;
};

std::unique_ptr<grpc::Server> ServeSecrets(const std::string& socket, FakeSecrets* service) {
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + socket, grpc::InsecureServerCredentials());
  b.RegisterService(service);
  return b.BuildAndStart();
}

TEST(KeptSecretsChannelTest, ARestartedSecretsdAnswersTheNextCall) {
  testing::ShortTempDir dir;
  std::string socket = dir.path() + "/secretsd.sock";
  Peer at = Peer::Unix(socket);
  PeerClients c = GrpcPeerClients(at, at, at, at);
  FakeSecrets first("first");
  auto server = ServeSecrets(socket, &first);
  ASSERT_NE(server, nullptr);
  for (int i = 0; i < 3; ++i) {
    auto env = c.secrets->Sentinels("s", false, false);
    ASSERT_TRUE(env.ok()) << env.status();
    EXPECT_EQ(env->at("TOKEN"), "first:s");
  }
  // The kept channel's secretsd goes; calls meanwhile say it is down.
  server->Shutdown();
  server.reset();
  auto down = c.secrets->Sentinels("s", false, false);
  EXPECT_EQ(down.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(down.status().message().find("secretsd at " + socket +
                                         " did not give the sandbox's credential variables"),
            absl::string_view::npos)
      << down.status();
  // A new secretsd on the same socket answers the very next call.
  FakeSecrets second("second");
  server = ServeSecrets(socket, &second);
  ASSERT_NE(server, nullptr);
  auto env = c.secrets->Sentinels("t", false, false);
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(env->at("TOKEN"), "second:t");
  server->Shutdown();
}

}  // namespace
}  // namespace airlock::vmmd
