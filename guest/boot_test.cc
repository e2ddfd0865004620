#include "guest/boot.h"

#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

TEST(BootParamsTest, ReadsAirlockWordsOnly) {
  BootParams p = ParseBootParams(
      "console=ttyS0 quiet airlock.hostname=dev-1 airlock.root=/dev/vdb panic=-1\n");
  EXPECT_FALSE(p.probe);
  EXPECT_EQ(p.hostname, "dev-1");
  EXPECT_EQ(p.root_device, "/dev/vdb");
  EXPECT_EQ(p.port_name, "airlock.agent");
  EXPECT_FALSE(p.docker);
}

TEST(BootParamsTest, Docker) {
  EXPECT_TRUE(ParseBootParams("quiet airlock.docker=1").docker);
  EXPECT_FALSE(ParseBootParams("airlock.docker=0").docker);
  EXPECT_FALSE(ParseBootParams("docker=1").docker);
}

TEST(BootParamsTest, AslrIsOnUnlessTurnedOff) {
  EXPECT_TRUE(ParseBootParams("quiet").aslr);
  EXPECT_TRUE(ParseBootParams("airlock.aslr=1").aslr);
  EXPECT_FALSE(ParseBootParams("quiet airlock.aslr=0 panic=-1").aslr);
  EXPECT_TRUE(ParseBootParams("aslr=0").aslr);
}

TEST(TurnOffAslrTest, WritesZeroOrSaysWhy) {
  std::string dir = ::testing::TempDir();
  std::string sysctl = dir + "/randomize_va_space";
  { std::ofstream(sysctl) << "2\n"; }
  ASSERT_TRUE(TurnOffAslr(sysctl).ok());
  std::stringstream got;
  got << std::ifstream(sysctl).rdbuf();
  EXPECT_EQ(got.str(), "0");
  absl::Status missing = TurnOffAslr(dir + "/no-such-dir/randomize_va_space");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("No such file or directory"), std::string::npos)
      << missing.message();
}

TEST(BoundPerCpuPageListsTest, WritesTheFractionOrSaysWhy) {
  std::string dir = ::testing::TempDir();
  std::string sysctl = dir + "/percpu_pagelist_high_fraction";
  { std::ofstream(sysctl) << "0\n"; }
  ASSERT_TRUE(BoundPerCpuPageLists(sysctl).ok());
  std::stringstream got;
  got << std::ifstream(sysctl).rdbuf();
  EXPECT_EQ(got.str(), "1000");
  absl::Status missing = BoundPerCpuPageLists(dir + "/no-such-dir/fraction");
  EXPECT_FALSE(missing.ok());
  EXPECT_NE(missing.message().find("cannot bound the per-CPU page lists"), std::string::npos)
      << missing.message();
  EXPECT_NE(missing.message().find("No such file or directory"), std::string::npos)
      << missing.message();
}

TEST(ReportSmallerFreeBlocksTest, WritesTheOrder) {
  std::string param = ::testing::TempDir() + "/page_reporting_order";
  { std::ofstream(param) << "9\n"; }
  ASSERT_TRUE(ReportSmallerFreeBlocks(param).ok());
  std::stringstream got;
  got << std::ifstream(param).rdbuf();
  EXPECT_EQ(got.str(), "7");
}

TEST(BootParamsTest, ProbeAndDefaults) {
  BootParams p = ParseBootParams("airlock.probe=1 airlock.hostname=");
  EXPECT_TRUE(p.probe);
  EXPECT_EQ(p.hostname, "sandbox");
  EXPECT_EQ(p.root_device, "/dev/vda");
}

}  // namespace
}  // namespace airlock::guest
