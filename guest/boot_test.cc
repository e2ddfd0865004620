#include "guest/boot.h"

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

TEST(BootParamsTest, ProbeAndDefaults) {
  BootParams p = ParseBootParams("airlock.probe=1 airlock.hostname=");
  EXPECT_TRUE(p.probe);
  EXPECT_EQ(p.hostname, "sandbox");
  EXPECT_EQ(p.root_device, "/dev/vda");
}

}  // namespace
}  // namespace airlock::guest
