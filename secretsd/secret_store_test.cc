#include "secretsd/secret_store.h"

#include <sys/stat.h>

#include <regex>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

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
