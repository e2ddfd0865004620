// Tokens, signed credentials, the authorization decision and the
// idempotency ledger, with a real SQLite file.
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "apid/auth.h"
#include "apid/idempotency.h"
#include "apid/signer.h"
#include "apid/token_store.h"
#include "gtest/gtest.h"

namespace airlock::apid {
namespace {

class CredentialsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/apid-test-XXXXXX";
    dir_ = mkdtemp(tmpl);
    auto db = StateDb::Open(dir_ + "/apid.db");
    ASSERT_TRUE(db.ok());
    db_ = std::move(*db);
    tokens_ = std::make_unique<TokenStore>(db_.get());
    ASSERT_TRUE(tokens_->Init().ok());
  }
  void TearDown() override { (void)!system(("rm -rf " + dir_).c_str()); }
  std::string dir_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<TokenStore> tokens_;
};

TEST_F(CredentialsTest, TokenLifecycle) {
  auto made = tokens_->Create("ci", 100);
  ASSERT_TRUE(made.ok());
  EXPECT_EQ(made->second.substr(0, 4), "alk_");
  EXPECT_EQ(tokens_->Create("ci", 101).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(tokens_->Create("bad name", 1).status().code(), absl::StatusCode::kInvalidArgument);
  auto wrong = tokens_->Exchange("ci", "alk_wrong", 102);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kUnauthenticated);
  auto unknown = tokens_->Exchange("nobody", made->second, 102);
  EXPECT_EQ(unknown.status().message(), wrong.status().message())
      << "an unknown name and a wrong secret look the same";
  auto ok = tokens_->Exchange("ci", made->second, 103);
  ASSERT_TRUE(ok.ok());
  EXPECT_TRUE(tokens_->Live("ci", ok->id));
  auto listed = tokens_->List();
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  EXPECT_EQ((*listed)[0].last_used_at, 103);
  // The secret is stored only hashed.
  auto rows = db_->Query("SELECT hash FROM api_tokens");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0][0].find(made->second), std::string::npos);
  EXPECT_EQ((*rows)[0][0], Sha256Hex(made->second));
  ASSERT_TRUE(tokens_->Remove("ci").ok());
  EXPECT_FALSE(tokens_->Live("ci", ok->id));
  EXPECT_EQ(tokens_->Remove("ci").code(), absl::StatusCode::kNotFound);
}

TEST_F(CredentialsTest, SignerRefusesForgeryAndExpiry) {
  auto signer = Signer::Open(dir_ + "/apid.key");
  ASSERT_TRUE(signer.ok());
  auto again = Signer::Open(dir_ + "/apid.key");
  Claims c;
  c.kind = "endpoint";
  c.subject = "ci";
  c.sandbox = "shell-1";
  c.permissions = {"sandboxesExec"};
  c.expires_at = 2000;
  std::string t = signer->Sign(c);
  auto back = again->Verify(t, 1999);
  ASSERT_TRUE(back.ok()) << "the key survives a restart";
  EXPECT_EQ(back->sandbox, "shell-1");
  EXPECT_EQ(signer->Verify(t, 2000).status().message(),
            "the bearer token has expired; get a new one");
  // Flip a byte of the payload: the MAC no longer verifies.
  std::string forged = t;
  forged[7] = forged[7] == 'A' ? 'B' : 'A';
  EXPECT_EQ(signer->Verify(forged, 1).status().message(),
            "the bearer token's signature does not verify");
  Signer other("another key that is 32 bytes long!!");
  EXPECT_FALSE(other.Verify(t, 1).ok());
  EXPECT_FALSE(signer->Verify("garbage", 1).ok());
}

TEST_F(CredentialsTest, AuthorizationDecision) {
  auto signer = Signer::Open(dir_ + "/apid.key");
  ASSERT_TRUE(signer.ok());
  Authenticator auth(&*signer, tokens_.get());
  auto made = tokens_->Create("ci", time(nullptr));
  ASSERT_TRUE(made.ok());
  auto record = tokens_->Exchange("ci", made->second, time(nullptr));
  ASSERT_TRUE(record.ok());
  std::string access = auth.IssueAccess(*record, time(nullptr), 60);
  auto with = [](const std::string& token) {
    HttpRequest r;
    r.headers["authorization"] = "Bearer " + token;
    return r;
  };
  Claims caller;
  EXPECT_FALSE(auth.Management(with(access), &caller).has_value());
  EXPECT_EQ(auth.Management(HttpRequest(), &caller)->status, 401);
  const std::string aud = "http://127.0.0.1:7777/endpoints/shell-1";
  std::string ep = auth.IssueEndpoint(caller, "shell-1", {"sandboxesFilesRead"}, aud,
                                      time(nullptr) + 60);
  EXPECT_FALSE(auth.Endpoint(with(ep), "shell-1", aud, "sandboxesFilesRead").has_value());
  EXPECT_EQ(auth.Endpoint(with(ep), "shell-1", aud, "sandboxesExec")->status, 403);
  EXPECT_EQ(auth.Endpoint(with(ep), "shell-2", "http://127.0.0.1:7777/endpoints/shell-2",
                          "sandboxesFilesRead")->status, 401);
  EXPECT_EQ(auth.Endpoint(with(access), "shell-1", aud, "sandboxesFilesRead")->status, 401)
      << "the management token is refused on the data plane";
  EXPECT_EQ(auth.Management(with(ep), &caller)->status, 401);
  ASSERT_TRUE(tokens_->Remove("ci").ok());
  EXPECT_EQ(auth.Management(with(access), &caller)->status, 401) << "revocation is at once";
  EXPECT_EQ(auth.Endpoint(with(ep), "shell-1", aud, "sandboxesFilesRead")->status, 401);
}

TEST_F(CredentialsTest, IdempotencyLedger) {
  IdempotencyLedger ledger(db_.get());
  auto none = ledger.Find("ci|createSandbox", "k1");
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  ASSERT_TRUE(ledger.Reserve("ci|createSandbox", "k1", "h1", "", 1000).ok());
  ASSERT_TRUE(ledger.Complete("ci|createSandbox", "k1", 202, "{}", "\"e\"").ok());
  auto found = ledger.Find("ci|createSandbox", "k1");
  ASSERT_TRUE(found.ok() && found->has_value());
  EXPECT_EQ((*found)->status, 202);
  EXPECT_EQ((*found)->request_hash, "h1");
  EXPECT_EQ((*found)->etag, "\"e\"");
  // Two days later the entry is dropped when another is reserved.
  ASSERT_TRUE(ledger.Reserve("ci|createSandbox", "k2", "h2", "", 1000 + 49 * 3600).ok());
  auto old = ledger.Find("ci|createSandbox", "k1");
  ASSERT_TRUE(old.ok());
  EXPECT_FALSE(old->has_value());
}

}  // namespace
}  // namespace airlock::apid
