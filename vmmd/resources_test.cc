#include "vmmd/resources.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

TEST(ValidateNameTest, AcceptsGoodNames) {
  for (const char* n : {"ab", "my-sandbox", "v1.2", "A9", "x.y-z"}) {
    EXPECT_TRUE(ValidateName(n).ok()) << n;
  }
}

TEST(ValidateNameTest, RefusesBadNamesWithReason) {
  EXPECT_NE(ValidateName("a").message().find("2 to 63"), std::string::npos);
  EXPECT_NE(ValidateName("-ab").message().find("start with"), std::string::npos);
  EXPECT_NE(ValidateName(".ab").message().find("start with"), std::string::npos);
  EXPECT_NE(ValidateName("a/b").message().find("only letters"), std::string::npos);
  EXPECT_NE(ValidateName("a b").message().find("only letters"), std::string::npos);
  EXPECT_NE(ValidateName("default").message().find("reserved"), std::string::npos);
  EXPECT_NE(ValidateName("global").message().find("reserved"), std::string::npos);
  EXPECT_FALSE(ValidateName(std::string(64, 'a')).ok());
}


TEST(ResolveResourcesTest, NamedSizes) {
  HostFacts host{8, 65536};
  EXPECT_EQ(ResolveResources(0, 0, "micro", host)->memory_mib, 2048u);
  EXPECT_EQ(ResolveResources(0, 0, "small", host)->cpus, 2u);
  EXPECT_EQ(ResolveResources(0, 0, "medium", host)->cpus, 4u);
  EXPECT_EQ(ResolveResources(0, 0, "large", host)->memory_mib, 16384u);
  auto xl = ResolveResources(0, 0, "xl", host);
  EXPECT_EQ(xl->cpus, 16u);
  EXPECT_EQ(xl->memory_mib, 32768u);
  // Explicit values win over the size name.
  EXPECT_EQ(ResolveResources(1, 0, "large", host)->cpus, 1u);
  EXPECT_FALSE(ResolveResources(0, 0, "huge", host).ok());
}

TEST(ResolveResourcesTest, DefaultsFollowTheHost) {
  EXPECT_EQ(ResolveResources(0, 0, "", {2, 24000})->memory_mib, 12000u);
  EXPECT_EQ(ResolveResources(0, 0, "", {2, 24000})->cpus, 2u);
  EXPECT_EQ(ResolveResources(0, 0, "", {16, 24000})->cpus, 4u);
  EXPECT_EQ(ResolveResources(0, 0, "", {2, 800})->memory_mib, 512u);
  EXPECT_EQ(ResolveResources(0, 0, "", {2, 1 << 20})->memory_mib, 32768u);
}

TEST(ResolveResourcesTest, Limits) {
  HostFacts host{2, 24000};
  EXPECT_NE(ResolveResources(0, 256, "", host).status().message().find("at least 512"),
            std::string::npos);
  EXPECT_FALSE(ResolveResources(65, 0, "", host).ok());
  EXPECT_FALSE(ResolveResources(0, 100000, "", host).ok());
  EXPECT_TRUE(ResolveResources(0, 512, "", host).ok());
}

}  // namespace
}  // namespace airlock::vmmd
