#include "secretsd/secret_store.h"

#include <sys/stat.h>

#include <regex>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "secretsd/validation.h"

namespace airlock::secretsd {
namespace {

SecretSpec Service(Scope scope, const std::string& sandbox, const std::string& service,
                   const std::string& value) {
  SecretSpec s;
  s.scope = scope;
  s.sandbox = sandbox;
  s.service = service;
  s.value = value;
  return s;
}

SecretSpec Custom(Scope scope, const std::string& sandbox, const std::string& env,
                  std::vector<std::string> hosts, const std::string& value,
                  const std::string& placeholder = "") {
  SecretSpec s;
  s.scope = scope;
  s.sandbox = sandbox;
  s.env = env;
  s.hosts = std::move(hosts);
  s.value = value;
  s.placeholder = placeholder;
  return s;
}

SecretSpec Registry(const std::string& host, const std::string& value) {
  SecretSpec s;
  s.scope = Scope::kGlobal;
  s.registry = host;
  s.value = value;
  return s;
}

// "username:password" of a registry credential, or the error code's name.
std::string Basic(const absl::StatusOr<RegistryCredential>& cred) {
  if (!cred.ok()) return absl::StatusCodeToString(cred.status().code());
  return cred->username + ":" + cred->password;
}

KitBinding Bind(const std::string& service, const std::string& env,
                std::vector<KitInject> inject = {}) {
  return KitBinding{service, env, std::move(inject)};
}

// A binding that hides `service` (the kits use it in another phase).
KitBinding Suppress(const std::string& service) {
  KitBinding b;
  b.service = service;
  b.suppress = true;
  return b;
}

std::vector<std::string> Ids(const std::vector<SecretInfo>& infos) {
  std::vector<std::string> out;
  for (const auto& i : infos) out.push_back(i.id);
  return out;
}

// "value:format" of each credential, in order.
std::vector<std::string> Values(const absl::StatusOr<std::vector<Credential>>& creds) {
  EXPECT_TRUE(creds.ok()) << creds.status();
  std::vector<std::string> out;
  if (!creds.ok()) return out;
  for (const auto& c : *creds) out.push_back(c.value + ":" + c.format);
  return out;
}

class SecretStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    store_.reset();
    db_.reset();
    auto db = StateDb::Open(DbPath());
    ASSERT_TRUE(db.ok()) << db.status();
    db_ = std::move(*db);
    auto store = SecretStore::Open(db_.get(), KeyPath());
    ASSERT_TRUE(store.ok()) << store.status();
    store_ = std::move(*store);
  }
  std::string DbPath() { return dir_.path() + "/secretsd.db"; }
  std::string KeyPath() { return dir_.path() + "/secrets.key"; }

  testing::ShortTempDir dir_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<SecretStore> store_;
};

// The revision moves with every change to what Resolve answers, and only
// then: proxyd drops what it kept at each move.
TEST_F(SecretStoreTest, TheRevisionMovesWithWhatResolveAnswers) {
  uint64_t r = store_->Revision();
  auto moved = [&] {
    uint64_t now = store_->Revision();
    bool m = now != r;
    r = now;
    return m;
  };
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "github", "v")).ok());
  EXPECT_TRUE(moved());
  ASSERT_TRUE(store_->Sentinels("box1").ok());  // registers it
  EXPECT_TRUE(moved());
  ASSERT_TRUE(store_->Sentinels("box1").ok());  // an exec's: nothing new
  EXPECT_FALSE(moved());
  ASSERT_TRUE(store_->List("box1").ok());
  uint64_t answered = 0;
  ASSERT_TRUE(store_->Resolve("box1", "github.com", 443, &answered).ok());
  EXPECT_EQ(answered, r);
  EXPECT_FALSE(moved());
  EXPECT_FALSE(store_->Set(Service(Scope::kGlobal, "", "no-such-service", "v")).ok());
  EXPECT_FALSE(moved());  // refused before anything changed
  ASSERT_TRUE(
      store_->Set(Custom(Scope::kGlobal, "", "A_TOKEN", {"a.example"}, "v", "sbx-cs-same")).ok());
  EXPECT_TRUE(moved());
  EXPECT_FALSE(
      store_->Set(Custom(Scope::kGlobal, "", "B_TOKEN", {"b.example"}, "v", "sbx-cs-same")).ok());
  EXPECT_FALSE(moved());  // a placeholder clash, refused under the lock
  ASSERT_TRUE(store_->BindKit("box1", {}).ok());
  EXPECT_TRUE(moved());
  ASSERT_TRUE(store_->Delete("github@global").ok());
  EXPECT_TRUE(moved());
  ASSERT_TRUE(store_->ForgetSandbox("box1").ok());
  EXPECT_TRUE(moved());
}

TEST_F(SecretStoreTest, IdsSentinelsAndWhatSetReturns) {
  auto a = store_->Set(Service(Scope::kGlobal, "", "anthropic", "v-anthropic"));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->id, "anthropic@global");
  EXPECT_EQ(a->scope, Scope::kGlobal);
  EXPECT_EQ(a->sandbox, "");
  EXPECT_EQ(a->sentinel, "proxy-managed");
  EXPECT_EQ(a->env, std::vector<std::string>{"ANTHROPIC_API_KEY"});
  EXPECT_EQ(a->hosts, std::vector<std::string>{"api.anthropic.com"});
  EXPECT_GT(a->created_at, 1600000000);

  auto g = store_->Set(Service(Scope::kSandbox, "box1", "github", "v-github"));
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->id, "github@box1");
  EXPECT_EQ(g->sandbox, "box1");
  EXPECT_EQ(g->env, (std::vector<std::string>{"GH_TOKEN", "GITHUB_TOKEN"}));

  auto c = store_->Set(Custom(Scope::kGlobal, "", "MY_TOKEN", {"API.Example.com"}, "v-custom"));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->id, "custom:MY_TOKEN@global");
  EXPECT_EQ(c->service, "");
  EXPECT_EQ(c->hosts, std::vector<std::string>{"api.example.com"});
  EXPECT_TRUE(std::regex_match(c->sentinel, std::regex("sbx-cs-[a-z0-9]{24}"))) << c->sentinel;

  auto c2 = store_->Set(Custom(Scope::kSandbox, "box1", "OTHER", {"x.example.com"}, "v2"));
  ASSERT_TRUE(c2.ok());
  EXPECT_EQ(c2->id, "custom:OTHER@box1");
  EXPECT_NE(c2->sentinel, c->sentinel);

  auto own = store_->Set(
      Custom(Scope::kSandbox, "box1", "MINE", {"x.example.com"}, "v3", "my-own.placeholder"));
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(own->sentinel, "my-own.placeholder");
}

TEST_F(SecretStoreTest, SetReplacesListShowsNoValuesDeleteRemoves) {
  auto first = store_->Set(Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, "old-value"));
  ASSERT_TRUE(first.ok());
  // Same id: replaced, sentinel kept when no placeholder is given.
  auto second = store_->Set(Custom(Scope::kGlobal, "", "TOK", {"b.example.com"}, "new-value"));
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->sentinel, first->sentinel);
  auto third = store_->Set(
      Custom(Scope::kGlobal, "", "TOK", {"b.example.com"}, "newer-value", "placeholder-3"));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->sentinel, "placeholder-3");
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "o-value")).ok());

  auto all = store_->List("");
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(Ids(*all), (std::vector<std::string>{"custom:TOK@global", "openai@box1"}));
  EXPECT_EQ((*all)[0].hosts, std::vector<std::string>{"b.example.com"});

  ASSERT_TRUE(store_->Sentinels("box1").ok());
  EXPECT_EQ(Values(store_->Resolve("box1", "b.example.com")),
            std::vector<std::string>{"newer-value:replace"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "a.example.com")).empty());

  EXPECT_TRUE(store_->Delete("custom:TOK@global").ok());
  EXPECT_TRUE(Values(store_->Resolve("box1", "b.example.com")).empty());
  absl::Status again = store_->Delete("custom:TOK@global");
  EXPECT_EQ(again.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(again.message().find("custom:TOK@global"), std::string::npos);
  EXPECT_EQ(store_->Delete("").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Ids(*store_->List("")), std::vector<std::string>{"openai@box1"});
}

TEST_F(SecretStoreTest, GlobalAppliesOnlyToSandboxesCreatedAfterIt) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "openai", "early")).ok());
  // box1 is created (first Sentinels call) after openai, before anthropic.
  auto env1 = store_->Sentinels("box1");
  ASSERT_TRUE(env1.ok());
  EXPECT_EQ(*env1, (std::map<std::string, std::string>{{"OPENAI_API_KEY", "proxy-managed"}}));
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "late")).ok());

  EXPECT_EQ(store_->Sentinels("box1")->count("ANTHROPIC_API_KEY"), 0u);
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.anthropic.com")).empty());
  EXPECT_EQ(Ids(*store_->List("box1")), std::vector<std::string>{"openai@global"});
  // A sandbox created now gets both.
  EXPECT_EQ(store_->Sentinels("box2")->count("ANTHROPIC_API_KEY"), 1u);
  EXPECT_EQ(Values(store_->Resolve("box2", "api.anthropic.com")),
            std::vector<std::string>{"late:header:x-api-key"});

  // A sandbox secret applies at once, without a new Sentinels call.
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "anthropic", "own")).ok());
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"own:header:x-api-key"});
  EXPECT_EQ(store_->Sentinels("box1")->count("ANTHROPIC_API_KEY"), 1u);

  // A rotated global still reaches box1; a deleted and re-set one does not.
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "openai", "rotated")).ok());
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"rotated:bearer"});
  ASSERT_TRUE(store_->Delete("openai@global").ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "openai", "re-set")).ok());
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.openai.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box2", "api.openai.com")), std::vector<std::string>{});

  // Registrations survive a restart.
  Reopen();
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.openai.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box2", "api.anthropic.com")),
            std::vector<std::string>{"late:header:x-api-key"});
}

TEST_F(SecretStoreTest, ForgetDeletesASandboxsSecretsAndRegistration) {
  ASSERT_TRUE(store_->Sentinels("box1").ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "groq", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "xai", "x")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box2", "xai", "x2")).ok());
  EXPECT_EQ(store_->Sentinels("box1")->count("GROQ_API_KEY"), 0u);

  auto forgot = store_->ForgetSandbox("box1");
  ASSERT_TRUE(forgot.ok()) << forgot.status();
  EXPECT_EQ(*forgot, 1);
  EXPECT_EQ(Ids(*store_->List("")), (std::vector<std::string>{"groq@global", "xai@box2"}));
  // Nothing left to forget, and names never seen, are not errors.
  EXPECT_EQ(*store_->ForgetSandbox("box1"), 0);
  EXPECT_EQ(*store_->ForgetSandbox("Never.Seen"), 0);
  EXPECT_EQ(store_->ForgetSandbox("").status().code(), absl::StatusCode::kInvalidArgument);

  // A new box1 starts afresh: today's globals, none of the old secrets.
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.x.ai")).empty());
  auto env = store_->Sentinels("box1");
  EXPECT_EQ(*env, (std::map<std::string, std::string>{{"GROQ_API_KEY", "proxy-managed"}}));
  EXPECT_EQ(Values(store_->Resolve("box1", "api.groq.com")), std::vector<std::string>{"g:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box2", "api.x.ai")), std::vector<std::string>{"x2:bearer"});
}

TEST_F(SecretStoreTest, AnUnregisteredSandboxResolvesOnlyItsOwnSecrets) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "groq", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box3", "xai", "x")).ok());
  // Its guest was never given the global's sentinel (no Sentinels call).
  EXPECT_TRUE(Values(store_->Resolve("box3", "api.groq.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box3", "api.x.ai")), std::vector<std::string>{"x:bearer"});
  // List shows what it would get if created now, without registering it.
  EXPECT_EQ(Ids(*store_->List("box3")), (std::vector<std::string>{"xai@box3", "groq@global"}));
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "mistral", "m")).ok());
  EXPECT_EQ(store_->Sentinels("box3")->count("MISTRAL_API_KEY"), 1u);
}

TEST_F(SecretStoreTest, ASandboxRegisteredWithoutGlobalsGetsNoneOfThem) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "users-key")).ok());
  auto bare = store_->Sentinels("install-claude-1", true);
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->empty());
  EXPECT_TRUE(Values(store_->Resolve("install-claude-1", "api.anthropic.com")).empty());
  // Registered once: later calls (with or without the flag) keep it bare.
  EXPECT_TRUE(store_->Sentinels("install-claude-1")->empty());
  // A sandbox registered the usual way still gets the global.
  EXPECT_EQ(store_->Sentinels("box1")->count("ANTHROPIC_API_KEY"), 1u);
  // The flag never takes globals from a sandbox that has them.
  EXPECT_EQ(store_->Sentinels("box1", true)->count("ANTHROPIC_API_KEY"), 1u);
}

TEST_F(SecretStoreTest, SandboxSecretWinsOverGlobal) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "mistral", "global-m")).ok());
  ASSERT_TRUE(store_
                  ->Set(Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, "global-t",
                               "global-placeholder"))
                  .ok());
  ASSERT_TRUE(store_->Sentinels("box1").ok());
  ASSERT_TRUE(store_->Sentinels("box2").ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "mistral", "own-m")).ok());
  ASSERT_TRUE(store_
                  ->Set(Custom(Scope::kSandbox, "box1", "TOK", {"b.example.com"}, "own-t",
                               "own-placeholder"))
                  .ok());

  EXPECT_EQ(Values(store_->Resolve("box1", "api.mistral.ai")),
            std::vector<std::string>{"own-m:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box2", "api.mistral.ai")),
            std::vector<std::string>{"global-m:bearer"});
  // The sandbox's TOK hides the global TOK entirely, hosts included.
  EXPECT_TRUE(Values(store_->Resolve("box1", "a.example.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box1", "b.example.com")),
            std::vector<std::string>{"own-t:replace"});
  EXPECT_EQ(store_->Sentinels("box1")->at("TOK"), "own-placeholder");
  EXPECT_EQ(store_->Sentinels("box2")->at("TOK"), "global-placeholder");
  EXPECT_EQ(Ids(*store_->List("box1")),
            (std::vector<std::string>{"custom:TOK@box1", "mistral@box1"}));
}

TEST_F(SecretStoreTest, ResolveMatchesHostsAndPicksTheFormat) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "ghp_x")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "google", "gk")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openrouter", "or")).ok());
  ASSERT_TRUE(
      store_
          ->Set(Custom(Scope::kSandbox, "box1", "WILD", {"*.example.com"}, "w", "wild-placeholder"))
          .ok());

  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"ghp_x:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box1", "github.com")),
            std::vector<std::string>{"ghp_x:basic:x-access-token"});
  EXPECT_EQ(Values(store_->Resolve("box1", "GitHub.com.:443")),
            std::vector<std::string>{"ghp_x:basic:x-access-token"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "gist.github.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.github.com.evil.net")).empty());
  EXPECT_EQ(Values(store_->Resolve("box1", "generativelanguage.googleapis.com")),
            std::vector<std::string>{"gk:header:x-goog-api-key"});
  EXPECT_EQ(Values(store_->Resolve("box1", "openrouter.ai")),
            std::vector<std::string>{"or:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box1", "a.example.com")),
            std::vector<std::string>{"w:replace"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "example.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "a.b.example.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box2", "api.github.com")).empty());

  auto creds = store_->Resolve("box1", "a.example.com");
  ASSERT_EQ(creds->size(), 1u);
  EXPECT_EQ((*creds)[0].id, "custom:WILD@box1");
  EXPECT_EQ((*creds)[0].sentinel, "wild-placeholder");

  auto env = store_->Sentinels("box1");
  EXPECT_EQ(env->at("GH_TOKEN"), "proxy-managed");
  EXPECT_EQ(env->at("GITHUB_TOKEN"), "proxy-managed");
  EXPECT_EQ(env->at("GEMINI_API_KEY"), "proxy-managed");
  EXPECT_EQ(env->at("GOOGLE_API_KEY"), "proxy-managed");
  EXPECT_EQ(env->at("WILD"), "wild-placeholder");

  EXPECT_TRUE(Values(store_->Resolve("box1", "not a host")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "evil/.example.com")).empty());
  EXPECT_EQ(store_->Resolve("box1", "").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->Resolve("Bad_Name", "api.github.com").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(SecretStoreTest, ValidationErrorsNameTheFieldAndNeverTheValue) {
  const std::string v = "VALUE-d41d8cd98f00b204e9800998ecf8427e";
  struct Case {
    SecretSpec spec;
    std::string field;
  };
  SecretSpec mixed = Service(Scope::kGlobal, "", "anthropic", v);
  mixed.env = "X_TOKEN";
  SecretSpec mixed_hosts = Service(Scope::kGlobal, "", "anthropic", v);
  mixed_hosts.hosts = {"a.example.com"};
  std::vector<Case> cases = {
      {Service(Scope::kUnspecified, "", "anthropic", v), "scope"},
      {Service(Scope::kSandbox, "", "anthropic", v), "sandbox"},
      {Service(Scope::kSandbox, "Bad!", "anthropic", v), "sandbox"},
      {Service(Scope::kSandbox, "global", "anthropic", v), "sandbox"},
      {Service(Scope::kGlobal, "box1", "anthropic", v), "sandbox"},
      {Service(Scope::kGlobal, "", "nope", v), "service"},
      {Service(Scope::kGlobal, "", "", v), "service"},
      {Service(Scope::kGlobal, "", "anthropic", ""), "value"},
      {Service(Scope::kGlobal, "", "anthropic", v + "\n"), "value"},
      {Service(Scope::kGlobal, "", "anthropic", v + "\r"), "value"},
      {Service(Scope::kGlobal, "", "anthropic", v + std::string(1, '\0')), "value"},
      {Service(Scope::kGlobal, "", "anthropic", v + std::string(64 * 1024, 'x')), "value"},
      {mixed, "service"},
      {mixed_hosts, "service"},
      {Custom(Scope::kGlobal, "", "bad-env", {"a.example.com"}, v), "env"},
      {Custom(Scope::kGlobal, "", "ANTHROPIC_API_KEY", {"a.example.com"}, v), "env"},
      {Custom(Scope::kGlobal, "", "PATH", {"a.example.com"}, v), "env"},
      {Custom(Scope::kGlobal, "", "", {"a.example.com"}, v), "env"},
      {Custom(Scope::kGlobal, "", "TOK", {}, v, "placeholder-1"), "hosts"},
      {Custom(Scope::kGlobal, "", "TOK", {"*.com"}, v), "hosts"},
      {Custom(Scope::kGlobal, "", "TOK", {"a.example.com/x"}, v), "hosts"},
      {Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, v, "short"), "placeholder"},
      {Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, v, "proxy-managed"), "placeholder"},
      {Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, v, v), "placeholder"},
  };
  for (const auto& c : cases) {
    auto r = store_->Set(c.spec);
    ASSERT_FALSE(r.ok()) << c.field << " " << c.spec.sandbox << c.spec.service << c.spec.env;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status();
    EXPECT_EQ(r.status().message().find(v), std::string::npos) << r.status();
    EXPECT_EQ(r.status().message().find("VALUE-d41d8"), std::string::npos) << r.status();
  }
  EXPECT_TRUE(store_->List("")->empty());
}

TEST_F(SecretStoreTest, ARegistrySecretIsGlobalAndOnlyResolvedForItsHost) {
  auto r = store_->Set(Registry("GHCR.io", "bot:pa:ss"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->id, "registry:ghcr.io@global");
  EXPECT_EQ(r->scope, Scope::kGlobal);
  EXPECT_EQ(r->registry, "ghcr.io");
  EXPECT_EQ(r->service, "");
  EXPECT_TRUE(r->env.empty());
  EXPECT_TRUE(r->hosts.empty());
  EXPECT_EQ(r->sentinel, "");
  // Scope may be left unset: a registry secret is always global.
  SecretSpec unscoped = Registry("localhost:5000", "u:p");
  unscoped.scope = Scope::kUnspecified;
  auto local = store_->Set(unscoped);
  ASSERT_TRUE(local.ok()) << local.status();
  EXPECT_EQ(local->id, "registry:localhost:5000@global");
  EXPECT_EQ(local->scope, Scope::kGlobal);
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "github", "gh-value")).ok());

  auto all = store_->List("");
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(Ids(*all), (std::vector<std::string>{"github@global", "registry:ghcr.io@global",
                                                 "registry:localhost:5000@global"}));
  EXPECT_EQ((*all)[1].registry, "ghcr.io");
  EXPECT_EQ((*all)[2].registry, "localhost:5000");
  EXPECT_EQ((*all)[0].registry, "");

  // No sandbox sees it: not in its list, its env, or what proxyd resolves.
  EXPECT_EQ(Ids(*store_->List("box1")), std::vector<std::string>{"github@global"});
  auto env = store_->Sentinels("box1");
  ASSERT_TRUE(env.ok()) << env.status();
  EXPECT_EQ(*env, (std::map<std::string, std::string>{{"GH_TOKEN", "proxy-managed"},
                                                      {"GITHUB_TOKEN", "proxy-managed"}}));
  EXPECT_EQ(Ids(*store_->List("box1")), std::vector<std::string>{"github@global"});
  for (const char* host : {"ghcr.io", "localhost", "localhost:5000"}) {
    EXPECT_TRUE(Values(store_->Resolve("box1", host)).empty()) << host;
  }

  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io")), "bot:pa:ss");
  EXPECT_EQ(Basic(store_->ResolveRegistry("GHCR.IO")), "bot:pa:ss");
  EXPECT_EQ(Basic(store_->ResolveRegistry("localhost:5000")), "u:p");
  // Another port or host is another registry.
  EXPECT_EQ(Basic(store_->ResolveRegistry("localhost")), "NOT_FOUND");
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io:443")), "NOT_FOUND");
  EXPECT_EQ(Basic(store_->ResolveRegistry("docker.io")), "NOT_FOUND");
  EXPECT_EQ(Basic(store_->ResolveRegistry("")), "INVALID_ARGUMENT");
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io/ns")), "INVALID_ARGUMENT");

  // Setting it again replaces it.
  auto again = store_->Set(Registry("ghcr.io", "other:tok"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->id, "registry:ghcr.io@global");
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io")), "other:tok");
  EXPECT_EQ(store_->List("")->size(), 3u);

  // It survives a restart; Delete takes its id.
  Reopen();
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io")), "other:tok");
  ASSERT_TRUE(store_->Delete("registry:ghcr.io@global").ok());
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io")), "NOT_FOUND");
  EXPECT_EQ(store_->Delete("registry:ghcr.io@global").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(Basic(store_->ResolveRegistry("localhost:5000")), "u:p");
  // A sandbox created after it still gets no registry secret.
  EXPECT_EQ(store_->Sentinels("box2")->size(), 2u);
  EXPECT_EQ(Ids(*store_->List("box2")), std::vector<std::string>{"github@global"});
}

// A sandbox with a Docker Engine gets the registry credentials from
// Resolve (for proxyd to place), at the registry's host and port only, and
// never as a sentinel or variable; other sandboxes never get them.
TEST_F(SecretStoreTest, RegistryCredentialsResolveOnlyForDockerSandboxes) {
  ASSERT_TRUE(store_->Set(Registry("reg.test:5000", "alice:s3cret")).ok());
  ASSERT_TRUE(store_->Sentinels("docker1", false, true).ok());
  ASSERT_TRUE(store_->Sentinels("plain1").ok());
  ASSERT_TRUE(store_->Sentinels("install-1", true, true).ok());
  auto creds = store_->Resolve("docker1", "reg.test", 5000);
  ASSERT_TRUE(creds.ok()) << creds.status();
  ASSERT_EQ(creds->size(), 1u);
  EXPECT_EQ((*creds)[0].id, "registry:reg.test:5000@global");
  EXPECT_EQ((*creds)[0].format, "basic:alice");
  EXPECT_EQ((*creds)[0].value, "s3cret");
  EXPECT_EQ((*creds)[0].sentinel, "");
  EXPECT_TRUE(store_->Resolve("docker1", "reg.test", 443)->empty());
  EXPECT_TRUE(store_->Resolve("docker1", "other.test", 5000)->empty());
  EXPECT_TRUE(store_->Resolve("plain1", "reg.test", 5000)->empty());
  EXPECT_TRUE(store_->Resolve("install-1", "reg.test", 5000)->empty());
  EXPECT_TRUE(store_->Resolve("never-registered", "reg.test", 5000)->empty());
  EXPECT_TRUE(store_->Sentinels("docker1")->empty());
  // Registered once: a second Sentinels call changes nothing; the flag
  // survives a restart.
  ASSERT_TRUE(store_->Sentinels("plain1", false, true).ok());
  EXPECT_TRUE(store_->Resolve("plain1", "reg.test", 5000)->empty());
  Reopen();
  EXPECT_EQ(store_->Resolve("docker1", "reg.test", 5000)->size(), 1u);
  // A credential set later applies at once (it is the host's, not a
  // snapshot of creation), and a deleted one is gone from the next request.
  ASSERT_TRUE(store_->Delete("registry:reg.test:5000@global").ok());
  EXPECT_TRUE(store_->Resolve("docker1", "reg.test", 5000)->empty());
}

TEST_F(SecretStoreTest, RegistryValidationNamesTheFieldAndNeverTheValue) {
  const std::string v = "VALUE-0cc175b9c0f1b6a831c399e269772661";
  for (const char* host : {"ghcr.io:", "ghcr.io:0", "ghcr.io:65536", "ghcr.io:080", "ghcr.io:+80",
                           "ghcr.io:1:2", "gh cr.io", "ghcr_io", "https://ghcr.io", "ghcr.io/ns",
                           "-ghcr.io", "ghcr.io.", "a..b", ":5000", "[::1]:5000", "*.ghcr.io"}) {
    auto r = store_->Set(Registry(host, "u:" + v));
    ASSERT_FALSE(r.ok()) << host;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_EQ(r.status().message().rfind("registry ", 0), 0u) << r.status();
    EXPECT_EQ(r.status().message().find(v), std::string::npos) << r.status();
  }
  for (const char* host : {"ghcr.io:443", "127.0.0.1:5000", "localhost", "LOCALHOST:65535"}) {
    auto r = store_->Set(Registry(host, "u:p"));
    EXPECT_TRUE(r.ok()) << host << ": " << r.status();
  }
  EXPECT_EQ(
      Ids(*store_->List("")),
      (std::vector<std::string>{"registry:127.0.0.1:5000@global", "registry:ghcr.io:443@global",
                                "registry:localhost:65535@global", "registry:localhost@global"}));
  for (const auto& c : Ids(*store_->List(""))) ASSERT_TRUE(store_->Delete(c).ok());

  struct Case {
    SecretSpec spec;
    std::string field;
  };
  SecretSpec sandboxed = Registry("ghcr.io", "u:" + v);
  sandboxed.scope = Scope::kSandbox;
  sandboxed.sandbox = "box1";
  SecretSpec with_sandbox = Registry("ghcr.io", "u:" + v);
  with_sandbox.sandbox = "box1";
  SecretSpec with_service = Registry("ghcr.io", "u:" + v);
  with_service.service = "github";
  SecretSpec with_env = Registry("ghcr.io", "u:" + v);
  with_env.env = "REGISTRY_TOKEN";
  SecretSpec with_hosts = Registry("ghcr.io", "u:" + v);
  with_hosts.hosts = {"ghcr.io"};
  std::vector<Case> cases = {
      {Registry("ghcr.io", v), "value: a registry credential is USERNAME:PASSWORD"},
      {Registry("ghcr.io", ":" + v), "value: a registry credential is USERNAME:PASSWORD"},
      {Registry("ghcr.io", ""), "value is empty"},
      {Registry("ghcr.io", "u:" + v + "\n"), "value contains"},
      {sandboxed, "scope: a registry secret is always GLOBAL"},
      {with_sandbox, "scope: a registry secret is always GLOBAL"},
      {with_service, "mutually exclusive"},
      {with_env, "mutually exclusive"},
      {with_hosts, "mutually exclusive"},
  };
  for (const auto& c : cases) {
    auto r = store_->Set(c.spec);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status();
    EXPECT_EQ(r.status().message().find("VALUE-0cc17"), std::string::npos) << r.status();
  }
  EXPECT_TRUE(store_->List("")->empty());
}

TEST_F(SecretStoreTest, AStateFileFromBeforeRegistrySecretsStaysReadable) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "openai", "o-global")).ok());
  ASSERT_TRUE(store_->Set(Custom(Scope::kSandbox, "box1", "TOK", {"a.example.com"}, "c")).ok());
  ASSERT_TRUE(store_->Sentinels("box1").ok());
  // Make it a state file of schema step 3: no registry column.
  ASSERT_TRUE(db_->Exec("ALTER TABLE secrets DROP COLUMN registry").ok());
  ASSERT_TRUE(db_->Exec("ALTER TABLE sandboxes DROP COLUMN registry_credentials").ok());
  ASSERT_TRUE(db_->Exec("PRAGMA user_version = 3").ok());
  Reopen();

  EXPECT_EQ(Ids(*store_->List("")), (std::vector<std::string>{"custom:TOK@box1", "openai@global"}));
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"o-global:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box1", "a.example.com")),
            std::vector<std::string>{"c:replace"});
  ASSERT_TRUE(store_->Set(Registry("ghcr.io", "u:p")).ok());
  EXPECT_EQ(Basic(store_->ResolveRegistry("ghcr.io")), "u:p");
  EXPECT_EQ(store_->List("")->size(), 3u);
  EXPECT_EQ(store_->List("box1")->size(), 2u);
}

TEST_F(SecretStoreTest, APlaceholderStandsForOneVariable) {
  ASSERT_TRUE(
      store_->Set(Custom(Scope::kGlobal, "", "ONE", {"a.example.com"}, "1", "shared-holder")).ok());
  // The same variable in another scope may reuse it ...
  EXPECT_TRUE(
      store_->Set(Custom(Scope::kSandbox, "box1", "ONE", {"a.example.com"}, "2", "shared-holder"))
          .ok());
  // ... another variable may not.
  auto other =
      store_->Set(Custom(Scope::kGlobal, "", "TWO", {"a.example.com"}, "3", "shared-holder"));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find("custom:ONE@"), std::string::npos) << other.status();
}

TEST_F(SecretStoreTest, KitEnvIsAddedForBoundServicesWithASecret) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "g")).ok());
  auto unbound = store_->BindKit(
      "box1", {Bind("anthropic", "CLAUDE_KEY"), Bind("github", "", {{"api.github.com", "bearer"}}),
               Bind("openai", "MY_OPENAI")});
  ASSERT_TRUE(unbound.ok()) << unbound.status();
  EXPECT_EQ(*unbound, std::vector<std::string>{"openai"});

  auto env = store_->Sentinels("box1");
  ASSERT_TRUE(env.ok()) << env.status();
  // The Kit's name in addition to the built-in one; the inject-only github
  // binding adds nothing; openai has no secret, so no MY_OPENAI.
  EXPECT_EQ(*env, (std::map<std::string, std::string>{{"ANTHROPIC_API_KEY", "proxy-managed"},
                                                      {"CLAUDE_KEY", "proxy-managed"},
                                                      {"GH_TOKEN", "proxy-managed"},
                                                      {"GITHUB_TOKEN", "proxy-managed"}}));
  // Another sandbox is not bound.
  EXPECT_EQ(store_->Sentinels("box2")->count("CLAUDE_KEY"), 0u);

  // Once openai has a secret for box1, the binding applies.
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "o")).ok());
  EXPECT_EQ(store_->Sentinels("box1")->at("MY_OPENAI"), "proxy-managed");
}

TEST_F(SecretStoreTest, AKitEnvNeverTakesOverASecretsVariable) {
  ASSERT_TRUE(store_
                  ->Set(Custom(Scope::kSandbox, "box1", "SHARED_KEY", {"c.example.com"}, "c",
                               "custom-placeholder"))
                  .ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "groq", "g")).ok());
  ASSERT_TRUE(store_->BindKit("box1", {Bind("groq", "SHARED_KEY")}).ok());
  auto env = store_->Sentinels("box1");
  EXPECT_EQ(env->at("SHARED_KEY"), "custom-placeholder");
  EXPECT_EQ(env->at("GROQ_API_KEY"), "proxy-managed");
  EXPECT_EQ(env->size(), 2u);
}

TEST_F(SecretStoreTest, AKitPicksAmongTheBuiltInHostsAndTheFormatThere) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "anthropic", "a")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "o")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box2", "github", "g2")).ok());
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:bearer"});
  auto bound = store_->BindKit(
      "box1", {Bind("github", "", {{"API.GitHub.com.", "header:Authorization=token %s"}}),
               Bind("anthropic", "CLAUDE_KEY")});
  ASSERT_TRUE(bound.ok()) << bound.status();

  // The Kit's format on the host it names (as the request names it, in
  // any case, with a port)...
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:header:Authorization=token %s"});
  EXPECT_EQ(Values(store_->Resolve("box1", "API.github.COM.:443")),
            std::vector<std::string>{"g:header:Authorization=token %s"});
  // ...and nothing on the built-in host it left out.
  EXPECT_TRUE(Values(store_->Resolve("box1", "github.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "x.api.github.com")).empty());
  // A binding without inject entries keeps the built-in hosts; a service
  // without a binding, and another sandbox, are as before.
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"o:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box2", "api.github.com")),
            std::vector<std::string>{"g2:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box2", "github.com")),
            std::vector<std::string>{"g2:basic:x-access-token"});
}

TEST_F(SecretStoreTest, AKitCannotSendABuiltInServicesSecretElsewhere) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "github", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(
      store_->BindKit("box1", {Bind("github", "GIT_PAT", {{"github.com", "bearer"}})}).ok());

  const std::string refusal =
      "kit credential github: inject domain \"collect.evil.test\" is not one of github's hosts "
      "(api.github.com, github.com); a kit cannot send a stored secret elsewhere";
  auto evil = store_->BindKit(
      "box1",
      {Bind("anthropic", "CLAUDE_KEY"),
       Bind("github", "", {{"api.github.com", "bearer"}, {"collect.evil.test", "bearer"}})});
  ASSERT_EQ(evil.status().code(), absl::StatusCode::kInvalidArgument) << evil.status();
  EXPECT_NE(evil.status().message().find("credentials[1]: inject[1].domain"), std::string::npos)
      << evil.status();
  EXPECT_NE(evil.status().message().find(refusal), std::string::npos) << evil.status();
  // Look-alikes of a built-in host are other hosts too.
  for (const char* domain : {"evil.api.github.com", "github.com.evil.test", "api.github.co",
                             "api.anthropic.com", "github"}) {
    auto r = store_->BindKit("box1", {Bind("github", "", {{domain, "bearer"}})});
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << domain;
    EXPECT_NE(r.status().message().find("is not one of github's hosts"), std::string::npos)
        << r.status();
  }
  auto other = store_->BindKit("box1", {Bind("anthropic", "", {{"llm.example.com", "bearer"}})});
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find(
                "inject domain \"llm.example.com\" is not one of anthropic's hosts "
                "(api.anthropic.com)"),
            std::string::npos)
      << other.status();

  // Nor into a request body through "replace" (the shared sentinel).
  auto replace = store_->BindKit("box1", {Bind("github", "", {{"api.github.com", "replace"}})});
  EXPECT_EQ(replace.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(replace.status().message().find("cannot place a stored secret with \"replace\""),
            std::string::npos)
      << replace.status();

  // Nothing changed: the earlier binding stands, the user's token goes
  // nowhere new.
  EXPECT_TRUE(Values(store_->Resolve("box1", "collect.evil.test")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "llm.example.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box1", "github.com")), std::vector<std::string>{"g:bearer"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.github.com")).empty());
  EXPECT_EQ(store_->Sentinels("box1")->count("CLAUDE_KEY"), 0u);

  // A service that is not built in has no stored secret to send: its
  // domains are the Kit's, and it stays unbound.
  auto own = store_->BindKit(
      "box1", {Bind("codeforge", "CODEFORGE_TOKEN", {{"api.codeforge.dev", "header:X-Token"}})});
  ASSERT_TRUE(own.ok()) << own.status();
  EXPECT_EQ(*own, std::vector<std::string>{"codeforge"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.codeforge.dev")).empty());
}

TEST_F(SecretStoreTest, ABindingStoredBeforeTheHostCheckSendsNothingElsewhere) {
  // A state file of schema step 2, holding a binding that today's BindKit
  // refuses.
  store_.reset();
  db_.reset();
  {
    auto db = StateDb::Open(DbPath() + ".v2");
    ASSERT_TRUE(db.ok()) << db.status();
    ASSERT_TRUE((*db)
                    ->Migrate({"CREATE TABLE secrets (serial INTEGER PRIMARY KEY AUTOINCREMENT, "
                               "id TEXT NOT NULL UNIQUE, scope TEXT NOT NULL, sandbox TEXT NOT "
                               "NULL, service TEXT NOT NULL, env TEXT NOT NULL, hosts TEXT NOT "
                               "NULL, sentinel TEXT NOT NULL, sealed BLOB NOT NULL, created_at "
                               "INTEGER NOT NULL);"
                               "CREATE TABLE sandboxes (name TEXT PRIMARY KEY, registered_at "
                               "INTEGER NOT NULL);"
                               "CREATE TABLE sandbox_globals (sandbox TEXT NOT NULL REFERENCES "
                               "sandboxes(name) ON DELETE CASCADE, serial INTEGER NOT NULL "
                               "REFERENCES secrets(serial) ON DELETE CASCADE, PRIMARY KEY "
                               "(sandbox, serial));"
                               "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
                               "CREATE TABLE kit_bindings (sandbox TEXT NOT NULL REFERENCES "
                               "sandboxes(name) ON DELETE CASCADE, service TEXT NOT NULL, env "
                               "TEXT NOT NULL, inject TEXT NOT NULL, PRIMARY KEY (sandbox, "
                               "service))"})
                    .ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO sandboxes (name, registered_at) VALUES ('box1', 1)").ok());
    ASSERT_TRUE((*db)
                    ->Exec("INSERT INTO kit_bindings (sandbox, service, env, inject) VALUES "
                           "('box1', 'github', 'GIT_PAT', "
                           "'collect.evil.test bearer\napi.github.com header:X-Token')")
                    .ok());
  }
  auto db = StateDb::Open(DbPath() + ".v2");
  ASSERT_TRUE(db.ok()) << db.status();
  db_ = std::move(*db);
  auto store = SecretStore::Open(db_.get(), KeyPath());
  ASSERT_TRUE(store.ok()) << store.status();
  store_ = std::move(*store);
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "g")).ok());

  EXPECT_TRUE(Values(store_->Resolve("box1", "collect.evil.test")).empty());
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:header:X-Token"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "github.com")).empty());
  EXPECT_EQ(store_->Sentinels("box1")->at("GIT_PAT"), "proxy-managed");
}

TEST_F(SecretStoreTest, ASuppressedServiceIsNeitherInTheEnvNorInjected) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "github", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "o")).ok());
  // The runtime phase: github and openai are the install phase's only;
  // mistral (no secret) too.
  auto runtime = store_->BindKit("box1", {Suppress("github"), Bind("anthropic", "CLAUDE_KEY"),
                                          Suppress("openai"), Suppress("mistral")});
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  EXPECT_TRUE(runtime->empty()) << "a suppressed service is never unbound";

  EXPECT_EQ(*store_->Sentinels("box1"),
            (std::map<std::string, std::string>{{"ANTHROPIC_API_KEY", "proxy-managed"},
                                                {"CLAUDE_KEY", "proxy-managed"}}));
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.github.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "github.com")).empty());
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.openai.com")).empty());
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
  // Another sandbox is not bound.
  EXPECT_EQ(store_->Sentinels("box2")->at("GH_TOKEN"), "proxy-managed");
  EXPECT_EQ(Values(store_->Resolve("box2", "api.github.com")),
            std::vector<std::string>{"g:bearer"});

  // The install phase: github bound, anthropic hidden.
  auto install = store_->BindKit("box1", {Bind("github", "GIT_PAT"), Suppress("anthropic")});
  ASSERT_TRUE(install.ok()) << install.status();
  EXPECT_TRUE(install->empty());
  EXPECT_EQ(*store_->Sentinels("box1"),
            (std::map<std::string, std::string>{{"GH_TOKEN", "proxy-managed"},
                                                {"GITHUB_TOKEN", "proxy-managed"},
                                                {"GIT_PAT", "proxy-managed"},
                                                {"OPENAI_API_KEY", "proxy-managed"}}));
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"o:bearer"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.anthropic.com")).empty());

  // Suppression survives a restart, and ends with the binding.
  Reopen();
  EXPECT_EQ(store_->Sentinels("box1")->count("ANTHROPIC_API_KEY"), 0u);
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.anthropic.com")).empty());
  ASSERT_TRUE(store_->BindKit("box1", {}).ok());
  EXPECT_EQ(store_->Sentinels("box1")->at("ANTHROPIC_API_KEY"), "proxy-managed");
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
}

TEST_F(SecretStoreTest, RebindReplacesAndAnEmptyListRemoves) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "anthropic", "a")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "o")).ok());
  ASSERT_TRUE(
      store_
          ->BindKit("box1", {Bind("anthropic", "OLD_KEY", {{"api.anthropic.com", "bearer"}}),
                             Bind("openai", "OPENAI_TOO")})
          .ok());
  ASSERT_TRUE(store_
                  ->BindKit("box1", {Bind("anthropic", "NEW_KEY",
                                          {{"api.anthropic.com", "header:X-Api-Key=Key %s"}})})
                  .ok());
  auto env = store_->Sentinels("box1");
  EXPECT_EQ(env->count("OLD_KEY"), 0u);
  EXPECT_EQ(env->count("OPENAI_TOO"), 0u);
  EXPECT_EQ(env->at("NEW_KEY"), "proxy-managed");
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:X-Api-Key=Key %s"});

  auto none = store_->BindKit("box1", {});
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_TRUE(none->empty());
  EXPECT_EQ(store_->Sentinels("box1")->count("NEW_KEY"), 0u);
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
  EXPECT_EQ((*db_->Query("SELECT COUNT(*) FROM kit_bindings"))[0][0], "0");
}

TEST_F(SecretStoreTest, UnboundListsServicesWithoutASecretInEffect) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "g")).ok());
  // BindKit registers box1 now: anthropic is a global it gets, mistral
  // (set later) is not.
  auto first = store_->BindKit(
      "box1", {Bind("codeforge", "CODEFORGE_TOKEN", {{"api.codeforge.dev", "header:X-Token"}}),
               Bind("anthropic", "CLAUDE_KEY"), Bind("github", "GIT_PAT")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::vector<std::string>{"codeforge"});
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "mistral", "m")).ok());
  auto second = store_->BindKit("box1", {Bind("mistral", "M_KEY"), Bind("anthropic", "C")});
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, std::vector<std::string>{"mistral"});
  EXPECT_EQ(store_->Sentinels("box1")->count("M_KEY"), 0u);
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.mistral.ai")).empty());
  // A binding with neither env nor inject (a Kit's oauth-only credential)
  // places nothing differently but is reported like any other.
  auto bare = store_->BindKit("box1", {Bind("anthropic", ""), Bind("oauthsvc", "")});
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(*bare, std::vector<std::string>{"oauthsvc"});
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
  // A sandbox secret of the service binds it.
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "mistral", "own-m")).ok());
  EXPECT_TRUE(store_->BindKit("box1", {Bind("mistral", "M_KEY")})->empty());
  EXPECT_EQ(store_->Sentinels("box1")->at("M_KEY"), "proxy-managed");
}

TEST_F(SecretStoreTest, BindKitRegistersTheSandboxWithTodaysGlobals) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "groq", "g")).ok());
  ASSERT_TRUE(store_->BindKit("box1", {Bind("groq", "LLM_KEY")}).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "xai", "x")).ok());
  // Resolve gives a registered sandbox its globals: groq, not the later xai.
  EXPECT_EQ(Values(store_->Resolve("box1", "api.groq.com")), std::vector<std::string>{"g:bearer"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.x.ai")).empty());
  EXPECT_EQ(*store_->Sentinels("box1"),
            (std::map<std::string, std::string>{{"GROQ_API_KEY", "proxy-managed"},
                                                {"LLM_KEY", "proxy-managed"}}));
}

TEST_F(SecretStoreTest, ForgetDeletesTheKitBindings) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(store_
                  ->BindKit("box1", {Bind("anthropic", "CLAUDE_KEY",
                                          {{"api.anthropic.com", "header:X-Api-Key=Key %s"}})})
                  .ok());
  ASSERT_TRUE(store_->BindKit("box2", {Bind("anthropic", "CLAUDE_KEY")}).ok());
  ASSERT_TRUE(store_->ForgetSandbox("box1").ok());
  EXPECT_EQ((*db_->Query("SELECT sandbox FROM kit_bindings"))[0], std::vector<std::string>{"box2"});
  // A new box1 starts afresh: built-in names and formats only.
  auto env = store_->Sentinels("box1");
  EXPECT_EQ(*env, (std::map<std::string, std::string>{{"ANTHROPIC_API_KEY", "proxy-managed"}}));
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:header:x-api-key"});
  EXPECT_EQ(store_->Sentinels("box2")->at("CLAUDE_KEY"), "proxy-managed");
}

TEST_F(SecretStoreTest, ForgetKeepingSecretsLetsARetryRegisterAfresh) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "own")).ok());
  // A create binds, finds github unbound and fails...
  auto first = store_->BindKit("box1", {Bind("github", "GIT_PAT"), Bind("openai", "")});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*first, std::vector<std::string>{"github"});
  // ...the user sets the global; the stale registration predates it.
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "github", "g")).ok());
  EXPECT_EQ(*store_->BindKit("box1", {Bind("github", "GIT_PAT")}),
            std::vector<std::string>{"github"});

  // vmmd's cleanup of the failed create.
  auto forgot = store_->ForgetSandbox("box1", /*keep_secrets=*/true);
  ASSERT_TRUE(forgot.ok()) << forgot.status();
  EXPECT_EQ(*forgot, 0);
  EXPECT_EQ((*db_->Query("SELECT COUNT(*) FROM kit_bindings"))[0][0], "0");
  EXPECT_TRUE(db_->Query("SELECT name FROM sandboxes")->empty());
  EXPECT_EQ(Ids(*store_->List("")), (std::vector<std::string>{"github@global", "openai@box1"}));

  // The retry registers now, with the global.
  auto retry = store_->BindKit("box1", {Bind("github", "GIT_PAT"), Bind("openai", "")});
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_TRUE(retry->empty());
  EXPECT_EQ(*store_->Sentinels("box1"),
            (std::map<std::string, std::string>{{"GH_TOKEN", "proxy-managed"},
                                                {"GITHUB_TOKEN", "proxy-managed"},
                                                {"GIT_PAT", "proxy-managed"},
                                                {"OPENAI_API_KEY", "proxy-managed"}}));
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:bearer"});
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"own:bearer"});
  // An unknown name is not an error either way; a plain Forget still
  // deletes the sandbox's secrets.
  EXPECT_EQ(*store_->ForgetSandbox("never-seen", true), 0);
  EXPECT_EQ(store_->ForgetSandbox("", true).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*store_->ForgetSandbox("box1"), 1);
  EXPECT_EQ(Ids(*store_->List("")), std::vector<std::string>{"github@global"});
}

TEST_F(SecretStoreTest, KitBindingsSurviveReopening) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", "g")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "anthropic", "a")).ok());
  ASSERT_TRUE(store_
                  ->BindKit("box1", {Bind("github", "GIT_PAT",
                                          {{"api.github.com", "header:Authorization=token %s"},
                                           {"github.com", "basic:me"}}),
                                     Suppress("anthropic")})
                  .ok());
  Reopen();
  EXPECT_EQ(store_->Sentinels("box1")->at("GIT_PAT"), "proxy-managed");
  EXPECT_EQ(store_->Sentinels("box1")->count("ANTHROPIC_API_KEY"), 0u);
  EXPECT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{"g:header:Authorization=token %s"});
  EXPECT_EQ(Values(store_->Resolve("box1", "github.com")), std::vector<std::string>{"g:basic:me"});
  EXPECT_TRUE(Values(store_->Resolve("box1", "api.anthropic.com")).empty());
}

TEST_F(SecretStoreTest, AnInvalidBindKitNamesTheFieldAndChangesNothing) {
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", "a")).ok());
  ASSERT_TRUE(
      store_->BindKit("box1", {Bind("anthropic", "CLAUDE_KEY", {{"api.anthropic.com", "bearer"}})})
          .ok());
  KitBinding suppress_env = Suppress("github");
  suppress_env.env = "GIT_PAT";
  KitBinding suppress_inject = Suppress("github");
  suppress_inject.inject = {{"api.github.com", "bearer"}};
  const KitInject ok_inject{"api.codeforge.dev", "header:X-Token"};
  std::vector<KitInject> too_many;
  for (size_t i = 0; i <= kMaxHostsPerSecret; ++i) {
    too_many.push_back({"h" + std::to_string(i) + ".example.com", "bearer"});
  }
  struct Case {
    std::string sandbox;
    std::vector<KitBinding> bindings;
    std::string field;
  };
  std::vector<Case> cases = {
      {"", {}, "sandbox"},
      {"Bad_Name", {}, "sandbox"},
      {"global", {}, "sandbox"},
      {"box1", {Bind("", "X")}, "credentials[0]: service"},
      {"box1", {Bind("anthropic", "X"), Bind("Code_Forge", "Y")}, "credentials[1]: service"},
      {"box1", {Bind("-svc", "X")}, "credentials[0]: service"},
      {"box1", {Bind(std::string(65, 'a'), "X")}, "credentials[0]: service"},
      {"box1", {Bind("anthropic", "X"), Bind("anthropic", "Y")}, "credentials[1]: service"},
      {"box1", {Bind("anthropic", "1KEY")}, "credentials[0]: env"},
      {"box1", {Bind("anthropic", "MY-KEY")}, "credentials[0]: env"},
      {"box1", {Bind("anthropic", "https_proxy")}, "credentials[0]: env"},
      {"box1",
       {Bind("codeforge", "", {ok_inject, {"*.codeforge.dev", "bearer"}})},
       "credentials[0]: inject[1].domain"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev:443", "bearer"}})},
       "credentials[0]: inject[0].domain"},
      {"box1", {Bind("codeforge", "", {{"", "bearer"}})}, "credentials[0]: inject[0].domain"},
      {"box1",
       {Bind("codeforge", "", {ok_inject, {"API.codeforge.dev.", "bearer"}})},
       "credentials[0]: inject[1].domain"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev", "carrier-pigeon"}})},
       "credentials[0]: inject[0].format"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev", ""}})},
       "credentials[0]: inject[0].format"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev", "header:X-Token=Token"}})},
       "credentials[0]: inject[0].format"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev", "header:Content-Length"}})},
       "credentials[0]: inject[0].format"},
      {"box1",
       {Bind("codeforge", "", {{"api.codeforge.dev", "header:X\nY"}})},
       "credentials[0]: inject[0].format"},
      {"box1", {Bind("codeforge", "", too_many)}, "credentials[0]: inject"},
      {"box1",
       {Bind("github", "", {{"api.github.com", "bearer"}, {"collect.evil.test", "bearer"}})},
       "credentials[0]: inject[1].domain"},
      {"box1", {Bind("anthropic", "X"), suppress_env}, "credentials[1]: suppress"},
      {"box1", {suppress_inject}, "credentials[0]: suppress"},
  };
  for (const auto& c : cases) {
    auto r = store_->BindKit(c.sandbox, c.bindings);
    ASSERT_FALSE(r.ok()) << c.field;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
    EXPECT_NE(r.status().message().find(c.field), std::string::npos) << r.status();
  }
  // Nothing changed: box1 keeps its binding, no other sandbox was
  // registered or bound.
  EXPECT_EQ(store_->Sentinels("box1")->at("CLAUDE_KEY"), "proxy-managed");
  EXPECT_EQ(Values(store_->Resolve("box1", "api.anthropic.com")),
            std::vector<std::string>{"a:bearer"});
  EXPECT_EQ((*db_->Query("SELECT COUNT(*) FROM kit_bindings"))[0][0], "1");
  EXPECT_EQ((*db_->Query("SELECT name FROM sandboxes"))[0], std::vector<std::string>{"box1"});
  EXPECT_EQ(db_->Query("SELECT name FROM sandboxes")->size(), 1u);
}

TEST_F(SecretStoreTest, KeyFileIsCreatedAndAWrongOrMissingKeyIsRefused) {
  struct stat st;
  ASSERT_EQ(stat(KeyPath().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600);
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "persisted")).ok());
  Reopen();
  EXPECT_EQ(Values(store_->Resolve("box1", "api.openai.com")),
            std::vector<std::string>{"persisted:bearer"});
  store_.reset();

  // Another key does not open this state file.
  std::string other = dir_.path() + "/other.key";
  ASSERT_EQ(system(("head -c 32 /dev/urandom > " + other + " && chmod 600 " + other).c_str()), 0);
  auto wrong = SecretStore::Open(db_.get(), other);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(wrong.status().message().find(other), std::string::npos) << wrong.status();

  // A lost key is not silently replaced by a new one.
  ASSERT_EQ(unlink(KeyPath().c_str()), 0);
  auto missing = SecretStore::Open(db_.get(), KeyPath());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(missing.status().message().find(KeyPath()), std::string::npos) << missing.status();
  EXPECT_NE(stat(KeyPath().c_str(), &st), 0) << "no new key file was made";
}

TEST_F(SecretStoreTest, AlteredOrMovedCiphertextIsNotResolved) {
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "openai", "value-o")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "groq", "value-g")).ok());
  // Move openai's sealed value into groq's row: the AAD (the id) differs.
  ASSERT_TRUE(db_->Exec("UPDATE secrets SET sealed = (SELECT sealed FROM secrets WHERE id = "
                        "'openai@box1') WHERE id = 'groq@box1'")
                  .ok());
  auto moved = store_->Resolve("box1", "api.groq.com");
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(moved.status().message().find("groq@box1"), std::string::npos);
  EXPECT_EQ(moved.status().message().find("value-o"), std::string::npos);

  auto rows = db_->Query("SELECT sealed FROM secrets WHERE id = 'openai@box1'");
  std::string sealed = (*rows)[0][0];
  sealed[sealed.size() / 2] ^= 0x20;
  ASSERT_TRUE(db_->Exec("UPDATE secrets SET sealed = ? WHERE id = 'openai@box1'", {sealed}).ok());
  EXPECT_EQ(store_->Resolve("box1", "api.openai.com").status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(SecretStoreTest, NoPlaintextInTheDatabaseOrItsWal) {
  const std::string v = "PLAINTEXT-MARKER-5f1e0c7a9b";
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", v)).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kSandbox, "box1", "github", v + "-gh")).ok());
  ASSERT_TRUE(
      store_->Set(Custom(Scope::kGlobal, "", "TOK", {"a.example.com"}, v + "-custom")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "anthropic", v + "-rotated")).ok());
  ASSERT_TRUE(store_->Set(Service(Scope::kGlobal, "", "openai", v + "-deleted")).ok());
  ASSERT_TRUE(store_->Delete("openai@global").ok());
  ASSERT_TRUE(store_->Set(Registry("ghcr.io", "bot:" + v + "-registry")).ok());
  ASSERT_TRUE(store_->Sentinels("box1").ok());
  ASSERT_EQ(Values(store_->Resolve("box1", "api.github.com")),
            std::vector<std::string>{v + "-gh:bearer"});

  auto scan = [&](const char* when) {
    std::string all;
    for (const char* suffix : {"", "-wal", "-shm"}) all += ReadFileToString(DbPath() + suffix);
    // The scan sees the data: ids and hosts are stored in clear.
    EXPECT_NE(all.find("anthropic@global"), std::string::npos) << when;
    EXPECT_NE(all.find("a.example.com"), std::string::npos) << when;
    EXPECT_EQ(all.find("PLAINTEXT-MARKER"), std::string::npos) << when;
  };
  struct stat st;
  ASSERT_EQ(stat((DbPath() + "-wal").c_str(), &st), 0);
  EXPECT_GT(st.st_size, 0);
  scan("with the WAL");
  store_.reset();
  db_.reset();  // checkpoints the WAL into the main file
  scan("after close");
}

}  // namespace
}  // namespace airlock::secretsd
