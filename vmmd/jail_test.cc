#include "vmmd/jail.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <vector>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

constexpr uid_t kJailUid = 1879113727;  // a pool id: no user of the host

// RunJailed launches `script` under /usr/bin/sh in `spec` and returns what
// it printed once it exits.
std::string RunJailed(const JailSpec& spec, const std::string& script, const std::string& log) {
  auto pid = LaunchJailed({"/usr/bin/sh", "-c", script}, spec, log);
  EXPECT_TRUE(pid.ok()) << pid.status();
  if (!pid.ok()) return "";
  EXPECT_TRUE(AwaitExit(*pid, std::chrono::seconds(5))) << "the jailed shell did not finish";
  return ReadFileToString(log);
}

std::string StatusLine(const std::string& status, const std::string& key) {
  size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  size_t start = status.find_first_not_of(" \t", at + key.size() + 2);
  return status.substr(start, status.find('\n', start) - start);
}

class JailTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() + "/root";
    ASSERT_EQ(mkdir(root_.c_str(), 0755), 0);
    ro_ = dir_.path() + "/ro.txt";
    std::ofstream(ro_) << "read only\n";
    rw_ = dir_.path() + "/rw";
    ASSERT_EQ(mkdir(rw_.c_str(), 0700), 0);
    ASSERT_EQ(chown(rw_.c_str(), kJailUid, kJailUid), 0);
    std::ofstream(dir_.path() + "/not-bound.txt") << "outside\n";
  }
  JailSpec Spec() const {
    JailSpec spec;
    spec.root = root_;
    spec.hostname = "airlock-jailtest";
    spec.uid = kJailUid;
    spec.gid = kJailUid;
    spec.mounts = SystemMounts();
    spec.mounts.push_back({ro_, true});
    spec.mounts.push_back({rw_, false});
    spec.devices = {{"/dev/null", false}};
    return spec;
  }

  airlock::testing::ShortTempDir dir_;
  std::string root_, ro_, rw_;
};

TEST_F(JailTest, PlanBindsEachPathAtItsOwnPlaceAndRemountsReadOnly) {
  std::vector<JailStep> plan = BuildJailPlan(Spec(), false);
  std::vector<std::string> described;
  for (const auto& s : plan) described.push_back(s.Describe());
  auto has = [&](const std::string& d) {
    return std::find(described.begin(), described.end(), d) != described.end();
  };
  EXPECT_TRUE(has(absl::StrCat("mount --bind ", ro_, " on ", root_, ro_)));
  EXPECT_TRUE(has(absl::StrCat("remount ", root_, ro_, " read-only")));
  EXPECT_TRUE(has(absl::StrCat("mount --bind ", rw_, " on ", root_, rw_)));
  EXPECT_FALSE(has(absl::StrCat("remount ", root_, rw_, " read-only")));
  EXPECT_TRUE(has(absl::StrCat("mknod ", root_, "/dev/null (as /dev/null)")));
  EXPECT_TRUE(has("remount / read-only"));
  EXPECT_EQ(described.back(), "sethostname airlock-jailtest");
  // An ordinary user binds the host's nodes instead.
  std::vector<JailStep> user = BuildJailPlan(Spec(), true);
  bool bound = false;
  for (const auto& s : user) {
    bound = bound || s.Describe() == absl::StrCat("mount --bind /dev/null on ", root_, "/dev/null");
  }
  EXPECT_TRUE(bound);
}

TEST_F(JailTest, ProgramRunsUnprivilegedInItsOwnNamespacesAndSeesOnlyItsFiles) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  std::string out = RunJailed(
      Spec(),
      absl::StrCat("echo pid=$$; echo host=$(cat /proc/sys/kernel/hostname); ls -a /; "
                   "cat /proc/self/status; cat ", ro_, "; echo new > ", rw_, "/made.txt; "
                   "echo x > ", ro_, " 2>/dev/null || echo ro-refused; "
                   "touch /new 2>/dev/null || echo root-refused; "
                   "cat ", dir_.path(), "/not-bound.txt 2>/dev/null || echo not-bound-absent; "
                   "ls /home /root /etc/shadow 2>/dev/null || echo host-absent; "
                   "echo procs=$(ls /proc | grep -c '^[0-9]'); echo cg=$(cat /proc/self/cgroup | head -1)"),
      dir_.path() + "/out.log");
  EXPECT_NE(out.find("pid=1\n"), std::string::npos) << out;
  EXPECT_NE(out.find("host=airlock-jailtest\n"), std::string::npos) << out;
  EXPECT_EQ(StatusLine(out, "Uid"), absl::StrCat(kJailUid, "\t", kJailUid, "\t", kJailUid, "\t", kJailUid));
  EXPECT_EQ(StatusLine(out, "CapEff"), "0000000000000000") << out;
  EXPECT_EQ(StatusLine(out, "CapPrm"), "0000000000000000") << out;
  EXPECT_EQ(StatusLine(out, "CapBnd"), "0000000000000000") << out;
  EXPECT_EQ(StatusLine(out, "NoNewPrivs"), "1") << out;
  EXPECT_EQ(StatusLine(out, "Groups"), "") << out;
  EXPECT_NE(out.find("read only\n"), std::string::npos) << out;
  EXPECT_EQ(ReadFileToString(rw_ + "/made.txt"), "new\n");
  EXPECT_EQ(ReadFileToString(ro_), "read only\n");
  EXPECT_NE(out.find("ro-refused"), std::string::npos) << out;
  EXPECT_NE(out.find("root-refused"), std::string::npos) << out;
  EXPECT_NE(out.find("not-bound-absent"), std::string::npos) << out;
  EXPECT_NE(out.find("host-absent"), std::string::npos) << out;
  // Its /proc holds its own processes only (the shell and ls, grep).
  size_t procs_at = out.find("procs=");
  ASSERT_NE(procs_at, std::string::npos) << out;
  int procs = std::atoi(out.c_str() + procs_at + 6);
  EXPECT_GE(procs, 1);
  EXPECT_LE(procs, 4) << "the host's processes are visible: " << out;
  // The root holds only the bound paths, /dev and /proc.
  for (const char* absent : {"\nhome\n", "\nroot\n", "\netc\n", "\nvar\n", "\nboot\n"}) {
    if (std::string(absent) == "\netc\n") continue;  // /etc/ld.so.cache is bound
    EXPECT_EQ(out.find(absent), std::string::npos) << absent << " in " << out;
  }
  // Nothing of the jail's mounts is seen on the host.
  EXPECT_EQ(RunCommand({"ls", "-A", root_}).out, "");
}

TEST_F(JailTest, OwnedDeviceNodeIsTheJailUidsAlone) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  JailSpec spec = Spec();
  spec.devices.push_back({"/dev/zero", true});
  std::string out = RunJailed(spec, "stat -c '%u %a %t:%T' /dev/zero /dev/null; head -c 3 /dev/zero | wc -c",
                              dir_.path() + "/dev.log");
  EXPECT_NE(out.find(absl::StrCat(kJailUid, " 600 1:5\n")), std::string::npos) << out;
  EXPECT_NE(out.find("0 666 1:3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("\n3\n"), std::string::npos) << out;
}

TEST_F(JailTest, TheMemoryImageArrivesAsAPrivateCopyAtFd4) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  // The image is root's alone, as a snapshot's is: the jail's uid could not
  // open it, and gets a copy it may write.
  std::string image = dir_.path() + "/ram";
  {
    std::ofstream(image) << "guest memory";
  }
  ASSERT_EQ(chmod(image.c_str(), 0600), 0);
  UniqueFd fd(open(image.c_str(), O_RDONLY | O_CLOEXEC));
  ASSERT_GE(fd.get(), 0);
  JailSpec spec = Spec();
  spec.memory_image_fd = fd.get();
  std::string out = RunJailed(
      spec,
      absl::StrCat("cat /proc/self/fd/4; echo; readlink /proc/self/fd/4; "
                   "echo changed >> /proc/self/fd/4 && cat /proc/self/fd/4; "
                   "ls /proc/self/fd | sort -n | tr '\\n' ' '; echo; "
                   "cat ", image, " 2>/dev/null || echo image-absent"),
      dir_.path() + "/mem.log");
  EXPECT_NE(out.find("guest memory\n/memfd:airlock-guest-ram (deleted)\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find("guest memorychanged\n"), std::string::npos) << out;
  // 0-2, the copy, and ls's own directory: nothing else of vmmd's.
  EXPECT_NE(out.find("0 1 2 3 4 \n"), std::string::npos) << out;
  EXPECT_NE(out.find("image-absent"), std::string::npos) << out;
  EXPECT_EQ(ReadFileToString(image), "guest memory");
}

TEST_F(JailTest, AFailingStepIsNamedAndNothingRuns) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  JailSpec spec = Spec();
  spec.mounts.push_back({dir_.path() + "/absent", true});
  auto pid = LaunchJailed({"/usr/bin/true"}, spec, dir_.path() + "/fail.log");
  ASSERT_FALSE(pid.ok());
  EXPECT_NE(pid.status().message().find(absl::StrCat("mount --bind ", dir_.path(), "/absent on ")),
            std::string::npos)
      << pid.status();
  EXPECT_NE(pid.status().message().find("No such file or directory"), std::string::npos);
  auto exec = LaunchJailed({"/usr/bin/absent-program"}, Spec(), dir_.path() + "/fail.log");
  ASSERT_FALSE(exec.ok());
  EXPECT_NE(exec.status().message().find("exec /usr/bin/absent-program: No such file"),
            std::string::npos)
      << exec.status();
  EXPECT_FALSE(LaunchJailed({"relative"}, Spec(), dir_.path() + "/fail.log").ok());
}

TEST_F(JailTest, AJailThatDiesWithItsParentNeverOutlivesIt) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t parent = fork();
  if (parent == 0) {
    JailSpec spec = Spec();
    spec.die_with_parent = true;
    auto pid = LaunchJailed({"/usr/bin/sleep", "60"}, spec, dir_.path() + "/sleep.log");
    pid_t p = pid.ok() ? *pid : -1;
    ssize_t unused = write(fds[1], &p, sizeof(p));
    (void)unused;
    _exit(0);  // as vmmd killed mid-probe
  }
  pid_t jailed = 0;
  ASSERT_EQ(read(fds[0], &jailed, sizeof(jailed)), static_cast<ssize_t>(sizeof(jailed)));
  waitpid(parent, nullptr, 0);
  ASSERT_GT(jailed, 0);
  EXPECT_TRUE(AwaitExit(jailed, std::chrono::seconds(2)))
      << "the jailed child outlived its parent";
  close(fds[0]);
  close(fds[1]);
}

TEST(JailIdsTest, BlocksArePickedLowestFirstAndTheFirstIsTheProbes) {
  EXPECT_EQ(PickJailBase(kDefaultJailIdBase, {}), kDefaultJailIdBase + kJailIdsPerSandbox);
  EXPECT_EQ(PickJailBase(kDefaultJailIdBase, {kDefaultJailIdBase + kJailIdsPerSandbox}),
            kDefaultJailIdBase + 2 * kJailIdsPerSandbox);
  std::vector<uint32_t> all;
  for (uint32_t slot = 1; slot < kJailSlots; ++slot) all.push_back(kDefaultJailIdBase + slot * kJailIdsPerSandbox);
  EXPECT_EQ(PickJailBase(kDefaultJailIdBase, all), 0u) << "a full pool says so";
  std::vector<IdRange> map = ShareIdMap(5 << 16, 1234);
  ASSERT_EQ(map.size(), 3u);
  uint32_t covered = 0;
  for (const IdRange& r : map) {
    covered += r.count;
    EXPECT_NE(r.outside, 0u) << "host root is never mapped";
  }
  EXPECT_EQ(covered, kJailIdsPerSandbox);
  EXPECT_EQ(map[1].inside, kGuestUserId);
  EXPECT_EQ(map[1].outside, 1234u);
  // A root-owned tree: the guest user is not host root (it could make
  // setuid-root files), only the sandbox's own block is mapped.
  for (uint32_t owner : {0u, (5u << 16) + 7}) {
    std::vector<IdRange> only_block = ShareIdMap(5 << 16, owner);
    ASSERT_EQ(only_block.size(), 1u) << owner;
    EXPECT_EQ(only_block[0].inside, 0u);
    EXPECT_EQ(only_block[0].outside, 5u << 16);
    EXPECT_EQ(only_block[0].count, kJailIdsPerSandbox);
  }
}

TEST_F(JailTest, AnOrdinaryUserJailsWithAUserNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become an ordinary user";
  const uid_t nobody = 65534;
  ASSERT_EQ(chown(root_.c_str(), nobody, nobody), 0);
  ASSERT_EQ(chown(dir_.path().c_str(), nobody, nobody), 0);
  ASSERT_EQ(chown(rw_.c_str(), nobody, nobody), 0);
  std::string log = dir_.path() + "/user.log";
  pid_t child = fork();
  if (child == 0) {
    if (setgroups(0, nullptr) != 0 || setresgid(nobody, nobody, nobody) != 0 ||
        setresuid(nobody, nobody, nobody) != 0) {
      _exit(2);
    }
    JailSpec spec = Spec();
    spec.uid = nobody;
    spec.gid = nobody;
    spec.uid_map = {{nobody, nobody, 1}};
    spec.gid_map = {{nobody, nobody, 1}};
    auto pid = LaunchJailed({"/usr/bin/sh", "-c",
                             absl::StrCat("echo pid=$$; cat /proc/self/status; echo u > ", rw_,
                                          "/user.txt; ls /home 2>/dev/null || echo host-absent")},
                            spec, log);
    if (!pid.ok()) {
      std::ofstream(log) << "LAUNCH FAILED: " << pid.status().message();
      _exit(3);
    }
    AwaitExit(*pid, std::chrono::seconds(5));
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  std::string out = ReadFileToString(log);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << out;
  EXPECT_NE(out.find("pid=1\n"), std::string::npos) << out;
  EXPECT_EQ(StatusLine(out, "CapEff"), "0000000000000000") << out;
  EXPECT_EQ(StatusLine(out, "NoNewPrivs"), "1") << out;
  EXPECT_NE(out.find("host-absent"), std::string::npos) << out;
  EXPECT_EQ(ReadFileToString(rw_ + "/user.txt"), "u\n");
  struct stat st;
  ASSERT_EQ(stat((rw_ + "/user.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody);
}

// A jail that dies with its parent is a raw clone of a multi-threaded
// vmmd. Threads come and go here while such jails start: a child that
// used glibc's id calls waited forever for threads that exist only in the
// parent (CI hung an hour on it). A launch that makes no progress for 5 s
// ends this test with a message: a hang cannot be waited out otherwise.
TEST_F(JailTest, DieWithParentJailsStartWhileThreadsComeAndGo) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 3; ++t) {
    churn.emplace_back([&] {
      while (!stop) std::thread([] {}).join();
    });
  }
  std::atomic<int> done{0};
  std::thread watchdog([&] {
    int last = -1;
    for (int tick = 1; !stop; ++tick) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      if (tick % 50 != 0) continue;
      if (done == last) {
        fprintf(stderr, "a die-with-parent jail did not start within 5 s (after %d launches)\n",
                done.load());
        _exit(1);
      }
      last = done;
    }
  });
  for (int i = 0; i < 200; ++i) {
    JailSpec spec = Spec();
    spec.die_with_parent = true;
    auto pid = LaunchJailed({"/usr/bin/true"}, spec, dir_.path() + "/true.log");
    EXPECT_TRUE(pid.ok()) << pid.status();
    if (!pid.ok()) break;
    int status = -1;
    EXPECT_EQ(waitpid(*pid, &status, 0), *pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    ++done;
  }
  stop = true;
  for (auto& t : churn) t.join();
  watchdog.join();
}

}  // namespace
}  // namespace airlock::vmmd
