#include "apid/idempotency.h"

#include "absl/strings/numbers.h"

namespace airlock::apid {

namespace {
constexpr int64_t kRetainSeconds = 48 * 3600;
}

absl::StatusOr<std::optional<LedgerEntry>> IdempotencyLedger::Find(const std::string& scope,
                                                                   const std::string& key) {
  auto rows = db_->Query(
      "SELECT request_hash, target, status, body, etag FROM idempotency WHERE scope = ? AND "
      "key = ?",
      {scope, key});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return std::optional<LedgerEntry>();
  const auto& r = (*rows)[0];
  LedgerEntry e{r[0], r[1], 0, r[3], r[4]};
  (void)absl::SimpleAtoi(r[2], &e.status);
  return std::optional<LedgerEntry>(e);
}

absl::Status IdempotencyLedger::Reserve(const std::string& scope, const std::string& key,
                                        const std::string& request_hash,
                                        const std::string& target, int64_t now) {
  (void)db_->Exec("DELETE FROM idempotency WHERE created_at < ?", {now - kRetainSeconds});
  return db_->Exec(
      "INSERT INTO idempotency (scope, key, request_hash, target, created_at) VALUES (?, ?, ?, "
      "?, ?)",
      {scope, key, request_hash, target, now});
}

absl::Status IdempotencyLedger::Complete(const std::string& scope, const std::string& key,
                                         int status, const std::string& body,
                                         const std::string& etag) {
  return db_->Exec(
      "UPDATE idempotency SET status = ?, body = ?, etag = ? WHERE scope = ? AND key = ?",
      {int64_t{status}, body, etag, scope, key});
}

absl::Status IdempotencyLedger::Forget(const std::string& scope, const std::string& key) {
  return db_->Exec("DELETE FROM idempotency WHERE scope = ? AND key = ?", {scope, key});
}

}  // namespace airlock::apid
