#include "vmmd/boot_console.h"

#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

using State = BootConsole::State;

constexpr char kKernelLine[] = "[    0.411739] PCI: Fatal: No config space access function found\r\n";
const std::string kStarted = std::string(kKernelLine) + "AIRLOCK-AGENT-STARTED\r\n";

// As seen: the agent started at 3 s, then both vCPUs halted; QEMU's main
// loop alone used ~8 ms a second. Samples each second up to `until`.
BootActivity HaltedAt3s(int until) {
  BootActivity a(absl::Seconds(20));
  for (int i = 0; i <= until; ++i) {
    absl::Duration cpu = i <= 3 ? i * absl::Milliseconds(900)
                                : absl::Milliseconds(2700) + (i - 3) * absl::Milliseconds(8);
    a.Add(absl::Seconds(i), cpu, kStarted.size());
  }
  return a;
}

TEST(BootConsoleTest, AVmStillForTheWindowBeforeItsAgentIsReadyIsHalted) {
  HangLimits limits;
  BootConsole hung = ReadBootConsole(kStarted, HaltedAt3s(23), &limits);
  EXPECT_EQ(hung.state, State::kHalted);
  EXPECT_NE(hung.why.find("the guest sits halted"), std::string::npos) << hung.why;
  // At 22 s the window reaches back to 2 s, when the guest still ran.
  EXPECT_EQ(ReadBootConsole(kStarted, HaltedAt3s(22), &limits).state, State::kBooting);
}

TEST(BootConsoleTest, AConsoleThatGrowsIsNotHaltedHoweverIdleTheVm) {
  // A KVM guest waiting on the host's disk uses little CPU, but its agent
  // says every 15 s which step is slow.
  HangLimits limits;
  BootActivity a(absl::Seconds(20));
  for (int i = 0; i <= 40; ++i) {
    a.Add(absl::Seconds(i), absl::Milliseconds(10 * i), kStarted.size() + (i / 15) * 50);
  }
  EXPECT_EQ(ReadBootConsole(kStarted, a, &limits).state, State::kBooting);
}

TEST(BootConsoleTest, ABusyVmIsLeftToTheBootDeadlineHoweverSlow) {
  HangLimits limits;
  // A loaded host: the VM gets a tenth of a core, twice the idle limit
  // over the window.
  BootActivity a(absl::Seconds(20));
  for (int i = 0; i <= 600; ++i) a.Add(absl::Seconds(i), i * absl::Milliseconds(100), 80);
  EXPECT_EQ(ReadBootConsole(kKernelLine, a, &limits).state, State::kBooting);
  // Too few samples to span the window say nothing.
  BootActivity one(absl::Seconds(20));
  one.Add(absl::Seconds(40), absl::Seconds(3), 80);
  EXPECT_EQ(ReadBootConsole(kKernelLine, one, &limits).state, State::kBooting);
}

TEST(BootConsoleTest, AVmWhoseCpuTimeWentBackIsNotHalted) {
  // A process read after it was gone and another took its pid.
  HangLimits limits;
  BootActivity a(absl::Seconds(20));
  a.Add(absl::Seconds(0), absl::Seconds(5), 80);
  a.Add(absl::Seconds(25), absl::Seconds(1), 80);
  EXPECT_EQ(ReadBootConsole(kKernelLine, a, &limits).state, State::kBooting);
}

TEST(BootConsoleTest, WithoutLimitsOnlyReadyAndFailedAreRead) {
  EXPECT_EQ(ReadBootConsole(kStarted, HaltedAt3s(100), nullptr).state, State::kBooting);
}

TEST(BootConsoleTest, ReadyAndFailedAreReadWhateverTheActivity) {
  HangLimits limits;
  BootActivity still = HaltedAt3s(100);
  EXPECT_EQ(ReadBootConsole(kStarted + "AIRLOCK-AGENT-READY\r\n", still, &limits).state,
            State::kReady);
  // An agent of an older initramfs says READY without STARTED: ready.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-READY\r\n", still, &limits).state, State::kReady);
  BootConsole failed = ReadBootConsole(
      kStarted + "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument\r\nmore\r\n",
      still, &limits);
  EXPECT_EQ(failed.state, State::kFailed);
  EXPECT_EQ(failed.failure, "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument");
  // A failure line the console has not ended yet is taken as it is.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-FAILED: no disk", still, &limits).failure,
            "AIRLOCK-AGENT-FAILED: no disk");
}

TEST(BootActivityTest, KeepsWhatItsWindowNeedsAndNoMore) {
  BootActivity a(absl::Seconds(60));
  for (int i = 0; i <= 600; ++i) a.Add(absl::Seconds(i), absl::Seconds(i), 0);
  // Busy throughout: never still.
  EXPECT_FALSE(a.StillFor(absl::Seconds(20), absl::Seconds(1)));
  EXPECT_FALSE(a.StillFor(absl::Seconds(60), absl::Seconds(1)));
  // Then still for 61 s: a 60 s window sees it (its oldest sample kept).
  for (int i = 601; i <= 661; ++i) a.Add(absl::Seconds(i), absl::Seconds(600), 0);
  EXPECT_TRUE(a.StillFor(absl::Seconds(20), absl::Seconds(1)));
  EXPECT_TRUE(a.StillFor(absl::Seconds(60), absl::Seconds(1)));
  // A window longer than kept finds no sample old enough: not still.
  EXPECT_FALSE(a.StillFor(absl::Seconds(120), absl::Seconds(1)));
}

TEST(ProcessCpuTimeTest, ReadsThisProcessAndNothingOfAGoneOne) {
  // Burn a little CPU so that this process has some on record.
  volatile uint64_t x = 0;
  absl::Time end = absl::Now() + absl::Milliseconds(50);
  while (absl::Now() < end) ++x;
  std::optional<absl::Duration> mine = ProcessCpuTime(getpid());
  ASSERT_TRUE(mine.has_value());
  EXPECT_GT(*mine, absl::ZeroDuration());
  EXPECT_FALSE(ProcessCpuTime(0).has_value());
}

}  // namespace
}  // namespace airlock::vmmd
