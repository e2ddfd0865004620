#include "apid/token_store.h"

#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apid/signer.h"

namespace airlock::apid {

namespace {

// The whole schema; append steps, never edit.
const std::vector<std::string>& Schema() {
  static const std::vector<std::string> steps = {
      "CREATE TABLE api_tokens (name TEXT PRIMARY KEY, id TEXT NOT NULL, hash TEXT NOT NULL, "
      "created_at INTEGER NOT NULL, last_used_at INTEGER NOT NULL DEFAULT 0)",
      "CREATE TABLE idempotency (scope TEXT NOT NULL, key TEXT NOT NULL, request_hash TEXT NOT "
      "NULL, target TEXT NOT NULL DEFAULT '', status INTEGER NOT NULL DEFAULT 0, body TEXT NOT "
      "NULL DEFAULT '', etag TEXT NOT NULL DEFAULT '', created_at INTEGER NOT NULL, "
      "PRIMARY KEY (scope, key))",
  };
  return steps;
}

absl::Status ValidateTokenName(const std::string& name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("a token name is 1 to 64 characters");
  }
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError(absl::StrCat(
          "token name \"", name, "\" may hold only letters, digits, '-', '_' and '.'"));
    }
  }
  return absl::OkStatus();
}

int64_t Int(const std::string& s) {
  int64_t v = 0;
  (void)absl::SimpleAtoi(s, &v);
  return v;
}

}  // namespace

absl::Status TokenStore::Init() { return db_->Migrate(Schema()); }

absl::StatusOr<std::pair<TokenRecord, std::string>> TokenStore::Create(const std::string& name,
                                                                       int64_t now) {
  if (absl::Status s = ValidateTokenName(name); !s.ok()) return s;
  TokenRecord r{name, RandomToken(12), now, 0};
  std::string secret = absl::StrCat("alk_", RandomToken(32));
  // RETURNING answers in the same statement: no other writer's count.
  auto rows = db_->Query(
      "INSERT INTO api_tokens (name, id, hash, created_at) VALUES (?, ?, ?, ?) "
      "ON CONFLICT(name) DO NOTHING RETURNING name",
      {name, r.id, Sha256Hex(secret), now});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::AlreadyExistsError(absl::StrCat(
        "a token named \"", name, "\" exists; remove it first (airlock api token rm ", name,
        ") or pick another name"));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert({name, r.id});
  }
  return std::make_pair(r, secret);
}

absl::StatusOr<std::vector<TokenRecord>> TokenStore::List() {
  auto rows = db_->Query(
      "SELECT name, id, created_at, last_used_at FROM api_tokens ORDER BY name");
  if (!rows.ok()) return rows.status();
  std::vector<TokenRecord> out;
  for (const auto& row : *rows) out.push_back({row[0], row[1], Int(row[2]), Int(row[3])});
  return out;
}

absl::Status TokenStore::Remove(const std::string& name) {
  auto rows = db_->Query("DELETE FROM api_tokens WHERE name = ? RETURNING name", {name});
  if (!rows.ok()) return rows.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = live_.begin(); it != live_.end();) {
      it = it->first == name ? live_.erase(it) : std::next(it);
    }
  }
  if (rows->empty()) {
    return absl::NotFoundError(
        absl::StrCat("no API token named \"", name, "\" (see airlock api token ls)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenRecord> TokenStore::Exchange(const std::string& name,
                                                 const std::string& secret, int64_t now) {
  const absl::Status refused = absl::UnauthenticatedError(
      "unknown identifier or wrong secret (make one with airlock api token create NAME)");
  auto rows = db_->Query(
      "SELECT name, id, hash, created_at, last_used_at FROM api_tokens WHERE name = ?", {name});
  if (!rows.ok()) return rows.status();
  // The hash is compared even for an unknown name, so both take as long.
  std::string want = rows->empty() ? std::string(64, '0') : (*rows)[0][2];
  std::string got = Sha256Hex(secret);
  bool match = CRYPTO_memcmp(want.data(), got.data(), 64) == 0;
  if (rows->empty() || !match) return refused;
  (void)db_->Exec("UPDATE api_tokens SET last_used_at = ? WHERE name = ?", {now, name});
  const auto& row = (*rows)[0];
  return TokenRecord{row[0], row[1], Int(row[3]), now};
}

bool TokenStore::Live(const std::string& name, const std::string& id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!loaded_) {
    auto rows = db_->Query("SELECT name, id FROM api_tokens");
    if (!rows.ok()) return false;
    for (const auto& row : *rows) live_.insert({row[0], row[1]});
    loaded_ = true;
  }
  return live_.count({name, id}) > 0;
}

}  // namespace airlock::apid
