#include "guest/users.h"

#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

constexpr char kPasswd[] =
    "root:x:0:0:root:/root:/bin/bash\n"
    "agent:x:1000:1000::/home/agent:/bin/bash\n"
    "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
constexpr char kGroup[] = "root:x:0:\nsudo:x:27:agent\nagent:x:1000:\nusers:x:100:agent,bob\n";

TEST(ResolveUserTest, EmptyMeansAgentWhenPresent) {
  auto u = ResolveUser("", kPasswd, kGroup);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->name, "agent");
  EXPECT_EQ(u->uid, 1000u);
  EXPECT_EQ(u->home, "/home/agent");
  EXPECT_EQ(u->groups, (std::vector<gid_t>{1000, 27, 100}));
}

TEST(ResolveUserTest, EmptyMeansRootWithoutAgent) {
  auto u = ResolveUser("", "root:x:0:0:root:/root:/bin/sh\n", "");
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->uid, 0u);
}

TEST(ResolveUserTest, ByNameUidAndUidGid) {
  EXPECT_EQ(ResolveUser("root", kPasswd, kGroup)->home, "/root");
  EXPECT_EQ(ResolveUser("65534", kPasswd, kGroup)->name, "nobody");
  auto u = ResolveUser("4242:7", kPasswd, kGroup);
  ASSERT_TRUE(u.ok());
  EXPECT_EQ(u->uid, 4242u);
  EXPECT_EQ(u->gid, 7u);
}

TEST(ResolveUserTest, UnknownNameAndBadGroupAreErrors) {
  EXPECT_EQ(ResolveUser("mallory", kPasswd, kGroup).status().code(), absl::StatusCode::kNotFound);
  EXPECT_FALSE(ResolveUser("root:wheel", kPasswd, kGroup).ok());
}

}  // namespace
}  // namespace airlock::guest
