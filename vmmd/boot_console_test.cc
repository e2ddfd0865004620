#include "vmmd/boot_console.h"

#include <unistd.h>

#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

using State = BootConsole::State;

constexpr char kKernelLine[] = "[    0.411739] PCI: Fatal: No config space access function found\r\n";
const std::string kStarted = std::string(kKernelLine) + "AIRLOCK-AGENT-STARTED\r\n";

// A VM that used `per_second` of CPU each second for `seconds` seconds.
CpuHistory Busy(int seconds, absl::Duration per_second, absl::Duration from = absl::ZeroDuration()) {
  CpuHistory h;
  for (int i = 0; i <= seconds; ++i) h.Add(absl::Seconds(i), from + i * per_second);
  return h;
}

TEST(BootConsoleTest, AKernelThatNeverStartsTheAgentIsSilentOnlyAfterTheLimit) {
  HangLimits limits;
  CpuHistory busy = Busy(31, absl::Milliseconds(900));
  EXPECT_EQ(ReadBootConsole(kKernelLine, absl::Seconds(29), busy, &limits).state, State::kBooting);
  BootConsole silent = ReadBootConsole(kKernelLine, absl::Seconds(30), busy, &limits);
  EXPECT_EQ(silent.state, State::kKernelSilent);
  EXPECT_EQ(silent.why, "the guest kernel did not start the agent within 30s");
  EXPECT_EQ(ReadBootConsole("", absl::Seconds(31), busy, &limits).state, State::kKernelSilent);
}

TEST(BootConsoleTest, AVmIdleForTheWindowBeforeItsAgentIsReadyIsHalted) {
  HangLimits limits;
  // As seen: the agent started, then both vCPUs halted; QEMU's main loop
  // alone used ~8 ms a second.
  CpuHistory halted;
  for (int i = 0; i <= 3; ++i) halted.Add(absl::Seconds(i), i * absl::Milliseconds(900));
  for (int i = 4; i <= 24; ++i) {
    halted.Add(absl::Seconds(i), absl::Milliseconds(2700) + (i - 3) * absl::Milliseconds(8));
  }
  BootConsole hung = ReadBootConsole(kStarted, absl::Seconds(24), halted, &limits);
  EXPECT_EQ(hung.state, State::kHalted);
  EXPECT_NE(hung.why.find("halted"), std::string::npos) << hung.why;
  // One second short of the window: not yet.
  CpuHistory shorter;
  for (int i = 0; i <= 3; ++i) shorter.Add(absl::Seconds(i), i * absl::Milliseconds(900));
  for (int i = 4; i <= 22; ++i) {
    shorter.Add(absl::Seconds(i), absl::Milliseconds(2700) + (i - 3) * absl::Milliseconds(8));
  }
  EXPECT_EQ(ReadBootConsole(kStarted, absl::Seconds(22), shorter, &limits).state,
            State::kBooting);
}

TEST(BootConsoleTest, ABusyAgentIsLeftToTheBootDeadlineHoweverSlow) {
  HangLimits limits;
  // A loaded host: the VM gets a tenth of a core, still ten times the
  // idle limit over the window.
  std::string console = kStarted + "airlock-init: still loading modules after 15 s\r\n";
  EXPECT_EQ(
      ReadBootConsole(console, absl::Seconds(600), Busy(600, absl::Milliseconds(100)), &limits)
          .state,
      State::kBooting);
  // Too few samples to span the window say nothing.
  CpuHistory one;
  one.Add(absl::Seconds(40), absl::Seconds(3));
  EXPECT_EQ(ReadBootConsole(kStarted, absl::Seconds(40), one, &limits).state, State::kBooting);
}

TEST(BootConsoleTest, WithoutLimitsOnlyReadyAndFailedAreRead) {
  CpuHistory idle = Busy(100, absl::ZeroDuration());
  EXPECT_EQ(ReadBootConsole(kKernelLine, absl::Seconds(100), idle, nullptr).state,
            State::kBooting);
}

TEST(BootConsoleTest, ReadyAndFailedAreReadWhateverTheTime) {
  HangLimits limits;
  CpuHistory idle = Busy(100, absl::ZeroDuration());
  EXPECT_EQ(
      ReadBootConsole(kStarted + "AIRLOCK-AGENT-READY\r\n", absl::Seconds(100), idle, &limits)
          .state,
      State::kReady);
  // An agent of an older initramfs says READY without STARTED: ready.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-READY\r\n", absl::Seconds(99), idle, &limits).state,
            State::kReady);
  BootConsole failed = ReadBootConsole(
      kStarted + "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument\r\nmore\r\n",
      absl::Seconds(2), idle, &limits);
  EXPECT_EQ(failed.state, State::kFailed);
  EXPECT_EQ(failed.failure, "AIRLOCK-AGENT-FAILED: mount /dev/vda on /sysroot: Invalid argument");
  // A failure line the console has not ended yet is taken as it is.
  EXPECT_EQ(ReadBootConsole("AIRLOCK-AGENT-FAILED: no disk", absl::Seconds(2), idle, &limits)
                .failure,
            "AIRLOCK-AGENT-FAILED: no disk");
}

TEST(CpuHistoryTest, KeepsWhatTheLongestWindowNeeds) {
  CpuHistory h;
  for (int i = 0; i <= 600; ++i) h.Add(absl::Seconds(i), absl::Seconds(i));
  // Busy throughout: never idle, over any window up to a minute.
  EXPECT_FALSE(h.IdleFor(absl::Seconds(20), absl::Seconds(1)));
  EXPECT_FALSE(h.IdleFor(absl::Seconds(60), absl::Seconds(1)));
  // Then idle for 30 s.
  for (int i = 601; i <= 630; ++i) h.Add(absl::Seconds(i), absl::Seconds(600));
  EXPECT_TRUE(h.IdleFor(absl::Seconds(20), absl::Seconds(1)));
  EXPECT_FALSE(h.IdleFor(absl::Seconds(40), absl::Seconds(1)));
}

TEST(ProcessCpuTimeTest, ReadsThisProcessAndNothingOfAGoneOne) {
  // Burn a little CPU so that this process has some on record.
  volatile uint64_t x = 0;
  absl::Time end = absl::Now() + absl::Milliseconds(50);
  while (absl::Now() < end) ++x;
  EXPECT_GT(ProcessCpuTime(getpid()), absl::ZeroDuration());
  EXPECT_EQ(ProcessCpuTime(0), absl::ZeroDuration());
}

}  // namespace
}  // namespace airlock::vmmd
