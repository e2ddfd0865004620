// A daemon's SQLite state file: WAL journal, full sync, schema versions.
// Every write that returns OK survives a kill -9 of the daemon.
#ifndef AIRLOCK_COMMON_STATE_DB_H_
#define AIRLOCK_COMMON_STATE_DB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

struct sqlite3;
struct sqlite3_stmt;

namespace airlock {

// SqlValue is a bound parameter: NULL, an integer, or bytes (bound as
// text, so they compare equal to SQL string literals).
using SqlValue = std::variant<std::nullptr_t, int64_t, std::string>;

// SqlRow is one result row; every column as bytes (NULL reads as "").
using SqlRow = std::vector<std::string>;

// SqlStatement is one statement and its bound parameters (for ExecAll);
// `sql` must outlive the call.
struct SqlStatement {
  absl::string_view sql;
  std::vector<SqlValue> params;
};

// StateDb is a thread-safe handle on one SQLite database.
class StateDb {
 public:
  // Open opens (or creates, mode 0600) the database at `path` in WAL mode
  // with synchronous=FULL.
  static absl::StatusOr<std::unique_ptr<StateDb>> Open(const std::string& path);
  ~StateDb();

  StateDb(const StateDb&) = delete;
  StateDb& operator=(const StateDb&) = delete;

  // Migrate applies steps[user_version..] in one transaction each and bumps
  // PRAGMA user_version, so a schema is only ever extended.
  absl::Status Migrate(const std::vector<std::string>& steps);

  // Exec runs one statement with bound parameters. A write the disk has no
  // room for fails with RESOURCE_EXHAUSTED naming this state file (never
  // the statement), so the operator knows which disk to free.
  absl::Status Exec(absl::string_view sql, const std::vector<SqlValue>& params = {});

  // ExecAll runs `statements` in one transaction: all of them or, when
  // one fails, none (its error is returned). A statement with the SQL
  // text of the one before reuses its prepared form, so a batch of
  // inserts is prepared once; no other thread's statement runs in
  // between (Exec's BEGIN ... COMMIT would let one join).
  absl::Status ExecAll(const std::vector<SqlStatement>& statements);

  // Query runs one statement and returns its rows.
  absl::StatusOr<std::vector<SqlRow>> Query(absl::string_view sql,
                                            const std::vector<SqlValue>& params = {});

  // Changes is the number of rows the last Exec changed.
  int64_t Changes();

 private:
  StateDb(sqlite3* db, std::string path) : db_(db), path_(std::move(path)) {}
  absl::Status Run(absl::string_view sql, const std::vector<SqlValue>& params,
                   std::vector<SqlRow>* rows);
  // Step binds `params` to the prepared `stmt` and runs it to its end
  // (rows kept in `rows` when given); SQLite's result code.
  static int Step(sqlite3_stmt* stmt, const std::vector<SqlValue>& params,
                  std::vector<SqlRow>* rows);
  // Failure is the status of a statement that failed with SQLite code `rc`.
  absl::Status Failure(int rc, absl::string_view sql);

  std::mutex mu_;
  sqlite3* db_;
  std::string path_;
};

// InTransaction runs `body` between BEGIN IMMEDIATE and COMMIT on `db`,
// rolling back when it fails. The caller serializes writers of `db` (one
// connection: a statement of another thread would join the transaction).
absl::Status InTransaction(StateDb* db, const std::function<absl::Status()>& body);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_STATE_DB_H_
