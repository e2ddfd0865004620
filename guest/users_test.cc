#include "guest/users.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

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

TEST(PlanAgentUserTest, NothingWhenAgentExists) {
  EXPECT_FALSE(PlanAgentUser(kPasswd, kGroup, true).needed);
}

TEST(PlanAgentUserTest, TakesTheFirstFreeIdFrom1000) {
  const char* passwd = "root:x:0:0::/root:/bin/sh\nnode:x:1000:1000::/home/node:/bin/sh\n";
  const char* group = "root:x:0:\nnode:x:1000:\n";
  AgentUserPlan p = PlanAgentUser(passwd, group, false);
  ASSERT_TRUE(p.needed);
  EXPECT_EQ(p.uid, 1001u);
  EXPECT_EQ(p.gid, 1001u);
  EXPECT_EQ(p.passwd_line, "agent:x:1001:1001:agent:/home/agent:/bin/sh");
  EXPECT_EQ(p.group_line, "agent:x:1001:");
}

TEST(EnsureAgentUserTest, CreatesUserAndWorkspaceInARootWithoutIt) {
  std::string tmpl = ::testing::TempDir() + "/rootXXXXXX";
  std::string root = mkdtemp(tmpl.data());
  mkdir((root + "/etc").c_str(), 0755);
  std::ofstream(root + "/etc/passwd") << "root:x:0:0:root:/root:/bin/sh";  // no newline
  std::ofstream(root + "/etc/group") << "root:x:0:\n";
  ASSERT_TRUE(EnsureAgentUser(root).ok());
  std::stringstream passwd;
  passwd << std::ifstream(root + "/etc/passwd").rdbuf();
  EXPECT_EQ(passwd.str(), "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/home/agent:/bin/sh\n");
  struct stat st;
  ASSERT_EQ(stat((root + "/home/agent/workspace").c_str(), &st), 0);
  if (geteuid() == 0) {
    EXPECT_EQ(st.st_uid, 1000u);
  }
  // A second boot changes nothing.
  ASSERT_TRUE(EnsureAgentUser(root).ok());
  std::stringstream again;
  again << std::ifstream(root + "/etc/passwd").rdbuf();
  EXPECT_EQ(again.str(), passwd.str());
}

}  // namespace
}  // namespace airlock::guest
