#include "proxyd/decision_log.h"

#include <chrono>
#include <thread>

#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

namespace pb = airlock::proxy::v1;

const std::vector<std::string> kSchema = {
    "CREATE TABLE decisions (seq INTEGER PRIMARY KEY AUTOINCREMENT, sandbox TEXT NOT NULL, "
    "data BLOB NOT NULL)"};

pb::Decision D(const std::string& sandbox, const std::string& host) {
  pb::Decision d;
  d.set_sandbox(sandbox);
  d.set_host(host);
  d.set_verdict(pb::DENY);
  return d;
}

TEST(DecisionLogTest, RecentSinceAndFilter) {
  testing::ShortTempDir dir;
  auto db = StateDb::Open(dir.path() + "/p.db");
  ASSERT_TRUE(db.ok());
  ASSERT_TRUE((*db)->Migrate(kSchema).ok());
  DecisionLog log(db->get());
  ASSERT_TRUE(log.Init().ok());
  log.Record(D("a", "one"));
  log.Record(D("b", "two"));
  log.Record(D("a", "three"));
  uint64_t newest = 0;
  auto recent = log.Recent(2, "", &newest);
  ASSERT_EQ(recent.size(), 2u);
  EXPECT_EQ(recent[0].host(), "two");  // oldest first
  EXPECT_EQ(recent[1].host(), "three");
  auto only_a = log.Recent(10, "a", &newest);
  ASSERT_EQ(only_a.size(), 2u);
  EXPECT_EQ(only_a[0].host(), "one");
  // Since waits for the next decision.
  std::thread later([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    log.Record(D("a", "four"));
  });
  uint64_t after = newest;
  auto began = std::chrono::steady_clock::now();
  auto next = log.Since(after, "a", std::chrono::seconds(30), &newest);
  later.join();
  // Woken by the decision, not by the end of its wait.
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(20));
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].host(), "four");
  EXPECT_GT(newest, after);
}

TEST(DecisionLogTest, SurvivesARestart) {
  testing::ShortTempDir dir;
  {
    auto db = StateDb::Open(dir.path() + "/p.db");
    ASSERT_TRUE((*db)->Migrate(kSchema).ok());
    DecisionLog log(db->get());
    ASSERT_TRUE(log.Init().ok());
    for (int i = 0; i < 5; ++i) log.Record(D("s", "h" + std::to_string(i)));
  }  // the destructor flushes the last batch
  auto db = StateDb::Open(dir.path() + "/p.db");
  ASSERT_TRUE((*db)->Migrate(kSchema).ok());
  DecisionLog log(db->get());
  ASSERT_TRUE(log.Init().ok());
  uint64_t newest = 0;
  auto all = log.Recent(100, "", &newest);
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[4].host(), "h4");
  log.Record(D("s", "after"));
  EXPECT_EQ(log.Recent(1, "", &newest)[0].host(), "after");
}

}  // namespace
}  // namespace airlock::proxyd
