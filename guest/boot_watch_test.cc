#include "guest/boot_watch.h"

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

TEST(SlowBootLineTest, NamesEachRunningStepWithItsTimeAndTheKernelsTail) {
  std::string line = SlowBootLine({{"mounting the root disk", absl::Seconds(31)},
                                   {"loading the egress ruleset", absl::Seconds(4)}},
                                  33.7, "virtio_blk virtio1: timeout");
  EXPECT_EQ(line,
            "airlock-init: boot slow, 33 s since the kernel started; still running: "
            "mounting the root disk (31 s), loading the egress ruleset (4 s); "
            "kernel: virtio_blk virtio1: timeout");
}

TEST(SlowBootLineTest, SaysWhenNoStepRuns) {
  EXPECT_EQ(SlowBootLine({}, 20, ""),
            "airlock-init: boot slow, 20 s since the kernel started; still running: "
            "nothing (between steps)");
}

// Lines collects what a watch writes.
class Lines {
 public:
  BootWatch::Sink Sink() {
    return [this](absl::string_view line) {
      std::lock_guard<std::mutex> lock(mu_);
      lines_.emplace_back(line);
    };
  }
  std::vector<std::string> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    return lines_;
  }
  // WaitFor waits up to 10 s for `n` lines.
  bool WaitFor(size_t n) {
    for (int i = 0; i < 1000; ++i) {
      if (Get().size() >= n) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  }

 private:
  std::mutex mu_;
  std::vector<std::string> lines_;
};

TEST(BootWatchTest, ASlowStepIsNamedAndAFinishedOneIsNot) {
  Lines lines;
  BootWatch watch(absl::Milliseconds(50), absl::Milliseconds(50), lines.Sink(),
                  [] { return "last kernel line"; });
  BootWatch::Step fast = watch.Begin("loading modules");
  BootWatch::Step slow = watch.Begin("mounting the root disk");
  fast.Finish();
  ASSERT_TRUE(lines.WaitFor(2));
  for (const std::string& line : lines.Get()) {
    EXPECT_TRUE(absl::StrContains(line, "still running: mounting the root disk (")) << line;
    EXPECT_FALSE(absl::StrContains(line, "loading modules")) << line;
    EXPECT_TRUE(absl::StrContains(line, "; kernel: last kernel line")) << line;
  }
}

TEST(BootWatchTest, NothingIsWrittenBeforeTheFirstReportOrAfterDone) {
  Lines lines;
  BootWatch watch(absl::Seconds(30), absl::Milliseconds(10), lines.Sink(), [] { return ""; });
  BootWatch::Step step = watch.Begin("loading modules");
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_TRUE(lines.Get().empty());
  watch.Done();
  EXPECT_TRUE(lines.Get().empty());
}

TEST(BootWatchTest, DoneEndsAWatchThatReports) {
  Lines lines;
  BootWatch watch(absl::Milliseconds(10), absl::Milliseconds(10), lines.Sink(),
                  [] { return ""; });
  BootWatch::Step step = watch.Begin("switching root");
  ASSERT_TRUE(lines.WaitFor(1));
  watch.Done();
  size_t after = lines.Get().size();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(lines.Get().size(), after);
}

TEST(BootWatchTest, AStepMovedOutEndsOnce) {
  Lines lines;
  BootWatch watch(absl::Milliseconds(20), absl::Milliseconds(20), lines.Sink(),
                  [] { return ""; });
  {
    BootWatch::Step a = watch.Begin("first");
    BootWatch::Step b = std::move(a);
  }  // both destroyed; "first" ends once, with b
  BootWatch::Step c = watch.Begin("second");
  ASSERT_TRUE(lines.WaitFor(1));
  EXPECT_TRUE(absl::StrContains(lines.Get()[0], "still running: second (")) << lines.Get()[0];
}

}  // namespace
}  // namespace airlock::guest
