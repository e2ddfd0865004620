#include "gitd/host_repo.h"

#include <stdlib.h>

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace airlock::gitd {
namespace {

std::string Tmp(const std::string& leaf) { return std::string(getenv("TEST_TMPDIR")) + "/" + leaf; }

void Sh(const std::string& cmd) {
  ASSERT_EQ(system(("set -e; export GIT_CONFIG_NOSYSTEM=1 HOME=" + Tmp("") + "; " + cmd).c_str()), 0)
      << cmd;
}

TEST(IsLocalUrlTest, Forms) {
  EXPECT_TRUE(IsLocalUrl("/srv/repo.git"));
  EXPECT_TRUE(IsLocalUrl("../other"));
  EXPECT_TRUE(IsLocalUrl("file:///srv/repo"));
  EXPECT_FALSE(IsLocalUrl("https://github.com/a/b.git"));
  EXPECT_FALSE(IsLocalUrl("git@github.com:a/b.git"));
  EXPECT_FALSE(IsLocalUrl("ssh://git@host/x"));
}

TEST(InspectRepoTest, RootBranchRemotesAndShallow) {
  std::string r = Tmp("repo");
  Sh("git init -q -b main " + r + " && cd " + r +
     " && git -c user.name=t -c user.email=t@t commit -q --allow-empty -m one"
     " && git branch feature && git remote add origin https://example.com/x.git"
     " && git remote add local /srv/elsewhere && mkdir -p sub/dir");
  auto f = InspectRepo(r + "/sub/dir", "");
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->root, r);
  EXPECT_EQ(f->branch, "main");
  EXPECT_FALSE(f->shallow);
  ASSERT_EQ(f->remotes.size(), 1u) << "local-path remotes are left out";
  EXPECT_EQ(f->remotes["origin"], "https://example.com/x.git");
  EXPECT_EQ(InspectRepo(r, "feature")->branch, "feature");
  EXPECT_EQ(InspectRepo(r, "nope").status().code(), absl::StatusCode::kNotFound);

  std::string s = Tmp("shallow");
  Sh("git -c protocol.file.allow=always clone -q --depth 1 file://" + r + " " + s);
  EXPECT_TRUE(InspectRepo(s, "")->shallow);
}

TEST(InspectRepoTest, NotARepoAndNoCommit) {
  std::string plain = Tmp("plain");
  Sh("mkdir -p " + plain);
  EXPECT_EQ(InspectRepo(plain, "").status().code(), absl::StatusCode::kNotFound);
  std::string empty = Tmp("empty");
  Sh("git init -q " + empty);
  EXPECT_EQ(InspectRepo(empty, "").status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RemoteTest, SetRewriteAndDelete) {
  std::string r = Tmp("remotes");
  Sh("git init -q " + r);
  ASSERT_TRUE(SetRemote(r, "sandbox-a", "git://127.0.0.1:1/workspace").ok());
  ASSERT_TRUE(SetRemote(r, "sandbox-a", "git://127.0.0.1:2/workspace").ok());
  std::ifstream f(r + "/.git/config");
  std::stringstream b;
  b << f.rdbuf();
  EXPECT_NE(b.str().find("git://127.0.0.1:2/workspace"), std::string::npos) << b.str();
  EXPECT_EQ(b.str().find("127.0.0.1:1/"), std::string::npos);
  ASSERT_TRUE(DeleteRemote(r, "sandbox-a").ok());
  ASSERT_TRUE(DeleteRemote(r, "sandbox-a").ok());
  std::ifstream g(r + "/.git/config");
  std::stringstream c;
  c << g.rdbuf();
  EXPECT_EQ(c.str().find("sandbox-a"), std::string::npos) << c.str();
  Sh("test -z \"$(git -C " + r + " remote)\"");
}

}  // namespace
}  // namespace airlock::gitd
