#include "common/subprocess.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
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
  // An override replaces what this process has; the rest is inherited.
  setenv("AIRLOCK_SUBPROCESS_TEST", "mine", 1);
  setenv("AIRLOCK_SUBPROCESS_KEPT", "kept", 1);
  auto replaced = RunCommand({"sh", "-c", "env | grep ^AIRLOCK_SUBPROCESS_ | sort"},
                             {{"AIRLOCK_SUBPROCESS_TEST", "theirs"}});
  EXPECT_EQ(replaced.out, "AIRLOCK_SUBPROCESS_KEPT=kept\nAIRLOCK_SUBPROCESS_TEST=theirs\n");
  EXPECT_STREQ(getenv("AIRLOCK_SUBPROCESS_TEST"), "mine") << "the caller's own is untouched";
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
  EXPECT_TRUE(AwaitExit(*pid, std::chrono::seconds(5)));
  EXPECT_FALSE(ProcessAlive(*pid));
}

TEST(SpawnDetachedTest, PassesOneDescriptorWhereAsked) {
  std::string dir = getenv("TEST_TMPDIR");
  std::string log = dir + "/pass.log";
  std::string data = dir + "/passed.txt";
  {
    std::ofstream(data) << "what the parent opened";
  }
  int fd = open(data.c_str(), O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  // The parent's descriptor is close-on-exec: the program has it as fd 4
  // only because it was passed.
  auto pid = SpawnDetached({"sh", "-c", "cat <&4"}, log, fd, 4);
  ASSERT_TRUE(pid.ok()) << pid.status();
  AwaitExit(*pid, std::chrono::seconds(5));
  close(fd);
  std::ifstream in(log);
  std::string got((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "what the parent opened");
}

// A process whose main thread has exited shows as a zombie while its other
// threads run on and hold its files: it is alive until they exit.
TEST(ProcessAliveTest, AZombieLeaderWithALiveThreadIsAlive) {
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    pthread_t t;
    pthread_create(&t, nullptr, [](void*) -> void* {
      sleep(30);
      return nullptr;
    }, nullptr);
    syscall(SYS_exit, 0);  // this thread only, no unwinding through gtest
  }
  std::string stat_path = "/proc/" + std::to_string(pid) + "/stat";
  bool leader_zombie = false;
  for (int i = 0; i < 250 && !leader_zombie; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::string stat;
    if (FILE* f = fopen(stat_path.c_str(), "r")) {
      char buf[512] = {};
      stat.assign(buf, fread(buf, 1, sizeof(buf) - 1, f));
      fclose(f);
    }
    size_t paren = stat.rfind(')');
    leader_zombie = paren != std::string::npos && stat[paren + 2] == 'Z';
  }
  ASSERT_TRUE(leader_zombie);
  EXPECT_TRUE(ProcessAlive(pid));
  EXPECT_FALSE(AwaitExit(pid, std::chrono::milliseconds(200))) << "its thread still runs";
  kill(pid, SIGKILL);
  EXPECT_TRUE(AwaitExit(pid, std::chrono::seconds(5)));
  EXPECT_FALSE(ProcessAlive(pid)) << "every thread exited; not reaped yet";
  waitpid(pid, nullptr, 0);
}

TEST(AwaitExitTest, WaitsForTheExitOrTheTimeout) {
  std::string log = std::string(getenv("TEST_TMPDIR")) + "/await.log";
  auto pid = SpawnDetached({"sleep", "30"}, log);
  ASSERT_TRUE(pid.ok()) << pid.status();
  auto start = std::chrono::steady_clock::now();
  EXPECT_FALSE(AwaitExit(*pid, std::chrono::milliseconds(150)));
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(150));
  EXPECT_TRUE(ProcessAlive(*pid));
  // Killed while being waited for (not a child of this process: SpawnDetached
  // reparents it, so nothing here reaps it).
  std::thread killer([p = *pid] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(p, SIGKILL);
  });
  bool by_pidfd = false;
  EXPECT_TRUE(AwaitExit(*pid, std::chrono::seconds(10), &by_pidfd));
  killer.join();
  EXPECT_FALSE(ProcessAlive(*pid));
  EXPECT_TRUE(by_pidfd) << "this kernel (Linux 5.3 and later) has pidfds: the exit wakes the wait";
  // Nothing to wait for.
  EXPECT_TRUE(AwaitExit(*pid, std::chrono::seconds(10)));
  EXPECT_TRUE(AwaitExit(0, std::chrono::seconds(10)));
  // A wait longer than poll's int of milliseconds still waits.
  auto again = SpawnDetached({"sleep", "30"}, log);
  ASSERT_TRUE(again.ok()) << again.status();
  std::thread killer2([p = *again] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    kill(p, SIGKILL);
  });
  EXPECT_TRUE(AwaitExit(*again, std::chrono::hours(24 * 30)));
  killer2.join();
}

TEST(SpawnDetachedTest, ExecFailureIsAnError) {
  std::string log = std::string(getenv("TEST_TMPDIR")) + "/fail.log";
  auto pid = SpawnDetached({"/nonexistent/prog"}, log);
  EXPECT_FALSE(pid.ok());
}

}  // namespace
}  // namespace airlock
