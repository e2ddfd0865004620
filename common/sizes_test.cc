#include "common/sizes.h"

#include "gtest/gtest.h"

namespace airlock {
namespace {

TEST(ParseMemoryTest, Units) {
  EXPECT_EQ(*ParseMemory("2048"), 2048u);
  EXPECT_EQ(*ParseMemory("512m"), 512u);
  EXPECT_EQ(*ParseMemory("512MiB"), 512u);
  EXPECT_EQ(*ParseMemory("4g"), 4096u);
  EXPECT_EQ(*ParseMemory("2GiB"), 2048u);
  EXPECT_FALSE(ParseMemory("lots").ok());
  EXPECT_FALSE(ParseMemory("4t").ok());
  EXPECT_FALSE(ParseMemory("").ok());
  EXPECT_FALSE(ParseMemory("-1").ok());
}

TEST(LookupSizeTest, NamedSizes) {
  EXPECT_EQ(LookupSize("small")->cpus, 2u);
  EXPECT_EQ(LookupSize("xl")->memory_mib, 32768u);
  EXPECT_FALSE(LookupSize("huge").ok());
}

}  // namespace
}  // namespace airlock
