// ManagementApi against fake vmmd and policyd (gRPC services in this
// process): idempotent creates and their crash retry, bad bodies that
// reach no daemon, inline policies rolled back with a refused create,
// ETag preconditions, deletes, and the sandboxes vmmd keeps to itself.
#include "apid/management_api.h"

#include <grpcpp/grpcpp.h>
#include <stdlib.h>
#include <time.h>

#include <map>
#include <thread>

#include "apid/signer.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/vmm/v1/vmm.grpc.pb.h"

namespace airlock::apid {
namespace {

namespace vmm = airlock::vmm::v1;
namespace pb = airlock::policy::v1;
using nlohmann::json;

class FakeVmm final : public vmm::Vmm::Service {
 public:
  grpc::Status Create(grpc::ServerContext*, const vmm::CreateRequest* req,
                      vmm::CreateResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    ++creates;
    if (req->spec().agent() == "bad") {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "unknown agent \"bad\"");
    }
    if (boxes.count(req->spec().name())) {
      return grpc::Status(grpc::StatusCode::ALREADY_EXISTS, "taken");
    }
    vmm::Sandbox sb;
    *sb.mutable_spec() = req->spec();
    sb.set_state(vmm::CREATING);
    sb.set_created_at(1700000000);
    boxes[sb.spec().name()] = sb;
    *resp->mutable_sandbox() = sb;
    return grpc::Status::OK;
  }
  grpc::Status Get(grpc::ServerContext*, const vmm::GetRequest* req, vmm::Sandbox* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = boxes.find(req->name());
    if (it == boxes.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no sandbox");
    *resp = it->second;
    return grpc::Status::OK;
  }
  grpc::Status List(grpc::ServerContext*, const vmm::ListRequest*,
                    vmm::ListResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& [n, sb] : boxes) *resp->add_sandboxes() = sb;
    return grpc::Status::OK;
  }
  grpc::Status Remove(grpc::ServerContext*, const vmm::RemoveRequest* req,
                      vmm::RemoveResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    if (!boxes.erase(req->name())) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no sandbox");
    return grpc::Status::OK;
  }
  grpc::Status SetDisplayName(grpc::ServerContext*, const vmm::SetDisplayNameRequest* req,
                              vmm::Sandbox* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = boxes.find(req->name());
    if (it == boxes.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no sandbox");
    it->second.mutable_spec()->set_display_name(req->display_name());
    *resp = it->second;
    return grpc::Status::OK;
  }
  grpc::Status InspectImage(grpc::ServerContext*, const vmm::InspectImageRequest*,
                            vmm::Image* resp) override {
    resp->set_id("sha256:00");
    return grpc::Status::OK;
  }
  std::mutex mu;
  std::map<std::string, vmm::Sandbox> boxes;
  int creates = 0;
};

class FakePolicy final : public pb::Policy::Service {
 public:
  grpc::Status AddRules(grpc::ServerContext*, const pb::AddRulesRequest* req,
                        pb::AddRulesResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto r : req->rules()) {
      r.set_id(std::to_string(++next));
      rules.push_back(r);
    }
    return grpc::Status::OK;
  }
  grpc::Status ListRules(grpc::ServerContext*, const pb::ListRulesRequest* req,
                         pb::ListRulesResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& r : rules) {
      if (req->sandbox().empty() || r.sandbox().empty() || r.sandbox() == req->sandbox()) {
        *resp->add_rules() = r;
      }
    }
    return grpc::Status::OK;
  }
  grpc::Status RemoveRules(grpc::ServerContext*, const pb::RemoveRulesRequest* req,
                           pb::RemoveRulesResponse*) override {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = rules.begin(); it != rules.end();) {
      it = it->id() == req->id() ? rules.erase(it) : std::next(it);
    }
    return grpc::Status::OK;
  }
  size_t For(const std::string& sandbox) {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& r : rules) n += r.sandbox() == sandbox;
    return n;
  }
  std::mutex mu;
  std::vector<pb::Rule> rules;
  int next = 0;
};

class ManagementApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/apid-mgmt-XXXXXX";
    dir_ = mkdtemp(tmpl);
    db_ = std::move(*StateDb::Open(dir_ + "/apid.db"));
    tokens_ = std::make_unique<TokenStore>(db_.get());
    ASSERT_TRUE(tokens_->Init().ok());
    ledger_ = std::make_unique<IdempotencyLedger>(db_.get());
    grpc::ServerBuilder b;
    b.RegisterService(&vmmd_);
    b.RegisterService(&policyd_);
    server_ = b.BuildAndStart();
    vmm_ = std::make_unique<VmmClient>(server_->InProcessChannel(grpc::ChannelArguments()));
    policy_ = std::make_unique<PolicyClient>(server_->InProcessChannel(grpc::ChannelArguments()));
    signer_ = std::make_unique<Signer>(std::string(32, 'k'));
    auth_ = std::make_unique<Authenticator>(signer_.get(), tokens_.get());
    ManagementOptions o;
    o.base_url = "http://127.0.0.1:7777";
    o.on_deleted = [this](const std::string& uid) { deleted_.push_back(uid); };
    api_ = std::make_unique<ManagementApi>(o, auth_.get(), tokens_.get(), ledger_.get(),
                                           vmm_.get(), policy_.get(), &background_);
    api_->Register(&router_);
    auto made = tokens_->Create("t", time(nullptr));
    auto rec = tokens_->Exchange("t", made->second, time(nullptr));
    bearer_ = "Bearer " + auth_->IssueAccess(*rec, time(nullptr), 600);
  }
  void TearDown() override {
    background_.Join();
    server_->Shutdown();
    (void)!system(("rm -rf " + dir_).c_str());
  }
  HttpResponse Call(const std::string& method, const std::string& path, const std::string& body = "",
                    std::map<std::string, std::string> headers = {}) {
    HttpRequest r;
    r.method = method;
    SplitTarget(path, &r.path, &r.query);
    r.headers = std::move(headers);
    r.headers["authorization"] = bearer_;
    r.body = body;
    return router_.Handle(r);
  }
  std::string EtagOf(const std::string& uid) { return Call("GET", "/v1/sandboxes/" + uid).headers["ETag"]; }

  std::string dir_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<TokenStore> tokens_;
  std::unique_ptr<IdempotencyLedger> ledger_;
  FakeVmm vmmd_;
  FakePolicy policyd_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<VmmClient> vmm_;
  std::unique_ptr<PolicyClient> policy_;
  std::unique_ptr<Signer> signer_;
  std::unique_ptr<Authenticator> auth_;
  Background background_;
  std::unique_ptr<ManagementApi> api_;
  Router router_;
  std::string bearer_;
  std::vector<std::string> deleted_;
};

TEST_F(ManagementApiTest, IdempotentCreate) {
  auto a = Call("POST", "/v1/sandboxes", R"({"displayName":"x"})", {{"idempotency-key", "k"}});
  ASSERT_EQ(a.status, 202) << a.body;
  auto b = Call("POST", "/v1/sandboxes", R"({ "displayName" : "x" })", {{"idempotency-key", "k"}});
  EXPECT_EQ(b.body, a.body) << "same payload (whitespace aside): the first answer";
  auto c = Call("POST", "/v1/sandboxes", R"({"displayName":"y"})", {{"idempotency-key", "k"}});
  EXPECT_EQ(c.status, 409);
  EXPECT_EQ(vmmd_.creates, 1);
  EXPECT_EQ(vmmd_.boxes.size(), 1u);
}

TEST_F(ManagementApiTest, CreateRetriedAfterACrashFindsItsSandbox) {
  // A first attempt reserved uid shell-cafe and reached vmmd, then apid died.
  std::string payload_body = R"({"displayName":"x"})";
  HttpRequest probe;
  probe.method = "POST";
  probe.path = "/v1/sandboxes";
  probe.body = payload_body;
  std::string hash = Sha256Hex("POST /v1/sandboxes\n" + json::parse(payload_body).dump());
  ASSERT_TRUE(ledger_->Reserve("t|createSandbox", "k", hash, "shell-cafe", time(nullptr)).ok());
  vmm::Sandbox sb;
  sb.mutable_spec()->set_name("shell-cafe");
  sb.set_state(vmm::STARTING);
  vmmd_.boxes["shell-cafe"] = sb;
  auto r = Call("POST", "/v1/sandboxes", payload_body, {{"idempotency-key", "k"}});
  ASSERT_EQ(r.status, 202) << r.body;
  EXPECT_EQ(json::parse(r.body)["uid"], "shell-cafe");
  EXPECT_EQ(vmmd_.creates, 0) << "no second sandbox";
}

TEST_F(ManagementApiTest, BadBodiesReachNoDaemon) {
  for (const char* body : {R"({"bogus":1})", R"({"resources":{"cpus":3,"memoryMib":1}})",
                           R"({"image":"x","imageRef":"y"})", R"({"networkPolicies":[{"mode":"allowAll"}]})",
                           R"({"displayName":"has space"})", "[]", "not json"}) {
    auto r = Call("POST", "/v1/sandboxes", body);
    EXPECT_EQ(r.status, 400) << body << " -> " << r.body;
  }
  EXPECT_EQ(Call("POST", "/v1/sandboxes", R"({"mcp":{}})").status, 501);
  EXPECT_EQ(vmmd_.creates, 0);
  EXPECT_TRUE(policyd_.rules.empty());
}

TEST_F(ManagementApiTest, RefusedCreateTakesItsRulesBack) {
  auto r = Call("POST", "/v1/sandboxes",
                R"({"agent":"bad","networkPolicies":[{"mode":"denyAll","allowNetworks":["a.example"]}]})");
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_TRUE(policyd_.rules.empty());
  auto ok = Call("POST", "/v1/sandboxes",
                 R"({"networkPolicies":[{"mode":"denyAll","allowNetworks":["a.example"],"denyNetworks":["10.0.0.0/8"]}]})");
  ASSERT_EQ(ok.status, 202);
  EXPECT_EQ(policyd_.For(json::parse(ok.body)["uid"]), 2u);
}

TEST_F(ManagementApiTest, PreconditionsAndDelete) {
  auto made = Call("POST", "/v1/sandboxes", "{}");
  std::string uid = json::parse(made.body)["uid"];
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + uid).status, 428);
  auto stale = Call("DELETE", "/v1/sandboxes/" + uid, "", {{"if-match", "\"old\""}});
  EXPECT_EQ(stale.status, 412);
  EXPECT_EQ(json::parse(stale.body)["details"][0]["currentEtag"], EtagOf(uid));
  EXPECT_EQ(Call("PATCH", "/v1/sandboxes/" + uid, R"({"displayName":"n"})",
                 {{"if-match", EtagOf(uid)}}).status,
            400)
      << "updateSandbox needs an Idempotency-Key";
  auto renamed = Call("PATCH", "/v1/sandboxes/" + uid, R"({"displayName":"n"})",
                      {{"if-match", EtagOf(uid)}, {"idempotency-key", "p"}});
  EXPECT_EQ(renamed.status, 200);
  EXPECT_EQ(vmmd_.boxes[uid].spec().display_name(), "n");
  auto del = Call("DELETE", "/v1/sandboxes/" + uid, "", {{"if-match", EtagOf(uid)}});
  EXPECT_EQ(del.status, 202);
  EXPECT_EQ(json::parse(del.body)["core"]["status"], "deleting");
  background_.Join();
  EXPECT_EQ(vmmd_.boxes.count(uid), 0u);
  EXPECT_EQ(deleted_, std::vector<std::string>{uid});
  EXPECT_EQ(Call("DELETE", "/v1/sandboxes/" + uid, "", {{"if-match", "\"x\""}}).status, 204);
  EXPECT_EQ(Call("GET", "/v1/sandboxes/" + uid).status, 404);
}

TEST_F(ManagementApiTest, VmmdsOwnSandboxesAreNotVisible) {
  vmm::Sandbox sb;
  sb.mutable_spec()->set_name("claude-install");
  sb.set_installs_agent_image("agents/claude:1");
  sb.set_state(vmm::RUNNING);
  vmmd_.boxes["claude-install"] = sb;
  EXPECT_EQ(Call("GET", "/v1/sandboxes/claude-install").status, 404);
  EXPECT_EQ(Call("POST", "/v1/sandboxes/claude-install/endpoint-credentials",
                 R"({"permissions":["sandboxesExec"]})").status,
            404);
  EXPECT_EQ(json::parse(Call("GET", "/v1/sandboxes").body).value("sandboxes", json::array()).size(),
            0u);
}

TEST_F(ManagementApiTest, StopOfASandboxThatIsNotRunning) {
  vmm::Sandbox sb;
  sb.mutable_spec()->set_name("busy");
  sb.set_state(vmm::CREATING);
  vmmd_.boxes["busy"] = sb;
  auto r = Call("POST", "/v1/sandboxes/busy/stop", "", {{"if-match", EtagOf("busy")}});
  EXPECT_EQ(r.status, 409);
  EXPECT_EQ(json::parse(r.body)["code"], "failedPrecondition");
}

}  // namespace
}  // namespace airlock::apid
