// Snapshot restore end to end: the real CLI and daemons, real QEMU guests.
// The first sandbox of an image boots and vmmd saves a fresh guest of it;
// the next ones restore that guest and must each be their own.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <dirent.h>
#include <fstream>
#include <map>
#include <thread>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

class SnapshotE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The harness's env (apid on a port of its own: a daemon set already
    // on 7777, a user's or another test's, must not fail this one).
    env_ = testing::AirlockEnv(dir_.path());
    env_["AIRLOCK_LIBEXEC_DIR"] = "";
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
  }
  void TearDown() override {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    EXPECT_TRUE(testing::ProcessesNamed(dir_.path()).empty())
        << "processes of this test left running";
    for (pid_t p : testing::ProcessesNamed(dir_.path())) kill(p, SIGKILL);
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args);
  }

  nlohmann::json Sandbox(const std::string& name) {
    auto r = Airlock({"ls", "--json"});
    for (const auto& sb : nlohmann::json::parse(r.out)) {
      if (sb["name"] == name) return sb;
    }
    return nullptr;
  }

  std::string Exec(const std::string& name, const std::string& script) {
    auto r = Airlock({"exec", "-u", "root", name, "--", "sh", "-c", script});
    EXPECT_EQ(r.exit_code, 0) << script << ": " << r.err;
    return r.out;
  }

  // Snapshots lists the finished snapshots' directories.
  std::vector<std::string> Snapshots() {
    std::vector<std::string> out;
    std::string dir = dir_.path() + "/state/snapshots";
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return out;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n.size() == 64) out.push_back(dir + "/" + n);
    }
    closedir(d);
    return out;
  }

  // FileHolds says whether `path` (read in pieces: a RAM image is the
  // guest's size) contains `text`.
  static bool FileHolds(const std::string& path, const std::string& text) {
    std::ifstream in(path, std::ios::binary);
    std::string carry, chunk(1 << 20, '\0');
    while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
      std::string window = carry + chunk.substr(0, in.gcount());
      if (window.find(text) != std::string::npos) return true;
      carry = window.substr(window.size() - std::min(window.size(), text.size()));
    }
    return false;
  }

  // Digest is the SHA-256 of `path`, as sha256sum prints it.
  static std::string Digest(const std::string& path) {
    return RunCommand({"sha256sum", path}).out.substr(0, 64);
  }

  bool WaitForSnapshot() {
    for (int i = 0; i < 600 && Snapshots().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return !Snapshots().empty();
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(SnapshotE2ETest, RestoredSandboxesAreEachTheirOwn) {
  // A name no guest would hold unless the snapshot carried it.
  const std::string first = "origin-7q3zx";
  auto run = Airlock({"run", "--name", first, "-m", "1g", "shell", "--", "true"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Sandbox(first)["started_from"], "boot");
  ASSERT_TRUE(WaitForSnapshot()) << "vmmd made no snapshot after the first boot";
  std::string snapshot = Snapshots().front();
  // The snapshot is of a guest that was never a sandbox: device state,
  // and the guest's RAM as a sparse image the guest's size.
  std::string memory = ReadFileToString(snapshot + "/memory");
  EXPECT_GT(memory.size(), 16u << 10);
  EXPECT_LT(memory.size(), 8u << 20) << "the guest's pages are still in the stream";
  EXPECT_EQ(memory.find(first), std::string::npos) << "the snapshot holds the first sandbox's name";
  std::string ram = snapshot + "/ram";
  struct stat ram_st {};
  ASSERT_EQ(stat(ram.c_str(), &ram_st), 0);
  EXPECT_EQ(ram_st.st_size, 1 << 30);
  EXPECT_GT(ram_st.st_blocks * 512, 32 << 20) << "the guest's memory is missing";
  EXPECT_LT(ram_st.st_blocks * 512, 512 << 20) << "the image is not sparse";
  EXPECT_FALSE(FileHolds(ram, first)) << "the snapshot's RAM holds the first sandbox's name";
  std::string ram_digest = Digest(ram);
  ASSERT_EQ(ram_digest.size(), 64u);
  // Its VM and jail are gone; its files are root's alone (the VM's jail
  // ids go back to the pool and may become a sandbox's).
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/snapshots").empty());
  for (const char* f : {"/disk.qcow2", "/memory", "/ram"}) {
    struct stat st {};
    ASSERT_EQ(stat((snapshot + f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_uid, 0u) << f;
    EXPECT_EQ(st.st_mode & 077, 0u) << f;
  }

  // The snapshot's clock stops when it is saved: a restore without the
  // host's clock would be this far behind.
  std::this_thread::sleep_for(std::chrono::seconds(15));
  for (const char* name : {"twin-a", "twin-b"}) {
    auto r = Airlock({"run", "--name", name, "-m", "1g", "shell", "--", "true"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(Sandbox(name)["started_from"], "restore") << name;
    EXPECT_EQ(Sandbox(name)["state"], "running");
  }
  // Identity: hostname, machine id, entropy, clock.
  EXPECT_EQ(Exec("twin-a", "hostname"), "twin-a\n");
  EXPECT_EQ(Exec("twin-b", "uname -n"), "twin-b\n");
  std::string id_a = Exec("twin-a", "cat /etc/machine-id");
  std::string id_b = Exec("twin-b", "cat /etc/machine-id");
  EXPECT_EQ(id_a.size(), 33u) << id_a;
  EXPECT_NE(id_a, id_b);
  // (A weak check: the guests' own interrupt timings may already part their
  // generators; that the reseed itself happened is the Claim's success.)
  std::string random = "head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n'";
  std::string rand_a = Exec("twin-a", random);
  std::string rand_b = Exec("twin-b", random);
  EXPECT_EQ(rand_a.size(), 64u);
  EXPECT_NE(rand_a, rand_b) << "two restored guests drew the same random bytes";
  long guest_now = std::atol(Exec("twin-a", "date +%s").c_str());
  EXPECT_LE(std::labs(guest_now - static_cast<long>(time(nullptr))), 3)
      << "the restored guest's clock was not set from the host";
  // Disks: each its own.
  Exec("twin-a", "echo mine > /root/only-a && sync");
  EXPECT_EQ(Airlock({"exec", "twin-b", "--", "test", "-e", "/root/only-a"}).exit_code, 1);
  // Memory: each QEMU maps a copy of its own (a memfd), never the
  // snapshot's image, which nothing a guest does changes: not its writes,
  // and not the pages it frees (free page reporting punches them out of
  // the copy).
  for (const char* name : {"twin-a", "twin-b"}) {
    pid_t qemu = Sandbox(name)["pid"];
    std::string fds = RunCommand({"sh", "-c", "ls -l /proc/" + std::to_string(qemu) + "/fd"}).out;
    EXPECT_NE(fds.find("/memfd:airlock-guest-ram"), std::string::npos) << name << ": " << fds;
    EXPECT_EQ(fds.find(snapshot), std::string::npos) << name << " holds a snapshot file: " << fds;
  }
  Exec("twin-a",
       "echo 3 > /proc/sys/vm/drop_caches; head -c 200M /dev/urandom > /dev/shm/burst && "
       "rm /dev/shm/burst && echo 1 > /proc/sys/vm/compact_memory; sleep 4");
  EXPECT_EQ(Exec("twin-b", "hostname"), "twin-b\n");
  EXPECT_EQ(Digest(ram), ram_digest) << "a restored guest changed the snapshot's memory";
  EXPECT_EQ(Exec("twin-a", "hostname"), "twin-a\n");
  // vmmd killed and restarted reattaches to a restored guest.
  pid_t qemu_b = Sandbox("twin-b")["pid"];
  std::ifstream pidfile(dir_.path() + "/run/vmmd.pid");
  pid_t vmmd = 0;
  pidfile >> vmmd;
  ASSERT_GT(vmmd, 0);
  ASSERT_EQ(kill(vmmd, SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // Both restored sandboxes are reattached (a stop while one still is
  // would be refused as busy).
  for (int i = 0; i < 120 && (Sandbox("twin-b")["state"] != "running" ||
                              Sandbox("twin-a")["state"] != "running");
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(Sandbox("twin-b")["state"], "running");
  EXPECT_EQ(Sandbox("twin-a")["state"], "running");
  EXPECT_EQ(Sandbox("twin-b")["pid"], qemu_b) << "reattached, not booted again";
  EXPECT_EQ(Exec("twin-b", "hostname"), "twin-b\n");
  // A restart boots the sandbox's own disk, with what it wrote.
  // Right after a reattach the record may still be finishing it ("cannot
  // stop it now"): stop is asked again until it is idle.
  auto stopped = Airlock({"stop", "twin-a"});
  for (int i = 0; i < 20 && stopped.err.find("cannot stop it now") != std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    stopped = Airlock({"stop", "twin-a"});
  }
  ASSERT_EQ(stopped.exit_code, 0) << stopped.err;
  ASSERT_EQ(Airlock({"start", "twin-a"}).exit_code, 0);
  EXPECT_EQ(Sandbox("twin-a")["started_from"], "boot");
  EXPECT_EQ(Exec("twin-a", "cat /root/only-a"), "mine\n");
  EXPECT_EQ(Exec("twin-a", "cat /etc/machine-id"), id_a) << "the machine id is the sandbox's";
  EXPECT_EQ(Exec("twin-a", "hostname"), "twin-a\n");

  // Another shape, or a shared path, boots.
  auto other = Airlock({"run", "--name", "bigger", "-m", "1200m", "shell", "--", "true"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(Sandbox("bigger")["started_from"], "boot");
  std::string work = dir_.path() + "/work";
  mkdir(work.c_str(), 0755);
  auto shared = Airlock({"run", "--name", "shared", "-m", "1g", "shell", work, "--", "true"});
  ASSERT_EQ(shared.exit_code, 0) << shared.err;
  EXPECT_EQ(Sandbox("shared")["started_from"], "boot");
}

TEST_F(SnapshotE2ETest, ASnapshotQemuCannotLoadIsDroppedAndTheSandboxBoots) {
  ASSERT_EQ(Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"}).exit_code, 0);
  ASSERT_TRUE(WaitForSnapshot());
  std::string snapshot = Snapshots().front();
  // Cut the migration stream in half: QEMU stops loading it and exits.
  struct stat st {};
  ASSERT_EQ(stat((snapshot + "/memory").c_str(), &st), 0);
  ASSERT_EQ(truncate((snapshot + "/memory").c_str(), st.st_size / 2), 0);
  auto r = Airlock({"run", "--name", "second", "-m", "1g", "shell", "--", "hostname"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "second\n");
  EXPECT_EQ(Sandbox("second")["started_from"], "boot");
  struct stat gone {};
  EXPECT_NE(stat(snapshot.c_str(), &gone), 0) << "the broken snapshot is still there";
}

TEST_F(SnapshotE2ETest, ASnapshotWithoutItsRamImageIsNeverRestored) {
  ASSERT_EQ(Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"}).exit_code, 0);
  ASSERT_TRUE(WaitForSnapshot());
  std::string snapshot = Snapshots().front();
  // Device state alone would resume a guest over zeroed memory.
  ASSERT_EQ(unlink((snapshot + "/ram").c_str()), 0);
  auto r = Airlock({"run", "--name", "second", "-m", "1g", "shell", "--", "hostname"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "second\n");
  EXPECT_EQ(Sandbox("second")["started_from"], "boot");
}

}  // namespace
}  // namespace airlock
