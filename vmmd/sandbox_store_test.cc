#include "vmmd/sandbox_store.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

TEST(SandboxStoreTest, InsertPutLoadDelete) {
  auto db = StateDb::Open(std::string(getenv("TEST_TMPDIR")) + "/vmmd.db");
  ASSERT_TRUE(db.ok());
  SandboxStore store(db->get());
  ASSERT_TRUE(store.Init().ok());
  airlock::vmm::v1::Sandbox sb;
  sb.mutable_spec()->set_name("box1");
  sb.set_state(airlock::vmm::v1::CREATING);
  ASSERT_TRUE(store.Insert(sb).ok());
  EXPECT_EQ(store.Insert(sb).code(), absl::StatusCode::kAlreadyExists);
  sb.set_state(airlock::vmm::v1::RUNNING);
  ASSERT_TRUE(store.Put(sb).ok());
  auto all = store.LoadAll();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ((*all)[0].state(), airlock::vmm::v1::RUNNING);
  ASSERT_TRUE(store.Delete("box1").ok());
  EXPECT_TRUE(store.LoadAll()->empty());
  ASSERT_TRUE(store.SetSetting("k", "v").ok());
  EXPECT_EQ(*store.Setting("k"), "v");
  EXPECT_EQ(*store.Setting("missing"), "");
}

}  // namespace
}  // namespace airlock::vmmd
