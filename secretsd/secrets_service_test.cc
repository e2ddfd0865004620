// Drives SecretsService through the real daemon runtime, in this process:
// over its Unix socket (the caller is this test binary, so whether it
// counts as proxyd or vmmd is decided by the policy's binaries) and over
// mTLS TCP.
#include "secretsd/secrets_service.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "common/client.h"
#include "common/daemon_runtime.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "secretsd/resolver_auth.h"

namespace airlock::secretsd {
namespace {

namespace pb = airlock::secrets::v1;

const char kValue[] = "sk-test-SERVICE-MARKER-0a1b2c";

std::string SelfExe() { return *CanonicalPath("/proc/self/exe"); }

// A port that was free a moment ago.
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  close(fd);
  return ntohs(a.sin_port);
}

// Runs secretsd's service on the daemon runtime in a thread.
class Server {
 public:
  Server(const std::string& dir, std::vector<std::string> extra, ResolverPolicy policy) {
    std::vector<std::string> args = {"--runtime-dir=" + dir + "/run", "--state-dir=" + dir + "/st"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto config = ParseDaemonConfig("secretsd", args, {});
    EXPECT_TRUE(config.ok()) << config.status();
    auto rt = DaemonRuntime::Create(*config);
    EXPECT_TRUE(rt.ok()) << rt.status();
    rt_ = std::move(*rt);
    auto store = SecretStore::Open(&rt_->state(), dir + "/st/secrets.key");
    EXPECT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
    service_ = std::make_unique<SecretsService>(store_.get(), policy);
    thread_ = std::thread([this] {
      served_ = rt_->Serve({service_.get()}, nullptr, [this] { service_->EndStreams(); });
    });
    channel_ = DialUnix(dir + "/run/secretsd.sock");
    EXPECT_TRUE(WaitHealthy(*channel_, std::chrono::seconds(10)).ok());
    stub_ = pb::Secrets::NewStub(channel_);
  }
  ~Server() {
    DaemonRuntime::RequestStop();
    thread_.join();
    EXPECT_TRUE(served_.ok()) << served_;
  }
  pb::Secrets::Stub& stub() { return *stub_; }

 private:
  std::unique_ptr<DaemonRuntime> rt_;
  std::unique_ptr<SecretStore> store_;
  std::unique_ptr<SecretsService> service_;
  std::thread thread_;
  absl::Status served_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::Secrets::Stub> stub_;
};

grpc::Status SetGlobal(pb::Secrets::Stub& stub, const std::string& service,
                       const std::string& value, pb::SecretInfo* out) {
  grpc::ClientContext ctx;
  pb::SetRequest req;
  req.set_scope(pb::GLOBAL);
  req.set_service(service);
  req.set_value(value);
  return stub.Set(&ctx, req, out);
}

grpc::Status Sentinels(pb::Secrets::Stub& stub, const std::string& sandbox,
                       pb::SentinelsResponse* out) {
  grpc::ClientContext ctx;
  pb::SentinelsRequest req;
  req.set_sandbox(sandbox);
  return stub.Sentinels(&ctx, req, out);
}

grpc::Status Resolve(pb::Secrets::Stub& stub, const std::string& sandbox, const std::string& host,
                     pb::ResolveResponse* out) {
  grpc::ClientContext ctx;
  pb::ResolveRequest req;
  req.set_sandbox(sandbox);
  req.set_host(host);
  return stub.Resolve(&ctx, req, out);
}

grpc::Status SetRegistry(pb::Secrets::Stub& stub, const std::string& host, const std::string& value,
                         pb::SecretInfo* out) {
  grpc::ClientContext ctx;
  pb::SetRequest req;
  req.set_scope(pb::GLOBAL);
  req.set_registry(host);
  req.set_value(value);
  return stub.Set(&ctx, req, out);
}

grpc::Status ResolveRegistry(pb::Secrets::Stub& stub, const std::string& host,
                             pb::RegistryCredential* out) {
  grpc::ClientContext ctx;
  pb::ResolveRegistryRequest req;
  req.set_host(host);
  return stub.ResolveRegistry(&ctx, req, out);
}

// This test binary is vmmd; proxyd is some other binary.
ResolverPolicy SelfIsVmmd() {
  return ResolverPolicy{getuid(), *CanonicalPath("/bin/sh"), "proxyd", SelfExe(), "vmmd"};
}

TEST(SecretsServiceTest, ACallerThatIsNotProxydCannotResolveButMayManage) {
  testing::ShortTempDir dir;
  // proxyd is some other binary: this test process is not it.
  Server server(dir.path(), {}, ResolverPolicy{getuid(), *CanonicalPath("/bin/sh"), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();

  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "anthropic", kValue, &info).ok());
  EXPECT_EQ(info.id(), "anthropic@global");
  EXPECT_EQ(info.scope(), pb::GLOBAL);
  EXPECT_EQ(info.env(), "ANTHROPIC_API_KEY");
  EXPECT_EQ(info.sentinel(), "proxy-managed");
  EXPECT_EQ(info.SerializeAsString().find(kValue), std::string::npos);

  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().at("ANTHROPIC_API_KEY"), "proxy-managed");

  grpc::ClientContext lctx;
  pb::ListRequest lreq;
  lreq.set_sandbox("box1");
  pb::ListResponse list;
  ASSERT_TRUE(stub.List(&lctx, lreq, &list).ok());
  ASSERT_EQ(list.secrets_size(), 1);
  EXPECT_EQ(list.secrets(0).id(), "anthropic@global");
  EXPECT_EQ(list.SerializeAsString().find(kValue), std::string::npos);

  pb::ResolveResponse resolved;
  grpc::Status denied = Resolve(stub, "box1", "api.anthropic.com", &resolved);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "only proxyd may resolve secrets");
  EXPECT_EQ(resolved.credentials_size(), 0);
  // Identity comes before validation: a malformed request says nothing.
  EXPECT_EQ(Resolve(stub, "", "", &resolved).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  grpc::ClientContext dctx;
  pb::DeleteRequest dreq;
  dreq.set_id("anthropic@global");
  pb::DeleteResponse dresp;
  EXPECT_TRUE(stub.Delete(&dctx, dreq, &dresp).ok());
  grpc::ClientContext dctx2;
  EXPECT_EQ(stub.Delete(&dctx2, dreq, &dresp).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(SecretsServiceTest, TheProxydBinaryResolves) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().at("GH_TOKEN"), "proxy-managed");
  EXPECT_EQ(env.env().at("GITHUB_TOKEN"), "proxy-managed");

  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "github.com", &resolved).ok());
  ASSERT_EQ(resolved.credentials_size(), 1);
  EXPECT_EQ(resolved.credentials(0).id(), "github@global");
  EXPECT_EQ(resolved.credentials(0).value(), kValue);
  EXPECT_EQ(resolved.credentials(0).format(), "basic:x-access-token");
  EXPECT_EQ(resolved.credentials(0).sentinel(), "proxy-managed");

  pb::ResolveResponse bad;
  EXPECT_EQ(Resolve(stub, "box1", "", &bad).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST(SecretsServiceTest, ForgetDeletesTheSandboxsOwnSecrets) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  grpc::ClientContext sctx;
  pb::SetRequest set;
  set.set_scope(pb::SANDBOX);
  set.set_sandbox("box1");
  set.set_service("openai");
  set.set_value(kValue);
  pb::SecretInfo info;
  ASSERT_TRUE(stub.Set(&sctx, set, &info).ok());
  EXPECT_EQ(info.id(), "openai@box1");

  for (int i = 0; i < 2; ++i) {  // the second time there is nothing to forget
    grpc::ClientContext fctx;
    pb::ForgetRequest forget;
    forget.set_sandbox("box1");
    pb::ForgetResponse fresp;
    grpc::Status s = stub.Forget(&fctx, forget, &fresp);
    EXPECT_TRUE(s.ok()) << s.error_message();
  }
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "api.openai.com", &resolved).ok());
  EXPECT_EQ(resolved.credentials_size(), 0);
  grpc::ClientContext lctx;
  pb::ListResponse list;
  ASSERT_TRUE(stub.List(&lctx, {}, &list).ok());
  EXPECT_EQ(list.secrets_size(), 0);
}

TEST(SecretsServiceTest, SetErrorsAreInvalidArgumentWithoutTheValue) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  grpc::ClientContext ctx;
  pb::SetRequest req;
  req.set_service("openai");
  req.set_value(kValue);  // no scope
  pb::SecretInfo info;
  grpc::Status s = server.stub().Set(&ctx, req, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("scope"), std::string::npos) << s.error_message();
  EXPECT_EQ(s.error_message().find(kValue), std::string::npos);

  grpc::ClientContext ctx2;
  req.set_scope(pb::SANDBOX);
  req.set_sandbox("box1");
  req.add_hosts("api.openai.com");
  s = server.stub().Set(&ctx2, req, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("mutually exclusive"), std::string::npos) << s.error_message();
}

TEST(SecretsServiceTest, ServicesListsTheBuiltInTable) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  grpc::ClientContext ctx;
  pb::ServicesResponse resp;
  ASSERT_TRUE(server.stub().Services(&ctx, {}, &resp).ok());
  std::map<std::string, pb::Service> by_name;
  for (const auto& s : resp.services()) by_name[s.name()] = s;
  for (const char* name :
       {"anthropic", "openai", "github", "google", "groq", "mistral", "xai", "openrouter"}) {
    EXPECT_EQ(by_name.count(name), 1u) << name;
  }
  EXPECT_EQ(by_name["anthropic"].format(), "header:x-api-key");
  EXPECT_EQ(by_name["openai"].format(), "bearer");
  EXPECT_EQ(by_name["github"].format(), "github");
  ASSERT_EQ(by_name["github"].hosts_size(), 2);
  EXPECT_EQ(by_name["github"].hosts(1), "github.com");
  ASSERT_EQ(by_name["google"].env_size(), 2);
  EXPECT_EQ(by_name["google"].env(0), "GEMINI_API_KEY");
}

grpc::Status BindKit(pb::Secrets::Stub& stub, const pb::BindKitRequest& req,
                     pb::BindKitResponse* out) {
  grpc::ClientContext ctx;
  return stub.BindKit(&ctx, req, out);
}

TEST(SecretsServiceTest, BindKitPlacesAServiceWhereTheKitSays) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "anthropic", kValue, &info).ok());

  pb::BindKitRequest req;
  req.set_sandbox("box1");
  pb::KitCredential* anthropic = req.add_credentials();
  anthropic->set_service("anthropic");
  anthropic->set_env("CLAUDE_KEY");
  pb::KitInject* inject = anthropic->add_inject();
  inject->set_domain("api.anthropic.com");
  inject->set_format("header:X-Api-Key=Token %s");
  pb::KitCredential* codeforge = req.add_credentials();
  codeforge->set_service("codeforge");
  codeforge->add_inject()->set_domain("api.codeforge.dev");
  codeforge->mutable_inject(0)->set_format("bearer");
  pb::BindKitResponse bound;
  grpc::Status s = BindKit(stub, req, &bound);
  ASSERT_TRUE(s.ok()) << s.error_message();
  ASSERT_EQ(bound.unbound_size(), 1);
  EXPECT_EQ(bound.unbound(0), "codeforge");

  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().at("CLAUDE_KEY"), "proxy-managed");
  EXPECT_EQ(env.env().at("ANTHROPIC_API_KEY"), "proxy-managed");
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "api.anthropic.com:443", &resolved).ok());
  ASSERT_EQ(resolved.credentials_size(), 1);
  EXPECT_EQ(resolved.credentials(0).value(), kValue);
  EXPECT_EQ(resolved.credentials(0).format(), "header:X-Api-Key=Token %s");

  // A second binding of one service is refused, naming the field, and
  // changes nothing.
  pb::BindKitRequest twice = req;
  twice.mutable_credentials(1)->set_service("anthropic");
  s = BindKit(stub, twice, &bound);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("credentials[1]: service"), std::string::npos)
      << s.error_message();
  pb::BindKitRequest bad_format = req;
  bad_format.mutable_credentials(0)->mutable_inject(0)->set_format("header:Host");
  s = BindKit(stub, bad_format, &bound);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("credentials[0]: inject[0].format"), std::string::npos)
      << s.error_message();
  resolved.Clear();
  ASSERT_TRUE(Resolve(stub, "box1", "api.anthropic.com", &resolved).ok());
  ASSERT_EQ(resolved.credentials_size(), 1);
  EXPECT_EQ(resolved.credentials(0).format(), "header:X-Api-Key=Token %s");

  // An empty list removes the bindings.
  pb::BindKitRequest none;
  none.set_sandbox("box1");
  ASSERT_TRUE(BindKit(stub, none, &bound).ok());
  EXPECT_EQ(bound.unbound_size(), 0);
  env.Clear();
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().count("CLAUDE_KEY"), 0u);
  pb::ResolveResponse builtin;
  ASSERT_TRUE(Resolve(stub, "box1", "api.anthropic.com", &builtin).ok());
  ASSERT_EQ(builtin.credentials_size(), 1);
  EXPECT_EQ(builtin.credentials(0).format(), "header:x-api-key");
}

TEST(SecretsServiceTest, BindKitRefusesToSendABuiltInServicesSecretElsewhere) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());

  pb::BindKitRequest req;
  req.set_sandbox("box1");
  pb::KitCredential* github = req.add_credentials();
  github->set_service("github");
  github->set_env("GIT_PAT");
  github->add_inject()->set_domain("collect.evil.test");
  github->mutable_inject(0)->set_format("bearer");
  pb::BindKitResponse bound;
  grpc::Status s = BindKit(stub, req, &bound);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find(
                "kit credential github: inject domain \"collect.evil.test\" is not one of "
                "github's hosts (api.github.com, github.com); a kit cannot send a stored secret "
                "elsewhere"),
            std::string::npos)
      << s.error_message();
  EXPECT_EQ(s.error_message().find(kValue), std::string::npos);

  // Nothing was bound: the token goes to GitHub only, as built in.
  pb::ResolveResponse evil;
  ASSERT_TRUE(Resolve(stub, "box1", "collect.evil.test", &evil).ok());
  EXPECT_EQ(evil.credentials_size(), 0);
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().count("GIT_PAT"), 0u);
  pb::ResolveResponse api;
  ASSERT_TRUE(Resolve(stub, "box1", "api.github.com", &api).ok());
  ASSERT_EQ(api.credentials_size(), 1);
  EXPECT_EQ(api.credentials(0).format(), "bearer");

  // One of github's own hosts, in the Kit's format, binds.
  github->mutable_inject(0)->set_domain("github.com");
  github->mutable_inject(0)->set_format("basic:git");
  s = BindKit(stub, req, &bound);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bound.unbound_size(), 0);
  pb::ResolveResponse git;
  ASSERT_TRUE(Resolve(stub, "box1", "github.com", &git).ok());
  ASSERT_EQ(git.credentials_size(), 1);
  EXPECT_EQ(git.credentials(0).format(), "basic:git");
  api.Clear();
  ASSERT_TRUE(Resolve(stub, "box1", "api.github.com", &api).ok());
  EXPECT_EQ(api.credentials_size(), 0);
}

TEST(SecretsServiceTest, BindKitSuppressHidesAServiceForThePhase) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());

  pb::BindKitRequest req;
  req.set_sandbox("box1");
  req.add_credentials()->set_service("github");
  req.mutable_credentials(0)->set_suppress(true);
  req.add_credentials()->set_service("openai");  // no secret, suppressed
  req.mutable_credentials(1)->set_suppress(true);
  pb::BindKitResponse bound;
  grpc::Status s = BindKit(stub, req, &bound);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(bound.unbound_size(), 0);
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().count("GH_TOKEN"), 0u);
  EXPECT_EQ(env.env().count("GITHUB_TOKEN"), 0u);
  for (const char* host : {"api.github.com", "github.com"}) {
    pb::ResolveResponse resolved;
    ASSERT_TRUE(Resolve(stub, "box1", host, &resolved).ok());
    EXPECT_EQ(resolved.credentials_size(), 0) << host;
  }

  // A suppressed binding carries neither env nor inject.
  pb::BindKitRequest bad = req;
  bad.mutable_credentials(0)->set_env("GIT_PAT");
  s = BindKit(stub, bad, &bound);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("credentials[0]: suppress"), std::string::npos)
      << s.error_message();
  bad = req;
  bad.mutable_credentials(1)->add_inject()->set_domain("api.openai.com");
  bad.mutable_credentials(1)->mutable_inject(0)->set_format("bearer");
  s = BindKit(stub, bad, &bound);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("credentials[1]: suppress"), std::string::npos)
      << s.error_message();

  // The next phase binds it: the secret is back.
  pb::BindKitRequest next;
  next.set_sandbox("box1");
  next.add_credentials()->set_service("github");
  ASSERT_TRUE(BindKit(stub, next, &bound).ok());
  env.Clear();
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().at("GH_TOKEN"), "proxy-managed");
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "api.github.com", &resolved).ok());
  ASSERT_EQ(resolved.credentials_size(), 1);
  EXPECT_EQ(resolved.credentials(0).value(), kValue);
}

TEST(SecretsServiceTest, ForgetDeletesTheKitBindings) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "openai", kValue, &info).ok());
  pb::BindKitRequest req;
  req.set_sandbox("box1");
  req.add_credentials()->set_service("openai");
  req.mutable_credentials(0)->set_env("LLM_KEY");
  pb::BindKitResponse bound;
  ASSERT_TRUE(BindKit(stub, req, &bound).ok());
  EXPECT_EQ(bound.unbound_size(), 0);

  grpc::ClientContext fctx;
  pb::ForgetRequest forget;
  forget.set_sandbox("box1");
  pb::ForgetResponse fresp;
  ASSERT_TRUE(stub.Forget(&fctx, forget, &fresp).ok());
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().count("LLM_KEY"), 0u);
  EXPECT_EQ(env.env().at("OPENAI_API_KEY"), "proxy-managed");
}

TEST(SecretsServiceTest, ForgetKeepingSecretsLetsAFailedCreateBeRetried) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  grpc::ClientContext sctx;
  pb::SetRequest own;
  own.set_scope(pb::SANDBOX);
  own.set_sandbox("box1");
  own.set_service("openai");
  own.set_value(kValue);
  pb::SecretInfo info;
  ASSERT_TRUE(stub.Set(&sctx, own, &info).ok());

  pb::BindKitRequest req;
  req.set_sandbox("box1");
  req.add_credentials()->set_service("github");
  req.mutable_credentials(0)->set_env("GIT_PAT");
  pb::BindKitResponse bound;
  ASSERT_TRUE(BindKit(stub, req, &bound).ok());
  ASSERT_EQ(bound.unbound_size(), 1);  // the create fails here
  ASSERT_TRUE(SetGlobal(stub, "github", "ghp-later", &info).ok());

  grpc::ClientContext fctx;
  pb::ForgetRequest forget;
  forget.set_sandbox("box1");
  forget.set_keep_secrets(true);
  pb::ForgetResponse fresp;
  grpc::Status s = stub.Forget(&fctx, forget, &fresp);
  ASSERT_TRUE(s.ok()) << s.error_message();

  bound.Clear();
  ASSERT_TRUE(BindKit(stub, req, &bound).ok());
  EXPECT_EQ(bound.unbound_size(), 0);
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env().at("GIT_PAT"), "proxy-managed");
  EXPECT_EQ(env.env().at("OPENAI_API_KEY"), "proxy-managed");
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "api.openai.com", &resolved).ok());
  ASSERT_EQ(resolved.credentials_size(), 1);
  EXPECT_EQ(resolved.credentials(0).id(), "openai@box1");
  EXPECT_EQ(resolved.credentials(0).value(), kValue);
}

TEST(SecretsServiceTest, VmmdResolvesARegistryCredentialNoGuestSees) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, SelfIsVmmd());
  pb::Secrets::Stub& stub = server.stub();
  const std::string password = "ghp-REGISTRY-MARKER-9e107d9d";

  pb::SecretInfo info;
  grpc::Status s = SetRegistry(stub, "ghcr.io", "bot:" + password, &info);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(info.id(), "registry:ghcr.io@global");
  EXPECT_EQ(info.scope(), pb::GLOBAL);
  EXPECT_EQ(info.registry(), "ghcr.io");
  EXPECT_EQ(info.service(), "");
  EXPECT_EQ(info.env(), "");
  EXPECT_EQ(info.sentinel(), "");
  EXPECT_EQ(info.hosts_size(), 0);
  EXPECT_EQ(info.SerializeAsString().find(password), std::string::npos);
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());

  grpc::ClientContext lctx;
  pb::ListResponse list;
  ASSERT_TRUE(stub.List(&lctx, {}, &list).ok());
  ASSERT_EQ(list.secrets_size(), 2);
  EXPECT_EQ(list.secrets(1).id(), "registry:ghcr.io@global");
  EXPECT_EQ(list.secrets(1).registry(), "ghcr.io");
  EXPECT_EQ(list.SerializeAsString().find(password), std::string::npos);

  pb::RegistryCredential cred;
  s = ResolveRegistry(stub, "ghcr.io", &cred);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(cred.username(), "bot");
  EXPECT_EQ(cred.password(), password);
  pb::RegistryCredential none;
  s = ResolveRegistry(stub, "localhost:5000", &none);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << s.error_message();
  EXPECT_EQ(ResolveRegistry(stub, "not a host", &none).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // The guest's env has the service's sentinel only.
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env_size(), 2);
  EXPECT_EQ(env.env().at("GH_TOKEN"), "proxy-managed");
  grpc::ClientContext sctx;
  pb::ListRequest sreq;
  sreq.set_sandbox("box1");
  pb::ListResponse sandbox_list;
  ASSERT_TRUE(stub.List(&sctx, sreq, &sandbox_list).ok());
  ASSERT_EQ(sandbox_list.secrets_size(), 1);
  EXPECT_EQ(sandbox_list.secrets(0).id(), "github@global");

  // vmmd is not proxyd.
  pb::ResolveResponse resolved;
  EXPECT_EQ(Resolve(stub, "box1", "ghcr.io", &resolved).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // Bad host or value: INVALID_ARGUMENT naming the field, never the value.
  s = SetRegistry(stub, "ghcr.io/ns", "bot:" + password, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("registry \"ghcr.io/ns\"", 0), 0u) << s.error_message();
  EXPECT_EQ(s.error_message().find(password), std::string::npos);
  s = SetRegistry(stub, "ghcr.io", password, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("value: ", 0), 0u) << s.error_message();
  EXPECT_EQ(s.error_message().find(password), std::string::npos);
  grpc::ClientContext bctx;
  pb::SetRequest sandboxed;
  sandboxed.set_scope(pb::SANDBOX);
  sandboxed.set_sandbox("box1");
  sandboxed.set_registry("ghcr.io");
  sandboxed.set_value("bot:x");
  s = stub.Set(&bctx, sandboxed, &info);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("scope"), std::string::npos) << s.error_message();

  // Deleted by its id: gone.
  grpc::ClientContext dctx;
  pb::DeleteRequest dreq;
  dreq.set_id("registry:ghcr.io@global");
  pb::DeleteResponse dresp;
  ASSERT_TRUE(stub.Delete(&dctx, dreq, &dresp).ok());
  EXPECT_EQ(ResolveRegistry(stub, "ghcr.io", &none).error_code(), grpc::StatusCode::NOT_FOUND);
}

TEST(SecretsServiceTest, ProxydAndOtherCallersCannotResolveARegistry) {
  testing::ShortTempDir dir;
  // This test binary is proxyd: it resolves requests, not registries.
  Server server(dir.path(), {},
                ResolverPolicy{getuid(), SelfExe(), "proxyd", *CanonicalPath("/bin/sh"), "vmmd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetRegistry(stub, "ghcr.io", std::string("bot:") + kValue, &info).ok());

  pb::RegistryCredential cred;
  grpc::Status denied = ResolveRegistry(stub, "ghcr.io", &cred);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(denied.error_message(), "only vmmd may resolve registry credentials");
  EXPECT_EQ(cred.password(), "");
  // Identity comes before validation and lookup: nothing is learned.
  EXPECT_EQ(ResolveRegistry(stub, "", &cred).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(ResolveRegistry(stub, "unknown.example", &cred).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);

  // And proxyd's Resolve never carries a registry secret.
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());
  EXPECT_EQ(env.env_size(), 0);
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "ghcr.io", &resolved).ok());
  EXPECT_EQ(resolved.credentials_size(), 0);
}

// Makes a CA, a server cert for 127.0.0.1 and client certs for CN=proxyd
// and CN=vmmd with openssl(1).
void MakeCerts(const std::string& dir) {
  std::string cmd =
      "set -e; cd " + dir +
      "; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj "
      "/CN=test-ca 2>/dev/null"
      "; openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost "
      "2>/dev/null"
      "; printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > ext"
      "; openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem "
      "-days 2 -extfile ext 2>/dev/null";
  for (const char* cn : {"proxyd", "vmmd"}) {
    cmd += std::string("; openssl req -newkey rsa:2048 -nodes -keyout ") + cn + ".key -out " + cn +
           ".csr -subj /CN=" + cn + " 2>/dev/null; openssl x509 -req -in " + cn +
           ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out " + cn + ".pem -days 2 2>/dev/null";
  }
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(SecretsServiceTest, OverMutualTlsOnlyProxydsCertificateResolves) {
  testing::ShortTempDir dir;
  std::string certs = dir.path() + "/certs";
  ASSERT_EQ(system(("mkdir -p " + certs).c_str()), 0);
  MakeCerts(certs);
  std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  // No Unix caller is proxyd here: only the certificate can make one.
  Server server(dir.path(),
                {"--listen-tcp=" + addr, "--tls-cert=" + certs + "/srv.pem",
                 "--tls-key=" + certs + "/srv.key", "--tls-client-ca=" + certs + "/ca.pem"},
                ResolverPolicy{getuid(), "", "proxyd"});
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(server.stub(), "openai", kValue, &info).ok());
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(server.stub(), "box1", &env).ok());

  auto dial = [&](const std::string& cn) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFileToString(certs + "/ca.pem");
    o.pem_private_key = ReadFileToString(certs + "/" + cn + ".key");
    o.pem_cert_chain = ReadFileToString(certs + "/" + cn + ".pem");
    return pb::Secrets::NewStub(grpc::CreateChannel(addr, grpc::SslCredentials(o)));
  };
  pb::ResolveResponse as_proxyd;
  grpc::Status ok = Resolve(*dial("proxyd"), "box1", "api.openai.com", &as_proxyd);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  ASSERT_EQ(as_proxyd.credentials_size(), 1);
  EXPECT_EQ(as_proxyd.credentials(0).value(), kValue);
  EXPECT_EQ(as_proxyd.credentials(0).format(), "bearer");

  pb::ResolveResponse as_vmmd;
  grpc::Status denied = Resolve(*dial("vmmd"), "box1", "api.openai.com", &as_vmmd);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(as_vmmd.credentials_size(), 0);

  pb::ResolveResponse over_unix;
  EXPECT_EQ(Resolve(server.stub(), "box1", "api.openai.com", &over_unix).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

TEST(SecretsServiceTest, OverMutualTlsOnlyVmmdsCertificateResolvesARegistry) {
  testing::ShortTempDir dir;
  std::string certs = dir.path() + "/certs";
  ASSERT_EQ(system(("mkdir -p " + certs).c_str()), 0);
  MakeCerts(certs);
  std::string addr = "127.0.0.1:" + std::to_string(FreePort());
  Server server(dir.path(),
                {"--listen-tcp=" + addr, "--tls-cert=" + certs + "/srv.pem",
                 "--tls-key=" + certs + "/srv.key", "--tls-client-ca=" + certs + "/ca.pem"},
                ResolverPolicy{getuid(), "", "proxyd", "", "vmmd"});
  pb::SecretInfo info;
  ASSERT_TRUE(SetRegistry(server.stub(), "localhost:5000", "u:p", &info).ok());

  auto dial = [&](const std::string& cn) {
    grpc::SslCredentialsOptions o;
    o.pem_root_certs = ReadFileToString(certs + "/ca.pem");
    o.pem_private_key = ReadFileToString(certs + "/" + cn + ".key");
    o.pem_cert_chain = ReadFileToString(certs + "/" + cn + ".pem");
    return pb::Secrets::NewStub(grpc::CreateChannel(addr, grpc::SslCredentials(o)));
  };
  pb::RegistryCredential as_vmmd;
  grpc::Status ok = ResolveRegistry(*dial("vmmd"), "localhost:5000", &as_vmmd);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(as_vmmd.username(), "u");
  EXPECT_EQ(as_vmmd.password(), "p");

  pb::RegistryCredential as_proxyd;
  EXPECT_EQ(ResolveRegistry(*dial("proxyd"), "localhost:5000", &as_proxyd).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(as_proxyd.password(), "");
  pb::RegistryCredential over_unix;
  EXPECT_EQ(ResolveRegistry(server.stub(), "localhost:5000", &over_unix).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
}

}  // namespace
}  // namespace airlock::secretsd

namespace airlock::secretsd {
namespace {

using Watch = grpc::ClientReaderWriter<pb::WatchRequest, pb::Revision>;

pb::Revision Ping(Watch& w, uint64_t seq) {
  pb::WatchRequest ping;
  ping.set_ping(seq);
  EXPECT_TRUE(w.Write(ping));
  pb::Revision answer;
  EXPECT_TRUE(w.Read(&answer));
  return answer;
}

TEST(SecretsServiceTest, AChangeReturnsOnceTheWatchingProxydAcknowledgesIt) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());
  pb::SentinelsResponse env;
  ASSERT_TRUE(Sentinels(stub, "box1", &env).ok());

  grpc::ClientContext wctx;
  std::unique_ptr<Watch> watch = stub.WatchRevisions(&wctx);
  pb::Revision first = Ping(*watch, 1);
  EXPECT_EQ(first.ping(), 1u);
  EXPECT_NE(first.instance(), 0u);
  EXPECT_EQ(first.lease_ms(), 1000u);
  pb::ResolveResponse resolved;
  ASSERT_TRUE(Resolve(stub, "box1", "github.com", &resolved).ok());
  EXPECT_EQ(resolved.instance(), first.instance());
  EXPECT_EQ(resolved.revision(), first.revision());

  // A removal is pushed, and its caller waits for the acknowledgement.
  std::atomic<bool> deleted{false};
  std::thread remover([&] {
    grpc::ClientContext ctx;
    pb::DeleteRequest req;
    req.set_id("github@global");
    pb::DeleteResponse resp;
    EXPECT_TRUE(stub.Delete(&ctx, req, &resp).ok());
    deleted = true;
  });
  pb::Revision push;
  ASSERT_TRUE(watch->Read(&push));
  EXPECT_EQ(push.ping(), 0u);
  EXPECT_EQ(push.instance(), first.instance());
  EXPECT_GT(push.revision(), first.revision());
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(deleted) << "Delete returned before the watcher acknowledged";
  pb::WatchRequest ack;
  ack.set_ack(push.revision());
  ASSERT_TRUE(watch->Write(ack));
  remover.join();
  EXPECT_TRUE(deleted);
  ASSERT_TRUE(Resolve(stub, "box1", "github.com", &resolved).ok());
  EXPECT_EQ(resolved.credentials_size(), 0);
  EXPECT_EQ(resolved.revision(), push.revision());
  EXPECT_EQ(Ping(*watch, 2).revision(), push.revision());
  wctx.TryCancel();
}

TEST(SecretsServiceTest, AChangeWaitsOutASilentWatchersLeaseOnly) {
  testing::ShortTempDir dir;
  Server server(dir.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
  pb::Secrets::Stub& stub = server.stub();
  grpc::ClientContext wctx;
  std::unique_ptr<Watch> watch = stub.WatchRevisions(&wctx);
  Ping(*watch, 1);
  auto start = std::chrono::steady_clock::now();
  pb::SecretInfo info;
  ASSERT_TRUE(SetGlobal(stub, "github", kValue, &info).ok());  // never acknowledged
  auto took = std::chrono::steady_clock::now() - start;
  EXPECT_GE(took, std::chrono::milliseconds(900));
  EXPECT_LT(took, std::chrono::seconds(5));
  wctx.TryCancel();
}

TEST(SecretsServiceTest, OnlyProxydMayWatchAndStoppingEndsTheWatch) {
  testing::ShortTempDir dir;
  {
    Server server(dir.path(), {}, ResolverPolicy{getuid(), *CanonicalPath("/bin/sh"), "proxyd"});
    grpc::ClientContext ctx;
    auto watch = server.stub().WatchRevisions(&ctx);
    pb::Revision r;
    EXPECT_FALSE(watch->Read(&r));
    grpc::Status s = watch->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED);
    EXPECT_EQ(s.error_message(), "only proxyd may watch revisions");
  }
  testing::ShortTempDir dir2;
  grpc::ClientContext ctx;
  std::unique_ptr<Watch> watch;
  auto start = std::chrono::steady_clock::now();
  {
    Server server(dir2.path(), {}, ResolverPolicy{getuid(), SelfExe(), "proxyd"});
    watch = server.stub().WatchRevisions(&ctx);
    Ping(*watch, 1);
    start = std::chrono::steady_clock::now();
  }  // stops: the stream is ended, not waited for (5 s)
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  pb::Revision r;
  EXPECT_FALSE(watch->Read(&r));
}

}  // namespace
}  // namespace airlock::secretsd
