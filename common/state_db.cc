#include "common/state_db.h"

#include <sqlite3.h>
#include <sys/stat.h>

#include "absl/strings/str_cat.h"

namespace airlock {

absl::StatusOr<std::unique_ptr<StateDb>> StateDb::Open(const std::string& path) {
  sqlite3* db = nullptr;
  // The file is created 0600: state can name sandboxes, paths and hosts.
  mode_t old = umask(077);
  int rc = sqlite3_open_v2(path.c_str(), &db,
                           SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
                               SQLITE_OPEN_FULLMUTEX,
                           nullptr);
  umask(old);
  if (rc != SQLITE_OK) {
    std::string msg = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close(db);
    return absl::UnavailableError(absl::StrCat("cannot open state file ", path, ": ", msg));
  }
  sqlite3_busy_timeout(db, 5000);
  std::unique_ptr<StateDb> out(new StateDb(db, path));
  for (const char* pragma : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=FULL",
                             "PRAGMA foreign_keys=ON"}) {
    if (absl::Status s = out->Run(pragma, {}, nullptr); !s.ok()) {
      return absl::UnavailableError(absl::StrCat(path, ": ", s.message()));
    }
  }
  return out;
}

StateDb::~StateDb() { sqlite3_close(db_); }

absl::Status StateDb::Migrate(const std::vector<std::string>& steps) {
  auto rows = Query("PRAGMA user_version");
  if (!rows.ok()) return rows.status();
  size_t version = std::stoul((*rows)[0][0]);
  if (version > steps.size()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "state file has schema version ", version, " but this binary knows ",
        steps.size(), "; it was written by a newer Airlock"));
  }
  for (size_t i = version; i < steps.size(); ++i) {
    std::string tx = absl::StrCat("BEGIN; ", steps[i], "; PRAGMA user_version=", i + 1,
                                  "; COMMIT;");
    std::lock_guard<std::mutex> lock(mu_);
    char* err = nullptr;
    if (sqlite3_exec(db_, tx.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
      std::string msg = err ? err : "unknown error";
      sqlite3_free(err);
      sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
      return absl::InternalError(absl::StrCat("schema step ", i + 1, ": ", msg));
    }
  }
  return absl::OkStatus();
}

absl::Status StateDb::Exec(absl::string_view sql, const std::vector<SqlValue>& params) {
  return Run(sql, params, nullptr);
}

absl::StatusOr<std::vector<SqlRow>> StateDb::Query(absl::string_view sql,
                                                   const std::vector<SqlValue>& params) {
  std::vector<SqlRow> rows;
  if (absl::Status s = Run(sql, params, &rows); !s.ok()) return s;
  return rows;
}

int64_t StateDb::Changes() {
  std::lock_guard<std::mutex> lock(mu_);
  return sqlite3_changes64(db_);
}

absl::Status StateDb::Run(absl::string_view sql, const std::vector<SqlValue>& params,
                          std::vector<SqlRow>* rows) {
  std::lock_guard<std::mutex> lock(mu_);
  sqlite3_stmt* stmt = nullptr;
  if (int rc = sqlite3_prepare_v2(db_, sql.data(), static_cast<int>(sql.size()), &stmt, nullptr);
      rc != SQLITE_OK) {
    return Failure(rc, sql);
  }
  int rc = Step(stmt, params, rows);
  absl::Status status = absl::OkStatus();
  if (rc != SQLITE_DONE) status = Failure(rc, sql);
  sqlite3_finalize(stmt);
  return status;
}

int StateDb::Step(sqlite3_stmt* stmt, const std::vector<SqlValue>& params,
                  std::vector<SqlRow>* rows) {
  for (size_t i = 0; i < params.size(); ++i) {
    int idx = static_cast<int>(i + 1);
    if (std::holds_alternative<int64_t>(params[i])) {
      sqlite3_bind_int64(stmt, idx, std::get<int64_t>(params[i]));
    } else if (std::holds_alternative<std::string>(params[i])) {
      const std::string& v = std::get<std::string>(params[i]);
      // Bound as text (bytes kept exactly), so values compare equal to SQL
      // string literals; binary values read back unchanged too.
      sqlite3_bind_text(stmt, idx, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
    } else {
      sqlite3_bind_null(stmt, idx);
    }
  }
  int rc;
  while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    if (rows == nullptr) continue;
    SqlRow row;
    int n = sqlite3_column_count(stmt);
    for (int c = 0; c < n; ++c) {
      const void* data = sqlite3_column_blob(stmt, c);
      int len = sqlite3_column_bytes(stmt, c);
      row.emplace_back(data ? static_cast<const char*>(data) : "", data ? len : 0);
    }
    rows->push_back(std::move(row));
  }
  return rc;
}

absl::Status StateDb::ExecAll(const std::vector<SqlStatement>& statements) {
  std::lock_guard<std::mutex> lock(mu_);
  if (int rc = sqlite3_exec(db_, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr); rc != SQLITE_OK) {
    return Failure(rc, "BEGIN IMMEDIATE");
  }
  sqlite3_stmt* stmt = nullptr;
  absl::string_view prepared;
  absl::Status status = absl::OkStatus();
  for (const SqlStatement& st : statements) {
    if (stmt != nullptr && st.sql == prepared) {
      sqlite3_reset(stmt);
      sqlite3_clear_bindings(stmt);
    } else {
      sqlite3_finalize(stmt);
      stmt = nullptr;
      prepared = st.sql;
      if (int rc = sqlite3_prepare_v2(db_, st.sql.data(), static_cast<int>(st.sql.size()), &stmt,
                                      nullptr);
          rc != SQLITE_OK) {
        status = Failure(rc, st.sql);
        break;
      }
    }
    if (int rc = Step(stmt, st.params, nullptr); rc != SQLITE_DONE) {
      status = Failure(rc, st.sql);
      break;
    }
  }
  sqlite3_finalize(stmt);
  if (status.ok()) {
    int rc = sqlite3_exec(db_, "COMMIT", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return status;
    status = Failure(rc, "COMMIT");
  }
  sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  return status;
}

absl::Status StateDb::Failure(int rc, absl::string_view sql) {
  // A full disk is the operator's to fix: which file, and what to do; the
  // statement would only be noise. SQLite undoes the failed statement.
  if ((rc & 0xff) == SQLITE_FULL) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "no space left on the disk holding ", path_, " (", sqlite3_errmsg(db_),
        "): free some space and try again"));
  }
  return absl::InternalError(absl::StrCat("sql \"", sql, "\": ", sqlite3_errmsg(db_)));
}

absl::Status InTransaction(StateDb* db, const std::function<absl::Status()>& body) {
  if (absl::Status s = db->Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
  absl::Status s = body();
  if (!s.ok()) {
    (void)db->Exec("ROLLBACK");
    return s;
  }
  return db->Exec("COMMIT");
}

}  // namespace airlock
