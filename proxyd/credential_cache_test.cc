#include "proxyd/credential_cache.h"

#include <chrono>

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

using Clock = CredentialCache::Clock;
using std::chrono::milliseconds;

class CredentialCacheTest : public ::testing::Test {
 protected:
  Clock::time_point now_ = Clock::time_point(std::chrono::hours(1));
  CredentialCache cache_{4, [this] { return now_; }};

  static std::vector<Placement> One(const std::string& value) {
    Placement p;
    p.id = "github@global";
    p.value = value;
    return {p};
  }
  std::string Value(const std::string& sandbox = "s1", const std::string& host = "api.github.com",
                    uint16_t port = 443) {
    auto kept = cache_.Lookup(sandbox, host, port);
    if (!kept) return "(miss)";
    return kept->empty() ? "(none)" : (*kept)[0].value;
  }
  uint64_t Gen() { return cache_.Generation(); }
  // A ping answered now, vouching for a second.
  void Answer(uint64_t instance, uint64_t revision) {
    cache_.Known(instance, revision, now_ + milliseconds(1000));
  }
};

TEST_F(CredentialCacheTest, NothingIsUsedWithoutAWatch) {
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  EXPECT_EQ(Value(), "(miss)");
  EXPECT_EQ(cache_.size(), 0u);
}

TEST_F(CredentialCacheTest, AnAnswerOfTheKnownRevisionIsUsedWhileTheLeaseRuns) {
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  EXPECT_EQ(Value(), "v1");
  cache_.Store("s1", "example.com", 443, 7, 1, Gen(), {});
  EXPECT_EQ(Value("s1", "example.com"), "(none)");  // "no credential" is kept too
  EXPECT_EQ(Value("s2"), "(miss)");                 // another sandbox's request
  EXPECT_EQ(Value("s1", "api.github.com", 8443), "(miss)");
  now_ += milliseconds(999);
  EXPECT_EQ(Value(), "v1");
  now_ += milliseconds(1);
  EXPECT_EQ(Value(), "(miss)");  // the lease ran out (and what was kept went)
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  EXPECT_EQ(Value(), "v1");  // a new answer vouches again for what is asked anew
}

TEST_F(CredentialCacheTest, APushedChangeEndsTheUseOfOlderAnswers) {
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  cache_.Known(7, 2, std::nullopt);
  EXPECT_EQ(Value(), "(miss)");
  EXPECT_EQ(cache_.size(), 0u);
  // An answer resolved before the change and arriving after it is not kept.
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  EXPECT_EQ(Value(), "(miss)");
  // One of the new revision is, under the lease already running.
  cache_.Store("s1", "api.github.com", 443, 7, 2, Gen(), One("v2"));
  EXPECT_EQ(Value(), "v2");
}

TEST_F(CredentialCacheTest, AnAnswerOfARevisionNotYetKnownIsNotKept) {
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 2, Gen(), One("v2"));
  EXPECT_EQ(Value(), "(miss)");
}

TEST_F(CredentialCacheTest, APushExtendsNoLease) {
  Answer(7, 1);
  now_ += milliseconds(900);
  cache_.Known(7, 2, std::nullopt);
  cache_.Store("s1", "api.github.com", 443, 7, 2, Gen(), One("v2"));
  EXPECT_EQ(Value(), "v2");
  now_ += milliseconds(100);
  EXPECT_EQ(Value(), "(miss)");  // the first answer's lease is over
}

TEST_F(CredentialCacheTest, ALateOlderAnswerExtendsTheLeaseAndMovesNothingBack) {
  Answer(7, 1);
  now_ += milliseconds(900);
  cache_.Known(7, 2, std::nullopt);
  cache_.Store("s1", "api.github.com", 443, 7, 2, Gen(), One("v2"));
  // An answer read before the change, arriving after its push: it vouches
  // for its lease (about changes after its ping), and the revision stays
  // the pushed one.
  cache_.Known(7, 1, now_ + milliseconds(1000));
  now_ += milliseconds(200);
  EXPECT_EQ(Value(), "v2");
  cache_.Store("s1", "example.com", 443, 7, 1, Gen(), {});
  EXPECT_EQ(Value("s1", "example.com"), "(miss)");
}

TEST_F(CredentialCacheTest, AnotherSecretsdInstanceStartsOver) {
  Answer(7, 5);
  cache_.Store("s1", "api.github.com", 443, 7, 5, Gen(), One("v1"));
  Answer(8, 5);  // restarted: its revision 5 is another store's
  EXPECT_EQ(Value(), "(miss)");
  cache_.Store("s1", "api.github.com", 443, 7, 5, Gen(), One("v1"));
  EXPECT_EQ(Value(), "(miss)");
}

TEST_F(CredentialCacheTest, ALostWatchUsesNothing) {
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  cache_.Lost();
  EXPECT_EQ(Value(), "(miss)");
  Answer(7, 1);  // the same secretsd again: what was kept went with the watch
  EXPECT_EQ(Value(), "(miss)");
}

TEST_F(CredentialCacheTest, AnAnswerAskedForBeforeAForgetIsNotStored) {
  Answer(7, 1);
  uint64_t asked_at = Gen();
  cache_.Forget("s1");  // detached while its Resolve was in flight
  cache_.Store("s1", "api.github.com", 443, 7, 1, asked_at, One("v1"));
  EXPECT_EQ(Value(), "(miss)");
  EXPECT_EQ(cache_.size(), 0u);
}

TEST_F(CredentialCacheTest, ALapsedLeaseDropsWhatWasKept) {
  Answer(7, 1);
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  now_ += milliseconds(1000);
  EXPECT_EQ(Value(), "(miss)");
  EXPECT_EQ(cache_.size(), 0u);  // not only unused: gone
  cache_.Store("s1", "api.github.com", 443, 7, 1, Gen(), One("v1"));
  EXPECT_EQ(cache_.size(), 0u);  // nor stored without a lease
}

TEST_F(CredentialCacheTest, ForgetDropsOneSandboxAndTheSizeIsBounded) {
  Answer(7, 1);
  cache_.Store("s1", "a.example", 443, 7, 1, Gen(), One("a"));
  cache_.Store("s2", "a.example", 443, 7, 1, Gen(), One("b"));
  cache_.Forget("s1");
  EXPECT_EQ(Value("s1", "a.example"), "(miss)");
  EXPECT_EQ(Value("s2", "a.example"), "b");
  for (int i = 0; i < 4; ++i) cache_.Store("s3", "h" + std::to_string(i), 443, 7, 1, Gen(), {});
  EXPECT_LE(cache_.size(), 4u);
}

}  // namespace
}  // namespace airlock::proxyd
