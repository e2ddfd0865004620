#include "common/state_db.h"

#include <sys/stat.h>

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

}  // namespace
}  // namespace airlock
