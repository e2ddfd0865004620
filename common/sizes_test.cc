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

TEST(ParseDiskSizeTest, UnitsUpToTerabytes) {
  EXPECT_EQ(*ParseDiskSize("10g"), 10240u);
  EXPECT_EQ(*ParseDiskSize("512M"), 512u);
  EXPECT_EQ(*ParseDiskSize("1t"), 1048576u);
  EXPECT_EQ(*ParseDiskSize("2TiB"), 2097152u);
  EXPECT_EQ(*ParseDiskSize("20480"), 20480u);
  auto bad = ParseDiskSize("10x");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "invalid disk size \"10x\": unknown unit \"x\" (use m, g or t)");
  EXPECT_EQ(ParseMemory("4x").status().message(),
            "invalid memory size \"4x\": unknown unit \"x\" (use m or g)");
}

TEST(LookupSizeTest, NamedSizes) {
  EXPECT_EQ(LookupSize("small")->cpus, 2u);
  EXPECT_EQ(LookupSize("xl")->memory_mib, 32768u);
  EXPECT_FALSE(LookupSize("huge").ok());
}

}  // namespace
}  // namespace airlock
