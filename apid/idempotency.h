// The Idempotency-Key ledger: the first result of a keyed mutation, kept
// at least 24 hours, so a retry gets the same answer and a different
// payload under the same key is refused. A create reserves its target
// (the sandbox uid) before it acts, so a retry after a crash finds the
// sandbox instead of making a second one.
#ifndef AIRLOCK_APID_IDEMPOTENCY_H_
#define AIRLOCK_APID_IDEMPOTENCY_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "common/state_db.h"

namespace airlock::apid {

struct LedgerEntry {
  std::string request_hash;
  // What the operation acts on (a create's chosen uid).
  std::string target;
  // 0 while the operation has not finished (or apid died during it).
  int status = 0;
  std::string body;
  std::string etag;
};

class IdempotencyLedger {
 public:
  explicit IdempotencyLedger(StateDb* db) : db_(db) {}

  // Find returns the entry of (scope, key), if any.
  absl::StatusOr<std::optional<LedgerEntry>> Find(const std::string& scope,
                                                  const std::string& key);
  // Reserve records an operation about to run; entries older than two
  // days are dropped first.
  absl::Status Reserve(const std::string& scope, const std::string& key,
                       const std::string& request_hash, const std::string& target, int64_t now);
  // Complete records the operation's response.
  absl::Status Complete(const std::string& scope, const std::string& key, int status,
                        const std::string& body, const std::string& etag);
  // Forget drops a reservation whose operation changed nothing.
  absl::Status Forget(const std::string& scope, const std::string& key);

 private:
  StateDb* db_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_IDEMPOTENCY_H_
