// The API tokens of `airlock api token create`: long-lived secrets a REST
// client exchanges for short-lived access tokens. Only each secret's
// SHA-256 is stored; the secret itself is shown once.
#ifndef AIRLOCK_APID_TOKEN_STORE_H_
#define AIRLOCK_APID_TOKEN_STORE_H_

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/state_db.h"

namespace airlock::apid {

struct TokenRecord {
  std::string name;
  // Random id of this incarnation; access tokens carry it.
  std::string id;
  int64_t created_at = 0;
  int64_t last_used_at = 0;
};

class TokenStore {
 public:
  explicit TokenStore(StateDb* db) : db_(db) {}
  // Init applies apid's schema (tokens and the idempotency ledger).
  absl::Status Init();

  // Create makes a token; returns its record and secret. INVALID_ARGUMENT
  // for a bad name, ALREADY_EXISTS for one in use.
  absl::StatusOr<std::pair<TokenRecord, std::string>> Create(const std::string& name,
                                                             int64_t now);
  absl::StatusOr<std::vector<TokenRecord>> List();
  // Remove deletes it; NOT_FOUND when absent.
  absl::Status Remove(const std::string& name);
  // Exchange checks a secret (UNAUTHENTICATED with one sentence, the same
  // for an unknown name and a wrong secret) and records the use.
  absl::StatusOr<TokenRecord> Exchange(const std::string& name, const std::string& secret,
                                       int64_t now);
  // Live is true when token `name` still has incarnation `id`.
  bool Live(const std::string& name, const std::string& id);

 private:
  StateDb* db_;
  // (name, id) of every token: every change goes through this object, so
  // the set is the table's truth without a query per request.
  std::mutex mu_;
  std::set<std::pair<std::string, std::string>> live_;
  bool loaded_ = false;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_TOKEN_STORE_H_
