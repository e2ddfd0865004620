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

TEST(WarmPoolTest, OnlyAReadyVmOfTheSameSnapshotIsTakenOldestFirst) {
  WarmPool pool(2);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  EXPECT_FALSE(pool.Take("k1")) << "nothing is ready yet";
  ASSERT_TRUE(pool.Ready("_warm-2", 202, nullptr));
  ASSERT_TRUE(pool.Ready("_warm-1", 101, nullptr));
  EXPECT_FALSE(pool.Take("k2"));
  auto first = pool.Take("k1");
  ASSERT_TRUE(first);
  EXPECT_EQ(first->slot, "_warm-1");
  EXPECT_EQ(first->pid, 101);
  auto second = pool.Take("k1");
  ASSERT_TRUE(second);
  EXPECT_EQ(second->slot, "_warm-2");
  EXPECT_FALSE(pool.Take("k1"));
  EXPECT_EQ(pool.Want("k1").start, 2u);
}

TEST(WarmPoolTest, AnotherSnapshotRetiresTheReadyVmsAndKeepsStartingOnesIdsTaken) {
  WarmPool pool(2);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  ASSERT_TRUE(pool.Ready("_warm-1", 101, nullptr));
  WarmPool::Plan plan = pool.Want("k2");
  ASSERT_EQ(plan.retire.size(), 1u);
  EXPECT_EQ(plan.retire[0].slot, "_warm-1");
  EXPECT_EQ(plan.start, 2u);
  // The one still starting is not wanted, but its ids stay taken until
  // its starter ends it.
  EXPECT_FALSE(pool.Ready("_warm-2", 202, nullptr));
  EXPECT_FALSE(pool.Take("k1"));
  EXPECT_EQ(pool.JailUids(), std::vector<uint32_t>{20});
  pool.Drop("_warm-2");
  EXPECT_TRUE(pool.JailUids().empty());
}

TEST(WarmPoolTest, TakeAllHandsBackTheReadyAndRetiresTheStarting) {
  WarmPool pool(2);
  pool.Reserve(Vm("k1", "_warm-1", 10));
  pool.Reserve(Vm("k1", "_warm-2", 20));
  ASSERT_TRUE(pool.Ready("_warm-1", 101, nullptr));
  auto ready = pool.TakeAll();
  ASSERT_EQ(ready.size(), 1u);
  EXPECT_EQ(ready[0].pid, 101);
  EXPECT_FALSE(pool.Ready("_warm-2", 202, nullptr));
  EXPECT_EQ(pool.JailUids(), std::vector<uint32_t>{20});
  EXPECT_EQ(pool.Count("k1", false), 0u);
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
