#include "vmmd/cgroup.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

// Fake hierarchies are plain directories: the files vmmd writes are checked
// as it left them.
class CgroupTest : public ::testing::Test {
 protected:
  std::string Dir(const std::string& rel) {
    std::string d = dir_.path() + rel;
    EXPECT_EQ(RunCommand({"mkdir", "-p", d}).exit_code, 0);
    return d;
  }
  airlock::testing::ShortTempDir dir_;
};

TEST_F(CgroupTest, HybridHostUsesTheV1HierarchiesUnderVmmdsOwnCgroup) {
  std::string mem = Dir("/memory"), cpu = Dir("/cpu,cpuacct"), pids = Dir("/pids"),
              unified = Dir("/unified");
  std::ofstream(unified + "/cgroup.controllers") << "hugetlb\n";
  std::string mountinfo = absl::StrCat(
      "30 25 0:26 / ", unified, " rw,nosuid - cgroup2 cgroup2 rw\n",
      "31 25 0:27 / ", cpu, " rw,nosuid - cgroup cgroup rw,cpu,cpuacct\n",
      "32 25 0:28 / ", mem, " rw,nosuid - cgroup cgroup rw,memory\n",
      "33 25 0:29 / ", pids, " rw,nosuid - cgroup cgroup rw,pids\n");
  std::string self = "9:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n";
  auto cg = Cgroups::Detect(mountinfo, self, "i1");
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_FALSE(cg->v2());
  auto procs = cg->Create("box1", {1536ull << 20, 2, 512});
  ASSERT_TRUE(procs.ok()) << procs.status();
  std::string mdir = mem + "/process_api/abc/airlock-i1/box1";
  EXPECT_EQ(ReadFileToString(mdir + "/memory.limit_in_bytes"), absl::StrCat(1536ull << 20));
  EXPECT_EQ(ReadFileToString(cpu + "/airlock-i1/box1/cpu.cfs_quota_us"), "200000");
  EXPECT_EQ(ReadFileToString(cpu + "/airlock-i1/box1/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(ReadFileToString(pids + "/airlock-i1/box1/pids.max"), "512");
  EXPECT_EQ(procs->size(), 3u);
  std::ofstream(mdir + "/memory.usage_in_bytes") << "4096\n";
  std::ofstream(mdir + "/memory.oom_control") << "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n";
  auto usage = cg->Usage("box1");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->memory_bytes, 4096u);
  EXPECT_EQ(usage->oom_kills, 2u);
  EXPECT_EQ(usage->pids_limit, 512u);
  EXPECT_EQ(cg->Usage("other").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(CgroupTest, UnifiedHostDelegatesBelowVmmdsUnit) {
  std::string root = Dir("/cg");
  std::ofstream(root + "/cgroup.controllers") << "cpuset cpu io memory pids\n";
  Dir("/cg/system.slice/airlock-vmmd.service");
  std::string mountinfo = absl::StrCat("30 25 0:26 / ", root, " rw - cgroup2 cgroup2 rw\n");
  auto cg = Cgroups::Detect(mountinfo, "0::/system.slice/airlock-vmmd.service\n", "i2");
  ASSERT_TRUE(cg.ok()) << cg.status();
  EXPECT_TRUE(cg->v2());
  ASSERT_TRUE(cg->Create("box1", {1ull << 30, 1, 256}).ok());
  std::string unit = root + "/system.slice/airlock-vmmd.service";
  EXPECT_EQ(ReadFileToString(unit + "/vmmd/cgroup.procs"), absl::StrCat(getpid()))
      << "vmmd moves itself into a leaf";
  EXPECT_EQ(ReadFileToString(unit + "/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(ReadFileToString(unit + "/airlock-i2/cgroup.subtree_control"), "+memory +cpu +pids");
  EXPECT_EQ(ReadFileToString(unit + "/airlock-i2/box1/memory.max"), absl::StrCat(1ull << 30));
  EXPECT_EQ(ReadFileToString(unit + "/airlock-i2/box1/cpu.max"), "100000 100000");
  EXPECT_EQ(ReadFileToString(unit + "/airlock-i2/box1/pids.max"), "256");
  // Restarted in the same unit, vmmd finds itself in its leaf: same place.
  auto again = Cgroups::Detect(mountinfo, "0::/system.slice/airlock-vmmd.service/vmmd\n", "i2");
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Dirs("box1"), cg->Dirs("box1"));
}

TEST_F(CgroupTest, NoMemoryControllerIsAClearError) {
  std::string unified = Dir("/unified");
  std::ofstream(unified + "/cgroup.controllers") << "pids\n";
  auto cg = Cgroups::Detect(absl::StrCat("30 25 0:26 / ", unified, " rw - cgroup2 cgroup2 rw\n"),
                            "0::/\n", "i3");
  ASSERT_FALSE(cg.ok());
  EXPECT_NE(cg.status().message().find("no cgroup memory controller"), std::string::npos);
}

TEST_F(CgroupTest, ThisHostsRealHierarchyTakesALimitAndIsRemoved) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto cg = Cgroups::ForThisProcess(absl::StrCat("test", getpid()));
  if (!cg.ok()) GTEST_SKIP() << cg.status();
  if (cg->v2()) GTEST_SKIP() << "not moving the test runner into a v2 leaf";
  auto procs = cg->Create("probe", {256ull << 20, 1, 64});
  ASSERT_TRUE(procs.ok()) << procs.status();
  auto usage = cg->Usage("probe");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->memory_limit_bytes, 256ull << 20);
  EXPECT_EQ(usage->pids_limit, 64u);
  // Renamed with its limits (a warm VM's cgroup becoming a sandbox's).
  ASSERT_TRUE(cg->Create("other", {128ull << 20, 1, 32}).ok());
  ASSERT_TRUE(cg->Rename("probe", "other").ok()) << "an empty cgroup of the name is replaced";
  for (const auto& d : cg->Dirs("probe")) EXPECT_NE(access(d.c_str(), F_OK), 0) << d;
  usage = cg->Usage("other");
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->memory_limit_bytes, 256ull << 20);
  EXPECT_FALSE(cg->Rename("probe", "third").ok()) << "nothing to rename";
  ASSERT_TRUE(cg->Remove("other").ok());
  for (const auto& d : cg->Dirs("other")) EXPECT_NE(access(d.c_str(), F_OK), 0) << d;
  EXPECT_TRUE(cg->Remove("probe").ok()) << "removing twice is fine";
  for (const auto& d : cg->Dirs("")) rmdir(d.c_str());
}

}  // namespace
}  // namespace airlock::vmmd
