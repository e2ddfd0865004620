#include "vmmd/snapshots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

void Write(const std::string& path, const std::string& content) {
  ASSERT_TRUE(ReplaceFile(path, content, 0600).ok()) << path;
}

TEST(SnapshotKeyTest, EveryInputAndEachFileChangesTheKey) {
  testing::ShortTempDir dir;
  for (const char* f : {"/base", "/kernel", "/initrd"}) Write(dir.path() + f, "x");
  SnapshotInputs in{dir.path() + "/base", dir.path() + "/kernel", dir.path() + "/initrd",
                    "qemu:1\n-m 1024M"};
  std::string key = SnapshotKey(in);
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(SnapshotKey(in), key);
  SnapshotInputs other = in;
  other.vm = "qemu:1\n-m 2048M";
  EXPECT_NE(SnapshotKey(other), key);
  other = in;
  other.base_disk = dir.path() + "/kernel";
  EXPECT_NE(SnapshotKey(other), key);
  // A rebuilt initramfs (the agent changed) under the same name: another key.
  std::string before = SnapshotKey(in);
  unlink((dir.path() + "/initrd").c_str());
  Write(dir.path() + "/initrd", "xy");
  EXPECT_NE(SnapshotKey(in), before);
  // A change of owner or mode is no change of content.
  before = SnapshotKey(in);
  ASSERT_EQ(chmod((dir.path() + "/base").c_str(), 0640), 0);
  EXPECT_EQ(SnapshotKey(in), before);
}

TEST(SnapshottableTest, SharesUpToTheHotplugSlotsAndNoDocker) {
  VmConfig c;
  EXPECT_TRUE(Snapshottable(c, 0));
  c.shares.push_back({"airlock0", "/s0"});
  EXPECT_FALSE(Snapshottable(c, 0)) << "a hypervisor that cannot plug shares boots them";
  EXPECT_TRUE(Snapshottable(c, 1));
  c.shares.push_back({"airlock1", "/s1"});
  EXPECT_FALSE(Snapshottable(c, 1)) << "more shares than slots boot";
  EXPECT_TRUE(Snapshottable(c, 4));
  c.shares.clear();
  c.docker_disk = "/d";
  EXPECT_FALSE(Snapshottable(c, 4));
}

TEST(RestoreCondemnsSnapshotTest, AnUnloadableStreamOrAPanickedGuestAndNothingElse) {
  EXPECT_TRUE(RestoreCondemnsSnapshot(
      "qemu-system-x86_64: load of migration failed: Input/output error\n", ""));
  // What a CI run's restores printed, every one of them, from one snapshot.
  EXPECT_TRUE(RestoreCondemnsSnapshot(
      "", "RIP: 0010:0x2325f1596\nKernel panic - not syncing: Attempted to kill the idle task!\n"));
  EXPECT_FALSE(RestoreCondemnsSnapshot("", "")) << "killed: nothing says why";
  EXPECT_FALSE(RestoreCondemnsSnapshot("qemu-system-x86_64: terminating on signal 9\n",
                                       "[    0.000000] Linux version 6.1\n"));
  EXPECT_FALSE(RestoreCondemnsSnapshot("", "virtio_fs: probe of virtio5 failed with error -2\n"))
      << "a share that would not plug";
}

TEST(SnapshotVmTest, NamesNoSandboxAndKeepsTheShape) {
  VmConfig c;
  c.name = "dev";
  c.memory_mib = 1024;
  c.cpus = 2;
  c.disk = "/state/sandboxes/dev/disk.qcow2";
  c.ensure_agent_user = true;
  c.shares.push_back({"airlock0", "/run/dev/fs0.sock"});
  VmConfig v = SnapshotVm(c, "/snap/k.partial", "/run/_snapshot");
  EXPECT_EQ(v.name, kSnapshotVmName);
  EXPECT_EQ(v.hostname, kSnapshotHostname);
  EXPECT_EQ(v.disk, "/snap/k.partial/disk.qcow2");
  EXPECT_EQ(v.agent_socket, "/run/_snapshot/agent.sock");
  EXPECT_EQ(v.memory_mib, 1024u);
  EXPECT_EQ(v.cpus, 2u);
  EXPECT_TRUE(v.ensure_agent_user);
  EXPECT_TRUE(v.shares.empty()) << "a snapshot holds no share; the sandbox's are plugged in";
}

TEST(SnapshotStoreTest, APartialSnapshotIsNeverFoundAndCommitKeepsTheNewest) {
  testing::ShortTempDir dir;
  SnapshotStore store(dir.path() + "/snapshots");
  EXPECT_FALSE(store.Find("k1"));
  auto s = store.Begin("k1");
  ASSERT_TRUE(s.ok()) << s.status();
  Write(s->disk, "disk");
  Write(s->memory, "memory");
  EXPECT_FALSE(store.Commit("k1", 2).ok()) << "no RAM image";
  EXPECT_FALSE(store.Find("k1"));
  Write(s->ram, "ram");
  EXPECT_FALSE(store.Find("k1"));  // still partial
  ASSERT_TRUE(store.Commit("k1", 2).ok());
  auto found = store.Find("k1");
  ASSERT_TRUE(found);
  EXPECT_EQ(ReadFileToString(found->memory), "memory");
  EXPECT_EQ(ReadFileToString(found->ram), "ram");
  for (const char* k : {"k2", "k3"}) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto b = store.Begin(k);
    ASSERT_TRUE(b.ok());
    Write(b->disk, "d");
    Write(b->memory, "m");
    Write(b->ram, "r");
    ASSERT_TRUE(store.Commit(k, 2).ok());
  }
  EXPECT_FALSE(store.Find("k1"));
  EXPECT_EQ(store.Keys(), (std::vector<std::string>{"k2", "k3"}));
  // An empty memory file (a save cut short) is no snapshot.
  auto b = store.Begin("k4");
  ASSERT_TRUE(b.ok());
  Write(b->disk, "d");
  Write(b->memory, "");
  Write(b->ram, "r");
  EXPECT_FALSE(store.Commit("k4", 8).ok() && store.Find("k4"));
  // What a crash left half made goes at the next start.
  ASSERT_TRUE(store.Begin("k5").ok());
  store.RemovePartials();
  struct stat st {};
  EXPECT_NE(stat((dir.path() + "/snapshots/k5.partial").c_str(), &st), 0);
  EXPECT_TRUE(store.Find("k2"));
}

TEST(SnapshotStreamTest, WhatIsSentIsWhatIsReceived) {
  testing::ShortTempDir dir;
  std::string data;
  for (int i = 0; i < 300000; ++i) data += static_cast<char>(i * 7);
  Write(dir.path() + "/in", data);
  auto listener = ListenUnix(dir.path() + "/s.sock", 0);
  ASSERT_TRUE(listener.ok()) << listener.status();
  UniqueFd l(*listener);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  absl::Status sent;
  std::thread sender([&] { sent = SendStream(dir.path() + "/s.sock", dir.path() + "/in", deadline); });
  auto got = ReceiveStream(l.get(), dir.path() + "/out", deadline);
  sender.join();
  ASSERT_TRUE(sent.ok()) << sent;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, data.size());
  EXPECT_EQ(ReadFileToString(dir.path() + "/out"), data);
}

TEST(SnapshotStreamTest, NobodyListeningIsUnavailableAtTheDeadline) {
  testing::ShortTempDir dir;
  Write(dir.path() + "/in", "x");
  absl::Status s = SendStream(dir.path() + "/none.sock", dir.path() + "/in",
                              std::chrono::steady_clock::now() + std::chrono::milliseconds(100));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("did not listen for the restore"), std::string::npos);
}

}  // namespace
}  // namespace airlock::vmmd
