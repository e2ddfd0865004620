#include "tests/proc_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "gtest/gtest.h"

namespace airlock::testing {
namespace {

TEST(ProcProbeTest, UsageCountsDescriptorsThreadsAndMemory) {
  ProcUsage before = SampleUsage(getpid());
  ASSERT_GT(before.fds, 0);
  ASSERT_GT(before.threads, 0);
  ASSERT_GT(before.rss_kib, 0);
  int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::thread t([&] {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
  });
  ProcUsage during = SampleUsage(getpid());
  {
    std::lock_guard<std::mutex> lock(mu);
    done = true;
  }
  cv.notify_all();
  t.join();
  close(fd);
  EXPECT_EQ(during.fds, before.fds + 1);
  EXPECT_EQ(during.threads, before.threads + 1);
  EXPECT_EQ(SampleUsage(getpid()).fds, before.fds);
  EXPECT_EQ(SampleUsage(1 << 30).fds, -1) << "no such process";
}

TEST(ProcProbeTest, ListeningPortsAreOnlyThisProcesssListeners) {
  int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(getsockname(s, reinterpret_cast<sockaddr*>(&a), &len), 0);
  int port = ntohs(a.sin_port);
  EXPECT_EQ(ListeningTcpPorts(getpid()).count(port), 0u) << "bound, not listening yet";
  ASSERT_EQ(listen(s, 1), 0);
  EXPECT_EQ(ListeningTcpPorts(getpid()).count(port), 1u);
  EXPECT_EQ(ListeningTcpPorts(1).count(port), 0u) << "init does not hold it";
  close(s);
  EXPECT_EQ(ListeningTcpPorts(getpid()).count(port), 0u);
}

TEST(ProcProbeTest, ProcessesOfFindsMatchesAndTheirChildren) {
  const std::string marker = absl::StrCat("proc-probe-marker-", getpid());
  // sh (whose command line has the marker) runs a sleep (whose does not).
  auto sh = SpawnDetached({"sh", "-c", "sleep 30; : " + marker}, "/dev/null");
  ASSERT_TRUE(sh.ok()) << sh.status();
  std::vector<ProcessInfo> found;
  for (int i = 0; i < 100 && found.size() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    found = ProcessesOf(marker);
  }
  ASSERT_EQ(found.size(), 2u);
  std::set<std::string> programs;
  for (const auto& p : found) programs.insert(p.Program());
  EXPECT_EQ(programs, (std::set<std::string>{"sh", "sleep"}));
  for (const auto& p : found) kill(p.pid, SIGKILL);
  for (int i = 0; i < 100 && !ProcessesOf(marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(ProcessesOf(marker).empty()) << "killed processes are not listed";
}

TEST(ProcProbeTest, DaemonPidNeedsTheDaemonsBinaryAndRuntimeDir) {
  const std::string dir = std::string(getenv("TEST_TMPDIR")) + "/run";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  // This test's own pid: its binary is not called "vmmd".
  std::ofstream(dir + "/vmmd.pid") << getpid() << "\n";
  EXPECT_EQ(DaemonPid(dir, "vmmd"), 0);
  std::ofstream(dir + "/vmmd.pid") << "garbage\n";
  EXPECT_EQ(DaemonPid(dir, "vmmd"), 0);
  EXPECT_EQ(DaemonPid(dir, "absent"), 0);
  // A program called vmmd with this runtime dir is the daemon.
  ASSERT_EQ(system(("cp /bin/sh " + dir + "/vmmd").c_str()), 0);
  auto daemon = SpawnDetached({dir + "/vmmd", "-c", "sleep 30; :", "vmmd", "--runtime-dir=" + dir},
                              "/dev/null");
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  std::ofstream(dir + "/vmmd.pid") << *daemon << "\n";
  EXPECT_EQ(DaemonPid(dir, "vmmd"), *daemon);
  // The same pid in another runtime dir's pid file is not that dir's daemon.
  ASSERT_EQ(system(("mkdir -p " + dir + "/other").c_str()), 0);
  std::ofstream(dir + "/other/vmmd.pid") << *daemon << "\n";
  EXPECT_EQ(DaemonPid(dir + "/other", "vmmd"), 0);
  for (const auto& p : ProcessesOf("--runtime-dir=" + dir)) kill(p.pid, SIGKILL);
}

}  // namespace
}  // namespace airlock::testing
