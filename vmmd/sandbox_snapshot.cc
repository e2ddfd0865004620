// SandboxManager's snapshots (snapshots.h): which snapshot a sandbox may
// start from, giving a new sandbox the snapshot's disk, restoring its
// memory at boot, and making a snapshot of an image after its first boot.

#include <signal.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/agent_link.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/boot_console.h"
#include "vmmd/guest_run.h"
#include "vmmd/images.h"
#include "vmmd/migration_stream.h"
#include "vmmd/qmp.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

// The file beside a new sandbox's disk that says the disk is a snapshot's
// copy, untouched, and names the snapshot.
constexpr char kRestoreMarker[] = "/restore.pending";
// How many snapshots are kept (each about a third of its guest's memory).
constexpr size_t kSnapshotsKept = 8;
// Tries of a snapshot whose VM boot hung, per key while vmmd runs.
constexpr int kSnapshotTries = 3;

// ScrubSnapshotGuest drops the page cache, dentries and inodes of the
// snapshot's guest at `agent_socket` and compacts its free memory, so
// that free page reporting returns them before the save. An error names
// the step that failed (a template without a shell fails the first).
absl::Status ScrubSnapshotGuest(const std::string& agent_socket) {
  AgentLink link(agent_socket);
  auto channel = link.Channel(seconds(10));
  if (!channel.ok()) return channel.status();
  for (const char* step : {"sync && echo 3 > /proc/sys/vm/drop_caches",
                           "echo 1 > /proc/sys/vm/compact_memory"}) {
    GuestCommand cmd;
    cmd.argv = {"sh", "-c", step};
    cmd.user = "root";
    auto ran = GuestRun(*channel, cmd);
    if (!ran.ok()) return ran.status();
    if (ran->first != 0) {
      return absl::InternalError(
          absl::StrCat("`", step, "`: exit ", ran->first, ": ", ran->second));
    }
  }
  return absl::OkStatus();
}

// SplitSnapshotMemory takes the guest's RAM out of the saved stream
// (`bytes` long, at snapshot.memory) into the sparse image snapshot.ram,
// synced, and leaves the rest of the stream at snapshot.memory.
absl::Status SplitSnapshotMemory(const Snapshot& snapshot, uint64_t bytes) {
  UniqueFd in(open(snapshot.memory.c_str(), O_RDONLY | O_CLOEXEC));
  if (in.get() < 0 || bytes == 0) {
    return absl::InternalError(absl::StrCat("cannot read the saved stream: ", strerror(errno)));
  }
  void* map = mmap(nullptr, bytes, PROT_READ, MAP_PRIVATE, in.get(), 0);
  if (map == MAP_FAILED) {
    return absl::InternalError(absl::StrCat("cannot map the saved stream: ", strerror(errno)));
  }
  UniqueFd ram(open(snapshot.ram.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  absl::StatusOr<SplitStream> split = absl::InternalError(
      absl::StrCat("cannot make ", snapshot.ram, ": ", strerror(errno)));
  if (ram.get() >= 0) {
    split = SplitGuestMemory(
        absl::string_view(static_cast<const char*>(map), bytes),
        [&](uint64_t offset, absl::string_view page) -> absl::Status {
          if (pwrite(ram.get(), page.data(), page.size(), static_cast<off_t>(offset)) !=
              static_cast<ssize_t>(page.size())) {
            return absl::InternalError(
                absl::StrCat("cannot write ", snapshot.ram, ": ", strerror(errno)));
          }
          return absl::OkStatus();
        });
  }
  munmap(map, bytes);
  if (!split.ok()) return split.status();
  if (ftruncate(ram.get(), static_cast<off_t>(split->ram_bytes)) != 0 || fsync(ram.get()) != 0) {
    return absl::InternalError(absl::StrCat("cannot sync ", snapshot.ram, ": ", strerror(errno)));
  }
  if (absl::Status s = ReplaceFile(snapshot.memory, split->devices, 0600); !s.ok()) return s;
  AIRLOCK_LOG_INFO("snapshot memory", {{"pages", std::to_string(split->pages)},
                                       {"zero_pages_left_out",
                                        std::to_string(split->zero_pages_dropped)},
                                       {"device_state_bytes",
                                        std::to_string(split->devices.size())}});
  return absl::OkStatus();
}

}  // namespace

std::string SandboxManager::SnapshotKeyFor(const vmm::Sandbox& sb, const std::string& base_disk,
                                           const std::string& accelerator) {
  if (!options_.snapshots || sb.spec().name().empty()) return "";
  VmConfig config = ConfigFor(sb);
  if (!Snapshottable(config, hypervisor_->HotplugShares())) return "";
  auto images = LocateGuestImages(options_.image_dir);
  if (!images.ok()) return "";
  config.kernel = images->kernel;
  config.initrd = images->initrd;
  config.accelerator = accelerator;
  std::string vm = hypervisor_->Describe(SnapshotVm(config, "", ""));
  if (vm.empty()) return "";
  return SnapshotKey({base_disk, images->kernel, images->initrd, vm});
}

bool SandboxManager::GiveSnapshotDisk(const std::string& name, const std::string& base_disk) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  std::string key = SnapshotKeyFor(sb, base_disk, Accelerator());
  if (key.empty()) return false;
  auto snapshot = snapshots_.Find(key);
  if (!snapshot) return false;
  std::string dir = SandboxDir(name);
  // The copy becomes the disk only when complete, and is marked after: a
  // crash leaves no disk (the sandbox is still being created), or an
  // unmarked copy (which boots).
  if (absl::Status s = CopySynced(snapshot->disk, dir + "/disk.qcow2"); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot copy the snapshot's disk; the sandbox boots",
                     {{"sandbox", name}, {"error", std::string(s.message())}});
    return false;
  }
  if (absl::Status s = ReplaceFile(dir + kRestoreMarker, key, 0600); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot mark the sandbox for restore; it boots",
                     {{"sandbox", name}, {"error", std::string(s.message())}});
  }
  return true;
}

std::string SandboxManager::TakeRestoreMarker(const vmm::Sandbox& sb) {
  std::string dir = SandboxDir(sb.spec().name());
  std::string path = dir + kRestoreMarker;
  std::string key = ReadFileToString(path);
  if (key.empty()) return "";
  // Taken, durably, before the VM starts: from then on the disk is the
  // sandbox's, and only a boot may use it (a marker back after a power
  // loss would restore old memory over a disk the guest wrote).
  if (unlink(path.c_str()) != 0) return "";
  UniqueFd dfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() < 0 || fsync(dfd.get()) != 0) return "";
  auto base = BootDiskFor(sb.spec().name(), sb.image());
  if (!base.ok() || SnapshotKeyFor(sb, *base, sb.accelerator()) != key || !snapshots_.Find(key)) {
    return "";
  }
  return key;
}

absl::Status SandboxManager::SendSnapshot(const std::string& key, const VmConfig& config) {
  auto snapshot = snapshots_.Find(key);
  if (!snapshot) return absl::NotFoundError("the snapshot is gone");
  auto deadline = steady_clock::now() + seconds(30);
  if (absl::Status s = SendStream(config.incoming_socket, snapshot->memory, deadline); !s.ok()) {
    return s;
  }
  auto qmp = QmpClient::Connect(config.qmp_socket, seconds(10));
  if (!qmp.ok()) return qmp.status();
  std::string status;
  while (steady_clock::now() < deadline) {
    auto info = qmp->Execute("query-status");
    if (!info.ok()) return info.status();
    status = info->value("status", "");
    if (status == "running") return absl::OkStatus();
    // "inmigrate" while the state loads; anything else is a failed load.
    if (status != "inmigrate") break;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return absl::UnavailableError(
      absl::StrCat("the restored VM is not running (QEMU says \"", status, "\")"));
}

absl::Status SandboxManager::ClaimGuest(const std::string& name,
                                        std::shared_ptr<grpc::Channel> channel, bool restored) {
  airlock::agent::v1::ClaimRequest claim;
  claim.set_hostname(name);
  std::string random(16 + 64, '\0');
  if (getrandom(random.data(), random.size(), 0) != static_cast<ssize_t>(random.size())) {
    return absl::InternalError(absl::StrCat("getrandom: ", strerror(errno)));
  }
  // The machine id is made at the first boot and kept for the sandbox's
  // life, as a machine's is.
  std::string machine_id;
  {
    std::lock_guard<std::mutex> lock(mu_);
    machine_id = records_[name].sb.machine_id();
  }
  if (machine_id.empty()) {
    machine_id = absl::BytesToHexString(random.substr(0, 16));
    if (absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) { sb.set_machine_id(machine_id); });
        !s.ok()) {
      return s;
    }
  }
  claim.set_machine_id(machine_id);
  claim.set_seed(random.substr(16));
  claim.set_unix_time_ns(std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count());
  auto stub = airlock::agent::v1::Agent::NewStub(channel);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + seconds(10));
  airlock::agent::v1::Empty empty;
  grpc::Status s = stub->Claim(&ctx, claim, &empty);
  // A cold boot's guest already has its hostname from the kernel command
  // line; an agent from before Claim leaves the rest as the image has it.
  if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED && !restored) return absl::OkStatus();
  if (!s.ok()) {
    return absl::UnavailableError(
        absl::StrCat("the guest did not take its identity: ", s.error_message()));
  }
  return absl::OkStatus();
}

void SandboxManager::MaybeSnapshot(const std::string& name) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  auto base = BootDiskFor(name, sb.image());
  if (!base.ok()) return;
  std::string key = SnapshotKeyFor(sb, *base, sb.accelerator());
  if (key.empty() || snapshots_.Find(key)) return;
  {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    // One attempt per key while vmmd runs: a shape QEMU cannot save is
    // not booted again and again.
    if (snapshot_building_ || stopping_ || snapshot_tried_[key] >= kSnapshotTries) return;
    snapshot_building_ = true;
    ++snapshot_tried_[key];
  }
  VmConfig config = ConfigFor(sb);
  auto images = LocateGuestImages(options_.image_dir);
  if (!images.ok()) {
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    snapshot_building_ = false;
    return;
  }
  config.kernel = images->kernel;
  config.initrd = images->initrd;
  std::string base_disk = *base;
  StartWorker([this, key, config, base_disk] {
    auto begun = steady_clock::now();
    bool boot_hung = false;
    auto size = BuildSnapshot(key, config, base_disk, &boot_hung);
    if (size.ok()) {
      AIRLOCK_LOG_INFO("snapshot made: new sandboxes of this image restore it",
                       {{"key", key.substr(0, 12)},
                        {"bytes", std::to_string(*size)},
                        {"ms", std::to_string(std::chrono::duration_cast<milliseconds>(
                                                   steady_clock::now() - begun)
                                                   .count())}});
    } else if (!stopping_) {
      AIRLOCK_LOG_WARN("cannot make a snapshot; sandboxes of this image boot",
                       {{"key", key.substr(0, 12)}, {"error", std::string(size.status().message())}});
    }
    std::lock_guard<std::mutex> lock(snapshot_mu_);
    snapshot_building_ = false;
    // Only a boot that hung is worth another try (by the next sandbox of
    // the image): a VM QEMU cannot save fails the same way every time.
    if (!boot_hung) snapshot_tried_[key] = kSnapshotTries;
  });
}

void SandboxManager::AllowSnapshotRemake(const std::string& key) {
  std::lock_guard<std::mutex> lock(snapshot_mu_);
  if (snapshot_remade_.insert(key).second) {
    snapshot_tried_[key] = std::min(snapshot_tried_[key], kSnapshotTries - 1);
  }
}

absl::StatusOr<uint64_t> SandboxManager::BuildSnapshot(const std::string& key,
                                                       const VmConfig& sandbox_config,
                                                       const std::string& base_disk,
                                                       bool* boot_hung) {
  auto snapshot = snapshots_.Begin(key);
  if (!snapshot.ok()) return snapshot.status();
  VmConfig config = SnapshotVm(sandbox_config, snapshot->dir, jails_.SocketDir(kSnapshotVmName));
  config.qmp_socket = config.socket_dir + "/qmp.sock";
  config.die_with_vmmd = true;
  config.jail_uid = 0;
  pid_t pid = 0;
  auto cleanup = [&] {
    if (pid > 0) {
      kill(pid, SIGKILL);
      // The VM is this thread's child when jailed (die_with_vmmd); else
      // detached, and its process only has to be gone.
      if (config.jail_uid != 0) {
        waitpid(pid, nullptr, 0);
      } else {
        AwaitExit(pid, seconds(5));
      }
    }
    if (jails_.enabled()) jails_.Teardown(kSnapshotVmName);
    std::lock_guard<std::mutex> lock(mu_);
    snapshot_jail_uid_ = 0;
  };
  auto fail = [&](absl::Status s) -> absl::Status {
    cleanup();
    snapshots_.Abandon(key);
    return s;
  };
  if (absl::Status s = CreateOverlay(base_disk, config.disk); !s.ok()) return fail(s);
  if (absl::Status s = MakeDirs(config.socket_dir, 0700); !s.ok()) return fail(s);
  if (jails_.enabled()) {
    std::lock_guard<std::mutex> lock(mu_);
    auto uid = jails_.Assign(0, JailUidsInUseLocked(""));
    if (!uid.ok()) return fail(uid.status());
    config.jail_uid = snapshot_jail_uid_ = *uid;
  }
  if (config.jail_uid != 0) {
    if (absl::Status s = jails_.Prepare(config); !s.ok()) return fail(s);
  }
  auto launched = hypervisor_->Launch(config);
  if (!launched.ok()) return fail(launched.status());
  pid = *launched;
  auto deadline = steady_clock::now() + seconds(options_.boot_timeout_s);
  BootWatcher watch(pid, config.console_log, &options_.hang_limits);
  while (true) {
    if (stopping_) return fail(absl::CancelledError("vmmd is stopping"));
    if (!ProcessAlive(pid)) {
      return fail(absl::UnavailableError(absl::StrCat(
          "the snapshot's VM exited during boot: ", ReadFileToString(config.vmm_log))));
    }
    BootConsole read = watch.Read();
    if (read.state == BootConsole::State::kReady) break;
    // A boot found halted before the deadline is a hung boot too (tried
    // again later).
    bool halted = read.state == BootConsole::State::kHalted;
    if (steady_clock::now() > deadline || halted) {
      *boot_hung = true;
      // The console says how far the guest got (the agent names a boot
      // step that hangs).
      std::string what =
          halted ? read.why : absl::StrCat("it did not boot in ", options_.boot_timeout_s, " s");
      return fail(absl::DeadlineExceededError(absl::StrCat(
          "the snapshot's VM hangs: ", what, "; its console ended: ",
          FileTail(config.console_log, 8))));
    }
    std::this_thread::sleep_for(milliseconds(50));
  }
  // The boot's page cache, dentries and inodes would be restored into
  // every sandbox (and held by it): they are dropped, and free memory is
  // compacted so that what they held forms whole blocks, the unit free
  // page reporting hands back. Not fatal: an image without a shell keeps
  // them.
  if (absl::Status s = ScrubSnapshotGuest(config.agent_socket); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot drop the snapshot guest's caches or compact it; it is saved as is",
                     {{"key", key.substr(0, 12)}, {"error", std::string(s.message())}});
  }
  // What the guest freed (at boot: the initramfs, the kernel's init
  // memory; and the caches just dropped) reaches the host through free
  // page reporting about 2 s later; saved before that, it would be
  // restored into every sandbox.
  for (int i = 0; i < 40 && !stopping_; ++i) std::this_thread::sleep_for(milliseconds(100));
  auto qmp = QmpClient::Connect(config.qmp_socket, seconds(10));
  if (!qmp.ok()) return fail(qmp.status());
  // The guest is idle, so a live migration converges at once; saved
  // running, the restored VM runs as soon as its state is in.
  auto params = qmp->Execute("migrate-set-parameters", {{"max-bandwidth", int64_t{1} << 40}});
  if (!params.ok()) return fail(params.status());
  std::string save_socket = config.socket_dir + "/save.sock";
  auto listener = ListenUnix(save_socket, config.jail_uid);
  if (!listener.ok()) return fail(listener.status());
  UniqueFd listen_fd(*listener);
  auto started = qmp->Execute("migrate", {{"uri", "unix:" + save_socket}});
  if (!started.ok()) return fail(started.status());
  auto bytes = ReceiveStream(listen_fd.get(), snapshot->memory, steady_clock::now() + seconds(120),
                             [this] { return stopping_.load(); });
  if (!bytes.ok()) return fail(bytes.status());
  // The guest's RAM leaves the stream for a sparse image of its own, which
  // a restore copies in the kernel (memory_image.h). A stream this cannot
  // read makes no snapshot.
  if (absl::Status s = SplitSnapshotMemory(*snapshot, *bytes); !s.ok()) return fail(s);
  std::string status;
  for (int i = 0; i < 200 && status != "completed" && !stopping_; ++i) {
    auto info = qmp->Execute("query-migrate");
    if (!info.ok()) return fail(info.status());
    status = info->value("status", "");
    if (status == "failed" || status == "cancelled") {
      return fail(absl::InternalError(absl::StrCat("QEMU's migration ", status, ": ",
                                                   info->value("error-desc", ""))));
    }
    if (status != "completed") std::this_thread::sleep_for(milliseconds(50));
  }
  if (status != "completed") return fail(absl::DeadlineExceededError("the migration did not finish"));
  // The VM's jail ids go back to the pool and may become a sandbox's: the
  // snapshot's files are vmmd's alone before they do.
  for (const std::string& f : {snapshot->disk, snapshot->memory, snapshot->ram}) {
    if ((geteuid() == 0 && chown(f.c_str(), 0, 0) != 0) || chmod(f.c_str(), 0600) != 0) {
      return fail(absl::InternalError(
          absl::StrCat("cannot make ", f, " vmmd's alone: ", strerror(errno))));
    }
  }
  // The source is paused with its disk flushed; its process goes, and the
  // disk is the snapshot's as it stands.
  cleanup();
  pid = 0;
  unlink(config.console_log.c_str());
  unlink(config.vmm_log.c_str());
  if (absl::Status s = snapshots_.Commit(key, kSnapshotsKept); !s.ok()) {
    snapshots_.Abandon(key);
    return s;
  }
  // The commit may have pushed out the oldest snapshot.
  RetireGoneWarmVms();
  return *bytes;
}

void SandboxManager::RecoverSnapshots() {
  // No snapshot is being made: a VM a previous vmmd left making one (not
  // jailed, so not dead with it) and its half-made files go.
  for (pid_t p : ProcessesMatching(snapshots_.dir() + "/")) kill(p, SIGKILL);
  snapshots_.RemovePartials();
  if (jails_.enabled()) jails_.Teardown(kSnapshotVmName);
}

}  // namespace airlock::vmmd
