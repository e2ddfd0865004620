#include "vmmd/images.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

TEST(AgentFailureHintTest, AnAgentWithoutItsPortsIsToldToRebuildTheInitramfs) {
  // What the agent of an initramfs older than the serial ports' move to PCI
  // prints on the console.
  std::string hint =
      AgentFailureHint("AIRLOCK-AGENT-FAILED: no virtio-serial port named airlock.agent");
  EXPECT_NE(hint.find("tools/build_images.sh initramfs"), std::string::npos) << hint;
  EXPECT_NE(hint.find("older than this vmmd"), std::string::npos) << hint;
  EXPECT_EQ(AgentFailureHint("AIRLOCK-AGENT-FAILED: no virtio-serial port named airlock.egress"),
            hint);
  EXPECT_EQ(hint.front(), ';') << "appended to the failure line";
}

TEST(AgentFailureHintTest, OtherFailuresSayWhatTheySay) {
  EXPECT_EQ(AgentFailureHint("AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument"),
            "");
  EXPECT_EQ(AgentFailureHint(""), "");
}

}  // namespace
}  // namespace airlock::vmmd
