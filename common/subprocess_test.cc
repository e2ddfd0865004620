#include "common/subprocess.h"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace airlock {
namespace {

TEST(RunCommandTest, CapturesOutputExitCodeAndStdin) {
  auto r = RunCommand({"sh", "-c", "cat; echo err >&2; exit 3"}, {}, "hello");
  EXPECT_EQ(r.exit_code, 3);
  EXPECT_EQ(r.out, "hello");
  EXPECT_EQ(r.err, "err\n");
}

TEST(RunCommandTest, PassesEnvironmentAndReportsMissingProgram) {
  auto r = RunCommand({"sh", "-c", "echo $FOO"}, {{"FOO", "bar"}});
  EXPECT_EQ(r.out, "bar\n");
  auto missing = RunCommand({"/nonexistent/prog"});
  EXPECT_EQ(missing.exit_code, 127);
}

TEST(RunCommandTest, TimesOut) {
  auto r = RunCommand({"sleep", "30"}, {}, "", 1);
  EXPECT_EQ(r.exit_code, -1);
}

TEST(SpawnDetachedTest, ChildOutlivesAndLogs) {
  std::string log = std::string(getenv("TEST_TMPDIR")) + "/spawn.log";
  auto pid = SpawnDetached({"sh", "-c", "echo started; sleep 30"}, log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  EXPECT_TRUE(ProcessAlive(*pid));
  EXPECT_NE(ProcessCmdline(*pid).find("sleep 30"), std::string::npos);
  EXPECT_NE(getsid(*pid), getsid(0)) << "runs in a session of its own";
  EXPECT_FALSE(ProcessesMatching("echo started; sleep 30").empty());
  kill(*pid, SIGKILL);
  for (int i = 0; i < 100 && ProcessAlive(*pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(ProcessAlive(*pid));
}

TEST(SpawnDetachedTest, ExecFailureIsAnError) {
  std::string log = std::string(getenv("TEST_TMPDIR")) + "/fail.log";
  auto pid = SpawnDetached({"/nonexistent/prog"}, log);
  EXPECT_FALSE(pid.ok());
}

}  // namespace
}  // namespace airlock
