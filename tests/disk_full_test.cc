// A full disk under the state dir: the real CLI and daemons with the state
// dir on a tmpfs of its own (the test runs as root and mounts it), filled
// by a filler file. A `secret set` or a `create` that needs the space must
// fail with exit code 1 and an error that names the disk, leave what was
// stored as it was (no secret half written, also after secretsd restarts;
// no sandbox but a failed one with its reason; no disk files), and work
// once the filler is gone.
#include <errno.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

// The tmpfs holds the base template's image (its blobs and its boot disk,
// some 400 MiB), the daemons' state files and logs.
constexpr char kStateSize[] = "size=768m,mode=0700";

std::string ImageDir() {
  const char* d = getenv("AIRLOCK_IMAGE_DIR");
  return d != nullptr ? d : "";
}

// Files lists the regular files under `dir`, "" when there are none.
std::string Files(const std::string& dir) {
  return RunCommand({"sh", "-c", "find \"$1\" -type f 2>/dev/null | sort", "files", dir}).out;
}

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
    env_["AIRLOCK_LIBEXEC_DIR"] = "";
    state_ = dir_.path() + "/state";
    ASSERT_EQ(mkdir(state_.c_str(), 0700), 0);
    ASSERT_EQ(mount("tmpfs", state_.c_str(), "tmpfs", 0, kStateSize), 0) << strerror(errno);
    mounted_ = true;
    // No snapshots: vmmd would save one into this state dir in the
    // background after the first boot, taking and giving back space while
    // the test fills the disk (a fill then failed, or a full disk had room).
    std::ofstream(state_ + "/vmmd.conf") << "snapshots = false\n";
    // The guest images with only the base template, so the store is small.
    const std::string images = dir_.path() + "/images";
    ASSERT_EQ(mkdir(images.c_str(), 0755), 0);
    ASSERT_EQ(mkdir((images + "/templates").c_str(), 0755), 0);
    for (const char* part : {"kernel", "initramfs", "templates/base"}) {
      ASSERT_EQ(symlink((ImageDir() + "/" + part).c_str(), (images + "/" + part).c_str()), 0);
    }
    env_["AIRLOCK_IMAGE_DIR"] = images;
  }

  void TearDown() override {
    Unfill();
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    for (const auto& p : testing::ProcessesOf(dir_.path())) kill(p.pid, SIGKILL);
    if (mounted_ && umount2(state_.c_str(), 0) != 0) {
      ADD_FAILURE() << "umount " << state_ << ": " << strerror(errno);
      umount2(state_.c_str(), MNT_DETACH);
    }
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args, "", 300);
  }

  // Free is the space left on the state dir's filesystem, in bytes.
  uint64_t Free() {
    struct statvfs v;
    EXPECT_EQ(statvfs(state_.c_str(), &v), 0);
    return static_cast<uint64_t>(v.f_bavail) * v.f_frsize;
  }

  // Fill takes the state dir's space until `leave` bytes are free: a
  // filler file of that size at once, then 4 KiB blocks until none is left
  // when `leave` is 0.
  void Fill(uint64_t leave = 0) {
    uint64_t free = Free();
    ASSERT_GT(free, leave);
    CommandResult f = RunCommand({"fallocate", "-l", std::to_string(free - leave), Filler(0)});
    ASSERT_EQ(f.exit_code, 0) << f.err;
    if (leave == 0) {
      // dd stops at the first write the disk refuses.
      CommandResult dd = RunCommand({"dd", "if=/dev/zero", "of=" + Filler(1), "bs=4096"});
      EXPECT_NE(dd.err.find("No space left on device"), std::string::npos) << dd.err;
      ASSERT_EQ(Free(), 0u);
    }
  }

  void Unfill() {
    unlink(Filler(0).c_str());
    unlink(Filler(1).c_str());
  }

  std::string Filler(int i) { return absl::StrCat(state_, "/filler", i); }

  nlohmann::json Json(const std::vector<std::string>& args) {
    CommandResult r = Airlock(args);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out;
    return j;
  }

  // Listed is `ls --json` by name.
  std::map<std::string, nlohmann::json> Listed() {
    std::map<std::string, nlohmann::json> out;
    for (const auto& sb : Json({"ls", "--json"})) out[sb["name"].get<std::string>()] = sb;
    return out;
  }

  // The message a write of daemon `daemon`'s state file gets on a full disk.
  std::string FullDisk(const std::string& daemon) {
    return absl::StrCat("no space left on the disk holding ", state_, "/", daemon,
                        ".db (database or disk is full): free some space and try again");
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
  std::string state_;
  bool mounted_ = false;
};

TEST_F(DiskFullTest, SecretSetOnAFullDiskChangesNothingAndWorksWithRoomAgain) {
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  CommandResult first = Airlock({"secret", "set", "-g", "github", "-t", "ghp_first0000000000000000000000000000"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const nlohmann::json before = Json({"secret", "ls", "--json"});
  ASSERT_EQ(before.size(), 1u);

  Fill();
  CommandResult add = Airlock({"secret", "set", "-g", "anthropic", "-t", "sk-ant-full0000000000000000000000"});
  EXPECT_EQ(add.exit_code, 1);
  EXPECT_EQ(add.err, "airlock: " + FullDisk("secretsd") + "\n");
  EXPECT_EQ(add.out, "");
  // Replacing the stored one fails the same way and keeps it.
  CommandResult replace = Airlock({"secret", "set", "-g", "github", "-t", "ghp_second000000000000000000000000000"});
  EXPECT_EQ(replace.exit_code, 1);
  EXPECT_EQ(replace.err, "airlock: " + FullDisk("secretsd") + "\n");
  EXPECT_EQ(Json({"secret", "ls", "--json"}), before);

  // What is on the disk is what was there: secretsd, killed and started
  // again, reads it back unchanged.
  Unfill();
  pid_t secretsd = testing::DaemonPid(dir_.path() + "/run", "secretsd");
  ASSERT_GT(secretsd, 0);
  ASSERT_EQ(kill(secretsd, SIGKILL), 0);
  AwaitExit(secretsd, std::chrono::seconds(5));
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  EXPECT_EQ(Json({"secret", "ls", "--json"}), before);

  CommandResult again = Airlock({"secret", "set", "-g", "anthropic", "-t", "sk-ant-full0000000000000000000000"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "anthropic@global\n");
  nlohmann::json after = Json({"secret", "ls", "--json"});
  ASSERT_EQ(after.size(), 2u);
  EXPECT_EQ(after[0]["id"], "anthropic@global");
  EXPECT_EQ(after[1], before[0]);
}

TEST_F(DiskFullTest, CreateOnAFullDiskLeavesNoHalfSandboxAndWorksWithRoomAgain) {
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  const std::string disks = state_ + "/images/disks";
  const std::string tmp = state_ + "/images/tmp";

  // 1. Room for the state files but not for the base image's boot disk,
  // which the first create builds: the sandbox fails, with the reason.
  ASSERT_EQ(Files(disks), "") << "no boot disk is built before the first create";
  Fill(16 << 20);
  CommandResult small = Airlock({"create", "--name", "full1", "-m", "1g", "shell"});
  std::cout << "create with no room for the boot disk: " << small.err << std::flush;
  EXPECT_EQ(small.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(small.err, "No space left on device")) << small.err;
  auto listed = Listed();
  if (listed.count("full1")) {
    EXPECT_EQ(listed["full1"]["state"], "failed");
    EXPECT_TRUE(absl::StrContains(listed["full1"]["failure"].get<std::string>(),
                                  "No space left on device"))
        << listed["full1"]["failure"];
  }
  EXPECT_EQ(Files(disks), "") << "a half-made boot disk";
  EXPECT_EQ(Files(tmp), "") << "a half-written temporary";
  EXPECT_EQ(Files(state_ + "/sandboxes"), "") << "disk files of a sandbox that has none";
  Unfill();
  if (listed.count("full1")) {
    // With room, the failed sandbox starts (its disk is made now).
    CommandResult start = Airlock({"start", "full1"});
    EXPECT_EQ(start.exit_code, 0) << start.err;
  } else {
    CommandResult create = Airlock({"create", "--name", "full1", "-m", "1g", "shell"});
    EXPECT_EQ(create.exit_code, 0) << create.err;
  }
  EXPECT_EQ(Airlock({"exec", "full1", "--", "echo", "ok"}).out, "ok\n");
  ASSERT_EQ(Airlock({"rm", "-f", "full1"}).exit_code, 0);

  // 2. Room for the state files but not for the sandbox's disk (a qcow2
  // overlay of some 200 KiB over the boot disk): it fails with the reason
  // and leaves no disk file.
  Fill(128 << 10);
  CommandResult overlay = Airlock({"create", "--name", "full3", "-m", "1g", "shell"});
  std::cout << "create with no room for the overlay: " << overlay.err << std::flush;
  EXPECT_EQ(overlay.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(overlay.err, "No space left on device") ||
              absl::StrContains(overlay.err, FullDisk("secretsd")) ||
              absl::StrContains(overlay.err, FullDisk("vmmd")))
      << overlay.err;
  listed = Listed();
  if (listed.count("full3")) {
    EXPECT_EQ(listed["full3"]["state"], "failed");
    EXPECT_FALSE(listed["full3"]["failure"].get<std::string>().empty());
  }
  EXPECT_EQ(Files(state_ + "/sandboxes"), "") << "disk files of a sandbox that has none";
  EXPECT_EQ(Files(tmp), "");
  Unfill();
  if (listed.count("full3")) {
    CommandResult start = Airlock({"start", "full3"});
    EXPECT_EQ(start.exit_code, 0) << start.err;
    EXPECT_EQ(Airlock({"exec", "full3", "--", "echo", "ok"}).out, "ok\n");
  }
  Airlock({"rm", "-f", "full3"});

  // 3. Not one block free: the create is refused before anything is made.
  Fill();
  CommandResult full = Airlock({"create", "--name", "full2", "-m", "1g", "shell"});
  EXPECT_EQ(full.exit_code, 1);
  // vmmd says which daemon refused; secretsd, the first to write, says why.
  std::cout << "create on a full disk: " << full.err << std::flush;
  EXPECT_TRUE(absl::StartsWith(full.err, "airlock: secretsd ")) << full.err;
  EXPECT_TRUE(absl::EndsWith(full.err, ": " + FullDisk("secretsd") + "\n")) << full.err;
  EXPECT_EQ(std::count(full.err.begin(), full.err.end(), '\n'), 1) << full.err;
  listed = Listed();
  if (listed.count("full2")) {
    EXPECT_EQ(listed["full2"]["state"], "failed");
    EXPECT_FALSE(listed["full2"]["failure"].get<std::string>().empty());
  }
  struct stat st;
  EXPECT_NE(stat((state_ + "/sandboxes/full2").c_str(), &st), 0) << "a sandbox dir";
  EXPECT_EQ(Files(tmp), "");
  Unfill();
  CommandResult create = Airlock({"create", "--name", "full2", "-m", "1g", "shell"});
  EXPECT_EQ(create.exit_code, 0) << create.err;
  EXPECT_EQ(Airlock({"exec", "full2", "--", "echo", "ok"}).out, "ok\n");
  EXPECT_EQ(Airlock({"rm", "-f", "full2"}).exit_code, 0);
  EXPECT_EQ(Files(state_ + "/sandboxes"), "");
}

}  // namespace
}  // namespace airlock
