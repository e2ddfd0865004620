#include "vmmd/boot_console.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

using State = BootConsole::State;

constexpr char kKernelLine[] = "[    0.411739] PCI: Fatal: No config space access function found\r\n";

TEST(BootConsoleTest, AKernelThatNeverStartsTheAgentIsSilentOnlyAfterTheLimit) {
  EXPECT_EQ(ReadBootConsole(kKernelLine, absl::Seconds(29), absl::Seconds(30)).state,
            State::kBooting);
  EXPECT_EQ(ReadBootConsole(kKernelLine, absl::Seconds(30), absl::Seconds(30)).state,
            State::kKernelSilent);
  EXPECT_EQ(ReadBootConsole("", absl::Seconds(31), absl::Seconds(30)).state,
            State::kKernelSilent);
}

TEST(BootConsoleTest, AStartedAgentIsLeftToTheBootDeadlineHoweverSlow) {
  std::string console = std::string(kKernelLine) + "AIRLOCK-AGENT-STARTED\r\n" +
                        "airlock-init: still loading modules after 15 s\r\n";
  EXPECT_EQ(ReadBootConsole(console, absl::Seconds(600), absl::Seconds(30)).state,
            State::kBooting);
}

TEST(BootConsoleTest, ReadyAndFailedAreReadWhateverTheTime) {
  std::string started = std::string(kKernelLine) + "AIRLOCK-AGENT-STARTED\r\n";
  EXPECT_EQ(ReadBootConsole(started + "AIRLOCK-AGENT-READY\r\n", absl::Seconds(1),
                            absl::Seconds(30))
                .state,
            State::kReady);
  // An agent of an older initramfs says READY without STARTED: ready.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-READY\r\n", absl::Seconds(99), absl::Seconds(30)).state,
            State::kReady);
  BootConsole failed = ReadBootConsole(
      started + "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument\r\nmore\r\n",
      absl::Seconds(2), absl::Seconds(30));
  EXPECT_EQ(failed.state, State::kFailed);
  EXPECT_EQ(failed.failure, "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument");
  // A failure line the console has not ended yet is taken as it is.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-FAILED: no disk", absl::Seconds(2), absl::Seconds(30))
                .failure,
            "AIRLOCK-AGENT-FAILED: no disk");
}

}  // namespace
}  // namespace airlock::vmmd
