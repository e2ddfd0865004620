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
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/share_checks.h"

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
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
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

  // WarmVmsReady counts vmmd's "warm VM ready" lines so far.
  int WarmVmsReady() {
    std::string log = Airlock({"daemon", "logs", "vmmd"}).out;
    int n = 0;
    for (size_t at = log.find("\"msg\":\"warm VM ready\""); at != std::string::npos;
         at = log.find("\"msg\":\"warm VM ready\"", at + 1)) {
      ++n;
    }
    return n;
  }

  bool WaitForWarmVm(int before) {
    for (int i = 0; i < 240 && WarmVmsReady() <= before; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return WarmVmsReady() > before;
  }

  // Connected says whether a host process (vmmd, proxyd) holds a
  // connection to the Unix socket a VM listens on at `path`: the socket
  // its QEMU accepted is made in the connecting side's network namespace,
  // bound to that path, in state 03 (connected). The path is the one
  // bound, which a rename of its directory does not change.
  static bool Connected(const std::string& path) {
    std::ifstream in("/proc/self/net/unix");
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string num, refs, proto, flags, type, st, inode, bound;
      fields >> num >> refs >> proto >> flags >> type >> st >> inode >> bound;
      if (bound == path && st == "03") return true;
    }
    return false;
  }

  // KillVmmdAndStartAgain kills vmmd with SIGKILL and starts the daemons
  // again (the others are still running).
  void KillVmmdAndStartAgain() {
    std::ifstream pidfile(dir_.path() + "/run/vmmd.pid");
    pid_t vmmd = 0;
    pidfile >> vmmd;
    ASSERT_GT(vmmd, 0);
    ASSERT_EQ(kill(vmmd, SIGKILL), 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  }

  bool WaitForSnapshot() {
    for (int i = 0; i < 600 && Snapshots().empty(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return !Snapshots().empty();
  }
  // SnapshotDiagnosis is what a failed wait for a snapshot shows (the
  // test's directory goes with the test): the end of vmmd's log, and of
  // the snapshot guest's console and QEMU log while one is still being
  // made (vmmd removes them when it gives up).
  std::string SnapshotDiagnosis() {
    auto tail = [](const std::string& path) {
      std::ifstream in(path);
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      return text.size() > 4000 ? text.substr(text.size() - 4000) : text;
    };
    std::string out = "\n--- vmmd.log ---\n" + tail(dir_.path() + "/state/logs/vmmd.log");
    std::string pool = dir_.path() + "/state/snapshots";
    if (DIR* d = opendir(pool.c_str())) {
      while (dirent* e = readdir(d)) {
        std::string name = e->d_name;
        if (name == "." || name == "..") continue;
        for (const char* log : {"/console.log", "/vmm.log"}) {
          out += "\n--- snapshots/" + name + log + " ---\n" + tail(pool + "/" + name + log);
        }
      }
      closedir(d);
    }
    return out;
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
  ASSERT_TRUE(WaitForSnapshot()) << "vmmd made no snapshot after the first boot"
                                 << SnapshotDiagnosis();
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
    // twin-a's restore asks for a warm VM (warm_pool.h), which twin-b
    // claims if it is ready by then: both are restored guests.
    std::string from = Sandbox(name)["started_from"];
    EXPECT_TRUE(from == "restore" || (from == "pool" && std::string(name) == "twin-b"))
        << name << ": " << from << SnapshotDiagnosis();
    EXPECT_EQ(Sandbox(name)["state"], "running");
  }
  // Identity: hostname, machine id, entropy, clock.
  EXPECT_EQ(Exec("twin-a", "hostname"), "twin-a\n");
  EXPECT_EQ(Exec("twin-b", "uname -n"), "twin-b\n");
  // Its own name resolves from /etc/hosts (not from DNS, which goes
  // through proxyd), to Debian's own-host address.
  EXPECT_EQ(Exec("twin-b", "getent -s files hosts twin-b"),
            "127.0.1.1       twin-b\n");
  EXPECT_EQ(Exec("twin-b", "grep -c twin-a /etc/hosts || true"), "0\n");
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
  ASSERT_NO_FATAL_FAILURE(KillVmmdAndStartAgain());
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

  // Another shape boots.
  auto other = Airlock({"run", "--name", "bigger", "-m", "1200m", "shell", "--", "true"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(Sandbox("bigger")["started_from"], "boot");
}

TEST_F(SnapshotE2ETest, SharedPathsArePluggedIntoARestoredSandbox) {
  auto first = Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  ASSERT_TRUE(WaitForSnapshot()) << "vmmd made no snapshot after the first boot"
                                 << SnapshotDiagnosis();
  testing::SharedPaths shared = testing::MakeSharedPaths(dir_.path());
  const std::string& ws = shared.ws;

  // A direct-mode workspace, a read-only directory and a read-only file:
  // the snapshot has none of them, the restored VM takes them plugged in,
  // and they hold as a booted sandbox's do (the host keeps read-only).
  std::vector<std::string> args = {"run", "--name", "direct", "-m", "1g", "shell"};
  for (const std::string& a : shared.Args()) args.push_back(a);
  for (const char* a : {"--", "sh", "-c", testing::kSharedPathsCommand}) args.push_back(a);
  auto run = Airlock(args);
  std::string from = Sandbox("direct")["started_from"];
  EXPECT_TRUE(from == "restore" || from == "pool") << from;
  testing::ExpectSharesWork(env_, "direct", shared, run);
  // The guest sees its shares on the PCIe slots (beside the serial
  // ports' device), and the next sandbox does not see them.
  EXPECT_EQ(Exec("direct", "ls -d /sys/bus/pci/drivers/virtio-pci/0000:* | wc -l"), "4\n");

  auto other = Airlock({"run", "--name", "other", "-m", "1g", "shell", "--", "sh", "-c",
                        "grep -c virtiofs /proc/mounts; ls " + ws + " 2>&1"});
  EXPECT_NE(Sandbox("other")["started_from"], "boot");
  EXPECT_NE(other.exit_code, 0);
  EXPECT_EQ(other.out, "0\nls: cannot access '" + ws + "': No such file or directory\n")
      << other.err;

  // A restart boots its disk, with the shares as a boot has them.
  ASSERT_EQ(Airlock({"stop", "direct"}).exit_code, 0);
  ASSERT_EQ(Airlock({"start", "direct"}).exit_code, 0);
  EXPECT_EQ(Sandbox("direct")["started_from"], "boot");
  EXPECT_EQ(Airlock({"exec", "direct", "--", "cat", ws + "/from-guest.txt"}).out,
            "from guest\n");

  // Clone mode: the source is plugged in read-only and cloned.
  std::string repo = dir_.path() + "/repo";
  auto git = [&](const std::string& cmd) {
    return RunCommand({"sh", "-c", "cd '" + repo + "' && " + cmd},
                      {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir_.path()}});
  };
  ASSERT_EQ(RunCommand({"git", "init", "-q", "-b", "main", repo}).exit_code, 0);
  ASSERT_EQ(git("echo v1 > app.txt && git add . && "
                "git -c user.name=h -c user.email=h@h commit -qm host-commit").exit_code, 0);
  ASSERT_EQ(Airlock({"create", "--clone", "--name", "cl", "-m", "1g", "shell", repo}).exit_code,
            0);
  from = Sandbox("cl")["started_from"];
  EXPECT_TRUE(from == "restore" || from == "pool") << from;
  auto look = Airlock({"exec", "cl", "--", "sh", "-c", "git log --format=%s; cat app.txt"});
  EXPECT_EQ(look.out, "host-commit\nv1\n") << look.err;
  auto touch = Airlock({"exec", "-u", "root", "cl", "--", "sh", "-c",
                        "echo x > /run/sandbox/source/app.txt"});
  EXPECT_NE(touch.err.find("Read-only file system"), std::string::npos) << touch.err;
  EXPECT_EQ(ReadFileToString(repo + "/app.txt"), "v1\n");
}

TEST_F(SnapshotE2ETest, AWarmVmBecomesTheNextSandboxAndIsItsOwn) {
  ASSERT_EQ(Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"}).exit_code, 0);
  ASSERT_TRUE(WaitForSnapshot()) << SnapshotDiagnosis();
  // A restore asks for a warm VM of its snapshot.
  int ready = WarmVmsReady();
  auto restored = Airlock({"run", "--name", "second", "-m", "1g", "shell", "--", "true"});
  ASSERT_EQ(restored.exit_code, 0) << restored.err;
  EXPECT_EQ(Sandbox("second")["started_from"], "restore");
  ASSERT_TRUE(WaitForWarmVm(ready)) << Airlock({"daemon", "logs", "vmmd"}).out;
  std::string pool = dir_.path() + "/state/pool/";
  std::vector<pid_t> warm = testing::ProcessesNamed(pool);
  ASSERT_EQ(warm.size(), 1u);
  std::string cmdline = ProcessCmdline(warm[0]);
  size_t slot_at = cmdline.find(pool);
  ASSERT_NE(slot_at, std::string::npos);
  std::string slot = cmdline.substr(slot_at + pool.size(), 14);
  ASSERT_EQ(slot.substr(0, 6), "_warm-") << cmdline;
  // Nobody's yet: not in `ls`, its agent greeted by vmmd, its egress port
  // attached to nothing (proxyd holds no connection to it).
  EXPECT_EQ(Airlock({"ls", "-q"}).out, "first\nsecond\n");
  std::string socks = dir_.path() + "/run/vms/" + slot;
  EXPECT_TRUE(Connected(socks + "/agent.sock")) << "vmmd's greeting connection";
  EXPECT_FALSE(Connected(socks + "/egress.sock"))
      << "an unclaimed warm VM's egress is attached";

  // The next sandbox of the shape is that VM, with its own identity.
  int ready_before_claim = WarmVmsReady();
  auto claimed = Airlock({"run", "--name", "third", "-m", "1g", "shell", "--", "hostname"});
  ASSERT_EQ(claimed.exit_code, 0) << claimed.err;
  EXPECT_EQ(claimed.out, "third\n");
  EXPECT_EQ(Sandbox("third")["started_from"], "pool");
  EXPECT_EQ(Sandbox("third")["pid"], warm[0]);
  EXPECT_NE(Exec("third", "cat /etc/machine-id"), Exec("second", "cat /etc/machine-id"));
  long guest_now = std::atol(Exec("third", "date +%s").c_str());
  EXPECT_LE(std::labs(guest_now - static_cast<long>(time(nullptr))), 3);
  // Its files, sockets and jail are the sandbox's now; its egress is
  // attached, and it reaches nothing its rules do not allow.
  struct stat gone {};
  EXPECT_NE(stat((pool + slot).c_str(), &gone), 0) << "the slot's directory is left";
  EXPECT_NE(stat(socks.c_str(), &gone), 0) << "the slot's socket directory is left";
  EXPECT_TRUE(Connected(socks + "/egress.sock")) << "proxyd is not attached";
  auto denied = Airlock({"exec", "third", "--", "sh", "-c",
                         "curl -sS -m 20 -w '\\nstatus=%{http_code}\\n' http://example.com/"});
  EXPECT_NE(denied.out.find("status=403"), std::string::npos) << denied.out << denied.err;
  EXPECT_NE(denied.out.find("blocked example.com:80"), std::string::npos) << denied.out;
  EXPECT_EQ(Exec("third", "echo mine > /root/only-third && sync && cat /root/only-third"), "mine\n");
  EXPECT_EQ(Airlock({"exec", "second", "--", "test", "-e", "/root/only-third"}).exit_code, 1);

  // vmmd killed: the claimed VM is reattached (found by its slot), the warm
  // VM made after the claim is killed and its files removed.
  ASSERT_TRUE(WaitForWarmVm(ready_before_claim)) << "no warm VM after the claim";
  std::vector<pid_t> refill = testing::ProcessesNamed(pool);
  ASSERT_EQ(refill.size(), 2u) << "the claimed VM and the refill";
  ASSERT_NO_FATAL_FAILURE(KillVmmdAndStartAgain());
  for (int i = 0; i < 120 && Sandbox("third")["state"] != "running"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  EXPECT_EQ(Sandbox("third")["pid"], warm[0]) << "reattached, not booted again";
  EXPECT_EQ(Exec("third", "hostname"), "third\n");
  std::vector<pid_t> left = testing::ProcessesNamed(pool);
  EXPECT_EQ(left, std::vector<pid_t>{warm[0]}) << "an unclaimed warm VM outlived vmmd's restart";
  DIR* d = opendir(pool.c_str());
  ASSERT_NE(d, nullptr);
  while (dirent* e = readdir(d)) {
    EXPECT_TRUE(std::string(e->d_name) == "." || std::string(e->d_name) == "..") << e->d_name;
  }
  closedir(d);
  // Stopped and started, it boots its own disk, and rm leaves nothing.
  ASSERT_EQ(Airlock({"stop", "third"}).exit_code, 0);
  EXPECT_TRUE(testing::ProcessesNamed(pool).empty()) << "stop left the claimed VM running";
  ASSERT_EQ(Airlock({"start", "third"}).exit_code, 0);
  EXPECT_EQ(Sandbox("third")["started_from"], "boot");
  EXPECT_EQ(Exec("third", "cat /root/only-third"), "mine\n");
}

TEST_F(SnapshotE2ETest, ASnapshotQemuCannotLoadIsDroppedAndTheSandboxBoots) {
  ASSERT_EQ(Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"}).exit_code, 0);
  ASSERT_TRUE(WaitForSnapshot()) << SnapshotDiagnosis();
  std::string snapshot = Snapshots().front();
  // Cut the migration stream in half: QEMU stops loading it and exits.
  struct stat st {};
  ASSERT_EQ(stat((snapshot + "/memory").c_str(), &st), 0);
  ASSERT_EQ(truncate((snapshot + "/memory").c_str(), st.st_size / 2), 0);
  auto r = Airlock({"run", "--name", "second", "-m", "1g", "shell", "--", "hostname"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "second\n");
  EXPECT_EQ(Sandbox("second")["started_from"], "boot");
  // The broken one is gone, and that boot made the image's snapshot once
  // more (a new stream, whole): the next sandbox restores it.
  ASSERT_TRUE(WaitForSnapshot()) << SnapshotDiagnosis();
  struct stat remade {};
  ASSERT_EQ(stat((snapshot + "/memory").c_str(), &remade), 0);
  EXPECT_GT(remade.st_size, st.st_size / 2) << "the broken (cut) snapshot is still there";
  auto third = Airlock({"run", "--name", "third", "-m", "1g", "shell", "--", "hostname"});
  ASSERT_EQ(third.exit_code, 0) << third.err;
  EXPECT_EQ(third.out, "third\n");
  EXPECT_EQ(Sandbox("third")["started_from"], "restore");
}

TEST_F(SnapshotE2ETest, ASnapshotWithoutItsRamImageIsNeverRestored) {
  ASSERT_EQ(Airlock({"run", "--name", "first", "-m", "1g", "shell", "--", "true"}).exit_code, 0);
  ASSERT_TRUE(WaitForSnapshot()) << SnapshotDiagnosis();
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
