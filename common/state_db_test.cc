#include "common/state_db.h"

#include <sys/stat.h>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

std::string DbPath(const std::string& leaf) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + leaf;
}

TEST(StateDbTest, OpensInWalModeWithPrivateFile) {
  auto db = StateDb::Open(DbPath("wal.db"));
  ASSERT_TRUE(db.ok()) << db.status();
  auto rows = (*db)->Query("PRAGMA journal_mode");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0][0], "wal");
  struct stat st;
  ASSERT_EQ(stat(DbPath("wal.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 077, 0);
}

TEST(StateDbTest, MigrationsApplyOnceAndDataSurvivesReopen) {
  std::string path = DbPath("mig.db");
  std::vector<std::string> steps = {"CREATE TABLE t (k TEXT PRIMARY KEY, v BLOB)"};
  {
    auto db = StateDb::Open(path);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Migrate(steps).ok());
    ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES (?, ?)", {std::string("a"),
                                                          std::string("x\0y", 3)}).ok());
  }
  steps.push_back("ALTER TABLE t ADD COLUMN n INTEGER DEFAULT 7");
  auto db = StateDb::Open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate(steps).ok());
  auto rows = (*db)->Query("SELECT k, v, n FROM t");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][1], std::string("x\0y", 3));
  EXPECT_EQ((*rows)[0][2], "7");
}

TEST(StateDbTest, NewerSchemaIsRefused) {
  std::string path = DbPath("newer.db");
  auto db = StateDb::Open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate({"CREATE TABLE a (x)", "CREATE TABLE b (x)"}).ok());
  EXPECT_EQ((*db)->Migrate({"CREATE TABLE a (x)"}).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(StateDbTest, BadSqlIsAnErrorNotACrash) {
  auto db = StateDb::Open(DbPath("bad.db"));
  ASSERT_TRUE(db.ok());
  absl::Status s = (*db)->Exec("SELEKT 1");
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("SELEKT"), std::string::npos);
}

TEST(StateDbTest, AFullDiskNamesTheFileAndChangesNothing) {
  std::string path = DbPath("full.db");
  auto db = StateDb::Open(path);
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate({"CREATE TABLE t (v BLOB)"}).ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES ('kept')").ok());
  // The file may not grow: SQLite answers as it does on a full disk.
  auto pages = (*db)->Query("PRAGMA page_count");
  ASSERT_TRUE(pages.ok());
  ASSERT_TRUE((*db)->Query(absl::StrCat("PRAGMA max_page_count=", (*pages)[0][0])).ok());
  absl::Status s = (*db)->Exec("INSERT INTO t VALUES (?)", {std::string(64 * 1024, 'x')});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_EQ(s.message(), absl::StrCat("no space left on the disk holding ", path,
                                      " (database or disk is full): free some space and try "
                                      "again"));
  // The same inside a transaction: rolled back, and the next one works.
  absl::Status tx = InTransaction(db->get(), [&] {
    return (*db)->Exec("INSERT INTO t VALUES (?)", {std::string(64 * 1024, 'y')});
  });
  EXPECT_EQ(tx.code(), absl::StatusCode::kResourceExhausted) << tx;
  auto rows = (*db)->Query("SELECT v FROM t");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][0], "kept");
  EXPECT_TRUE(InTransaction(db->get(), [&] {
                return (*db)->Exec("INSERT INTO t VALUES ('small')");
              }).ok());
}

TEST(StateDbTest, ExecAllWritesEveryRowInOneTransaction) {
  auto db = StateDb::Open(DbPath("execall.db"));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate({"CREATE TABLE t (k TEXT, v INTEGER)"}).ok());
  std::vector<SqlStatement> batch;
  for (int64_t i = 0; i < 1000; ++i) {
    batch.push_back({"INSERT INTO t VALUES (?, ?)", {std::string("row"), i}});
  }
  batch.push_back({"DELETE FROM t WHERE v < ?", {int64_t{10}}});
  batch.push_back({"INSERT INTO t VALUES (?, ?)", {std::string("last"), int64_t{-1}}});
  ASSERT_TRUE((*db)->ExecAll(batch).ok());
  auto rows = (*db)->Query("SELECT COUNT(*), SUM(v) FROM t");
  ASSERT_TRUE(rows.ok());
  EXPECT_EQ((*rows)[0][0], "991");
  // 10 + ... + 999, and the last row's -1.
  EXPECT_EQ((*rows)[0][1], std::to_string(499500 - 45 - 1));
}

TEST(StateDbTest, ExecAllWithAFailingStatementChangesNothing) {
  auto db = StateDb::Open(DbPath("execall-fail.db"));
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate({"CREATE TABLE t (k TEXT NOT NULL)"}).ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO t VALUES ('kept')").ok());
  absl::Status s = (*db)->ExecAll({{"INSERT INTO t VALUES (?)", {std::string("a")}},
                                   {"INSERT INTO t VALUES (?)", {std::string("b")}},
                                   {"INSERT INTO t VALUES (?)", {nullptr}},
                                   {"INSERT INTO t VALUES (?)", {std::string("c")}}});
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_NE(s.message().find("NOT NULL"), std::string::npos) << s.message();
  auto rows = (*db)->Query("SELECT k FROM t");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 1u);
  EXPECT_EQ((*rows)[0][0], "kept");
  // Bad SQL is refused the same way, and the handle still works after.
  EXPECT_FALSE((*db)->ExecAll({{"INSERT INTO t VALUES ('x')", {}}, {"SELEKT 1", {}}}).ok());
  EXPECT_TRUE((*db)->ExecAll({{"INSERT INTO t VALUES ('y')", {}}}).ok());
  rows = (*db)->Query("SELECT k FROM t ORDER BY k");
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 2u);
  EXPECT_EQ((*rows)[1][0], "y");
}

}  // namespace
}  // namespace airlock
