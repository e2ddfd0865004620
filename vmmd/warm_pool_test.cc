#include "vmmd/warm_pool.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

WarmVm Vm(const std::string& key, const std::string& slot, uint32_t uid) {
  WarmVm vm;
  vm.key = key;
  vm.slot = slot;
  vm.jail_uid = uid;
  return vm;
}

// Started is Launched and Ready for `slot`.
bool Started(WarmPool& pool, const std::string& slot, pid_t pid) {
  pool.Launched(slot, pid);
  return pool.Ready(slot, nullptr);
}

TEST(WarmPoolTest, FillsUpToItsSizeForTheSnapshotLastWanted) {
  WarmPool pool(2);
  WarmPool::Plan plan = pool.Want("k1");
  EXPECT_EQ(plan.start, 2u);
  EXPECT_TRUE(plan.retire.empty());
  pool.Reserve(Vm("k1", "_warm-1", 10));
  // One is starting: only the other is still owed.
  EXPECT_EQ(pool.Want("k1").start, 1u);
  pool.Reserve(Vm("k1", "_warm-2", 20));
  EXPECT_EQ(pool.Want("k1").start, 0u);
  EXPECT_EQ(pool.Count("k1", false), 2u);
  EXPECT_EQ(pool.Count("k1", true), 0u);
}

TEST(WarmPoolTest, OnlyALaunchedReadyVmOfTheSameSnapshotIsTakenOldestFirst) {
  WarmPool pool(2);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  EXPECT_FALSE(pool.Take("k1")) << "nothing is ready yet";
  EXPECT_FALSE(pool.Ready("_warm-1", nullptr)) << "no process yet";
  ASSERT_TRUE(Started(pool, "_warm-2", 202));
  ASSERT_TRUE(Started(pool, "_warm-1", 101));
  EXPECT_FALSE(pool.Take("k2"));
  auto first = pool.Take("k1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->slot, "_warm-1");
  EXPECT_EQ(first->pid, 101);
  auto second = pool.Take("k1");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->slot, "_warm-2");
  EXPECT_FALSE(pool.Take("k1"));
  // Taken VMs no longer count for the pool, so two more are owed.
  EXPECT_EQ(pool.Want("k1").start, 2u);
}

TEST(WarmPoolTest, ATakenVmKeepsItsJailIdsUntilDropped) {
  // Between a claim's Take and the record naming the ids as the sandbox's,
  // no other VM or sandbox may be given them.
  WarmPool pool(1);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  ASSERT_TRUE(Started(pool, "_warm-1", 101));
  auto vm = pool.Take("k1");
  ASSERT_TRUE(vm);
  EXPECT_EQ(pool.JailUids(), std::vector<uint32_t>{10});
  EXPECT_FALSE(pool.Take("k1"));
  pool.Drop("_warm-1");
  EXPECT_TRUE(pool.JailUids().empty());
}

TEST(WarmPoolTest, AnotherSnapshotRetiresTheVmsOfTheLastAndKeepsTheirIdsTaken) {
  WarmPool pool(2);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  ASSERT_TRUE(Started(pool, "_warm-1", 101));
  WarmPool::Plan plan = pool.Want("k2");
  ASSERT_EQ(plan.retire.size(), 1u);
  EXPECT_EQ(plan.retire[0].slot, "_warm-1");
  EXPECT_EQ(plan.start, 2u);
  // The one still starting is not wanted: it never becomes ready.
  pool.Launched("_warm-2", 202);
  EXPECT_FALSE(pool.Ready("_warm-2", nullptr));
  EXPECT_FALSE(pool.Take("k1"));
  // Both keep their ids until their enders drop them.
  EXPECT_EQ(pool.JailUids(), (std::vector<uint32_t>{10, 20}));
  pool.Drop("_warm-1");
  pool.Drop("_warm-2");
  EXPECT_TRUE(pool.JailUids().empty());
}

TEST(WarmPoolTest, TheVmsOfASnapshotThatIsGoneAreRetired) {
  WarmPool pool(3);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  pool.Reserve(Vm("k1", "_warm-3", 30));
  ASSERT_TRUE(Started(pool, "_warm-1", 101));
  ASSERT_TRUE(Started(pool, "_warm-2", 202));
  ASSERT_TRUE(pool.Take("k1"));  // _warm-1: a claim's, left alone
  auto kept = pool.Retire([](const std::string&) { return true; });
  EXPECT_TRUE(kept.empty());
  auto gone = pool.Retire([](const std::string& key) { return key != "k1"; });
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_EQ(gone[0].slot, "_warm-2");
  EXPECT_EQ(gone[0].state, WarmVm::kLeaving);
  // The one still starting never becomes ready; none is counted for use.
  pool.Launched("_warm-3", 303);
  EXPECT_FALSE(pool.Ready("_warm-3", nullptr));
  EXPECT_EQ(pool.Count("k1", false), 0u);
  EXPECT_FALSE(pool.Take("k1"));
  // A second call returns nothing new.
  EXPECT_TRUE(pool.Retire([](const std::string&) { return false; }).empty());
  EXPECT_EQ(pool.JailUids(), (std::vector<uint32_t>{10, 20, 30}));
}

TEST(WarmPoolTest, TakeAllHandsBackTheReadyAndTheLaunchedStartingButNotAClaimedOne) {
  WarmPool pool(3);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  pool.Reserve(Vm("k1", "_warm-3", 30));
  pool.Reserve(Vm("k1", "_warm-4", 40));
  ASSERT_TRUE(Started(pool, "_warm-1", 101));
  ASSERT_TRUE(Started(pool, "_warm-2", 202));
  ASSERT_TRUE(pool.Take("k1"));  // _warm-1: a claim's
  pool.Launched("_warm-3", 303);
  auto all = pool.TakeAll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].slot, "_warm-2");
  EXPECT_EQ(all[0].state, WarmVm::kLeaving);
  EXPECT_EQ(all[1].slot, "_warm-3");
  EXPECT_EQ(all[1].state, WarmVm::kStarting);
  EXPECT_FALSE(pool.Ready("_warm-3", nullptr));
  EXPECT_EQ(pool.Count("k1", false), 0u);
  EXPECT_EQ(pool.JailUids(), (std::vector<uint32_t>{10, 20, 30, 40}));
}

TEST(WarmPoolTest, SizeZeroKeepsNone) {
  WarmPool pool(0);
  EXPECT_EQ(pool.Want("k1").start, 0u);
}

TEST(WarmPoolTest, SlotNamesAreNeverSandboxNames) {
  EXPECT_TRUE(IsWarmSlot("_warm-0a1b2c3d"));
  EXPECT_FALSE(IsWarmSlot("warm-0a1b2c3d"));
  EXPECT_FALSE(IsWarmSlot("_snapshot"));
}

}  // namespace
}  // namespace airlock::vmmd
