// SandboxManager's boot: the accelerator, the sandbox's disk, the jail, the
// hypervisor and virtiofsd processes, and waiting for the agent (mounts,
// clone, egress, Docker, kits) until the sandbox is RUNNING; finding and
// killing a sandbox's VM.

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/boot_console.h"
#include "vmmd/docker_setup.h"
#include "vmmd/images.h"
#include "vmmd/sandbox_manager.h"
#include "vmmd/sandbox_metadata.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

// How long a restored guest's agent waits for a share plugged into its VM
// to appear (the guest's PCIe hot-plug: about 0.2 s under TCG).
constexpr uint32_t kHotplugMountWaitMs = 10000;

}  // namespace

std::string SandboxManager::Accelerator() {
  std::lock_guard<std::mutex> lock(accel_mu_);
  if (!accelerator_.empty()) return accelerator_;
  if (options_.accelerator != "auto") return accelerator_ = options_.accelerator;
  auto images = LocateGuestImages(options_.image_dir);
  if (!images.ok()) return "tcg";
  // One probe per host boot, guest kernel and QEMU build: the answer
  // cannot change otherwise.
  std::string boot_id = ReadFileToString("/proc/sys/kernel/random/boot_id");
  struct stat st {};
  stat(images->kernel.c_str(), &st);
  std::string key = absl::StrCat("accel:", boot_id.substr(0, 36), ":", images->release, ":",
                                  st.st_mtime, ":", hypervisor_->Build());
  auto cached = store_->Setting(key);
  if (cached.ok() && !cached->empty()) return accelerator_ = *cached;
  AIRLOCK_LOG_INFO("probing KVM");
  auto [accel, why] = hypervisor_->ProbeAccelerator(images->kernel, images->initrd,
                                                    options_.state_dir);
  AIRLOCK_LOG_INFO("accelerator chosen", {{"accelerator", accel}, {"reason", why}});
  // Without the cache the next vmmd start probes again; nothing else.
  if (absl::Status s = store_->SetSetting(key, accel); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot cache the accelerator verdict", {{"error", std::string(s.message())}});
  }
  return accelerator_ = accel;
}

absl::Status SandboxManager::PrepareDisk(const std::string& name) {
  std::string dir = SandboxDir(name);
  if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot prepare the disk: ", s.message()));
  }
  vmm::ImageRef image;
  {
    std::lock_guard<std::mutex> lock(mu_);
    image = records_[name].sb.image();
  }
  // A built-in agent's image that did not exist at create is made first.
  if (image.digest().empty() && !image.name().empty()) {
    auto installed = InstallAgentImage(name);
    if (!installed.ok()) return installed.status();
    image = *installed;
    if (absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) { *sb.mutable_image() = image; });
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::string> base = BootDiskFor(name, image);
  absl::Status s = base.status();
  if (s.ok()) {
    vmm::SandboxSpec spec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      spec = records_[name].sb.spec();
    }
    if (HasDocker(spec)) s = MakeDockerDisk(dir + "/docker.img", spec.docker_disk_mib());
    // The snapshot's disk when there is one; else a plain overlay.
    if (s.ok() && !GiveSnapshotDisk(name, *base)) s = CreateOverlay(*base, dir + "/disk.qcow2");
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot prepare the disk: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SandboxManager::BootDiskFor(const std::string& name,
                                                        const vmm::ImageRef& image) {
  // Sandboxes recorded before the image store name no image: the base.
  vmm::ImageRef ref = image;
  if (ref.digest().empty()) {
    auto base = images_->Resolve("");
    if (!base.ok()) return base.status();
    ref = ImageCatalog::RefOf(*base, "");
  }
  return images_->BootDisk(ref, [&](const std::string& what, uint64_t, uint64_t) {
    SetProgress(name, what);
  });
}

void SandboxManager::Boot(const std::string& name, bool launch) {
  absl::Status s = BootSteps(name, launch);
  if (!s.ok()) {
    vmm::Sandbox sb;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sb = records_[name].sb;
    }
    KillVm(sb);
    {
      // A reattach that failed no longer holds anyone up: a connection
      // to its ports waiting for the agent (AgentChannel) ends now, so
      // closing them below does not wait for it.
      std::lock_guard<std::mutex> lock(mu_);
      records_[name].reattaching = false;
      changed_.notify_all();
    }
    // Ports open just before RUNNING (a reattach's, when vmmd started); a
    // failure after them closes them.
    ClosePorts(name);
    bool cancelled = s.code() == absl::StatusCode::kCancelled;
    UpdateOrWarn(name, "", [&](vmm::Sandbox& sb) {
      sb.set_state(cancelled ? vmm::STOPPED : vmm::FAILED);
      sb.set_failure(cancelled ? "" : std::string(s.message()));
      sb.set_vmm_pid(0);
    });
    if (!cancelled) {
      AIRLOCK_LOG_WARN("boot failed", {{"sandbox", name}, {"reason", std::string(s.message())}});
    }
  }
  End(name);
}

absl::Status SandboxManager::BootSteps(const std::string& name, bool launch) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  pid_t pid = static_cast<pid_t>(sb.vmm_pid());
  if (launch) {
    // A fresh boot arms a fresh deadline when it is running.
    if (sb.expires_at() != 0) {
      UpdateOrWarn(name, "", [](vmm::Sandbox& s) { s.set_expires_at(0); });
    }
    auto images = LocateGuestImages(options_.image_dir);
    if (!images.ok()) return images.status();
    struct stat st;
    if (stat((SandboxDir(name) + "/disk.qcow2").c_str(), &st) != 0) {
      // A create that never made the disk (vmmd stopped meanwhile, an agent
      // install failed) makes it now; the image may have changed with it.
      if (absl::Status s = PrepareDisk(name); !s.ok()) return s;
      std::lock_guard<std::mutex> lock(mu_);
      sb = records_[name].sb;
    }
    // A docker disk whose making was cut short is made now (an existing
    // one is the engine's state and kept).
    if (HasDocker(sb.spec())) {
      if (absl::Status s = MakeDockerDisk(SandboxDir(name) + "/docker.img",
                                          sb.spec().docker_disk_mib());
          !s.ok()) {
        return s;
      }
    }
    SetProgress(name, "choosing accelerator");
    std::string accel = Accelerator();
    sb.set_accelerator(accel);
    if (absl::Status s = AssignJail(name, sb); !s.ok()) return s;
    VmConfig config = ConfigFor(sb);
    config.kernel = images->kernel;
    config.initrd = images->initrd;
    // A new sandbox whose disk is its snapshot's copy restores the
    // snapshot's memory instead of booting.
    std::string restore_key = TakeRestoreMarker(sb);
    auto snapshot = restore_key.empty() ? std::nullopt : snapshots_.Find(restore_key);
    // The shape the warm pool refills with, once this sandbox runs.
    VmConfig shape = config;
    if (snapshot) {
      // A VM restored from the snapshot ahead of need, when there is one.
      absl::Status claimed = ClaimWarmVm(name, restore_key, images->release, accel);
      if (claimed.ok()) RefillWarmPool(restore_key, shape);
      if (claimed.code() != absl::StatusCode::kNotFound &&
          claimed.code() != absl::StatusCode::kAborted) {
        return claimed;
      }
      if (claimed.code() == absl::StatusCode::kAborted) {
        // What of the warm VM moved (its disk, maybe its jail's ids when its
        // VM died after the claim) is the sandbox's now, and boots.
        {
          std::lock_guard<std::mutex> lock(mu_);
          sb = records_[name].sb;
        }
        KillVm(sb);
        sb.set_pool_slot("");
        sb.set_accelerator(accel);
        config = ConfigFor(sb);
        config.kernel = images->kernel;
        config.initrd = images->initrd;
        restore_key.clear();
        snapshot.reset();
      }
    }
    if (snapshot) {
      config.hostname = kSnapshotHostname;
      config.incoming_socket = config.socket_dir + "/incoming.sock";
      config.qmp_socket = config.socket_dir + "/qmp.sock";
      config.memory_image = snapshot->ram;
    } else {
      restore_key.clear();
    }
    // The previous boot's console is kept beside the new one.
    rename(config.console_log.c_str(), (config.console_log + ".1").c_str());
    if (absl::Status s = MakeDirs(config.socket_dir, 0700); !s.ok()) return s;
    if (config.jail_uid != 0) {
      if (absl::Status s = jails_.Prepare(config); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("cannot prepare the jail: ", s.message()));
      }
    }
    unlink(config.agent_socket.c_str());
    unlink(config.egress_socket.c_str());
    unlink(config.incoming_socket.c_str());
    unlink(config.qmp_socket.c_str());
    unlink(config.vmm_log.c_str());
    if (absl::Status fs = StartShares(sb, config); !fs.ok()) return fs;
    // A restored VM has no share at its start (a snapshot cannot hold
    // one): they are plugged in once it runs (WaitForAgent).
    VmConfig restoring = config;
    restoring.shares.clear();
    auto launched = hypervisor_->Launch(restore_key.empty() ? config : restoring);
    if (!launched.ok() && !restore_key.empty()) {
      // The snapshot went, or its memory cannot be copied: the disk boots.
      AIRLOCK_LOG_WARN("cannot start the restore; booting instead",
                       {{"sandbox", name}, {"error", std::string(launched.status().message())}});
      restore_key.clear();
      config.hostname.clear();
      config.incoming_socket.clear();
      config.qmp_socket.clear();
      config.memory_image.clear();
      launched = hypervisor_->Launch(config);
    }
    if (!launched.ok()) return launched.status();
    pid = *launched;
    // A restore that did not take: the VM goes and the sandbox boots its
    // disk (no guest has run on it, or one crashed: either boots).
    auto boot_instead = [&]() -> absl::Status {
      KillVm(sb);
      // What the VM that goes printed is kept beside the new console (a
      // copy: a jailed VM's console is bound into its jail by its path).
      std::ofstream(config.console_log + ".1", std::ios::trunc)
          << ReadFileToString(config.console_log);
      // A virtiofsd ends with the VM it served: the boot gets new ones.
      if (absl::Status fs = StartShares(sb, config); !fs.ok()) return fs;
      config.hostname.clear();
      config.incoming_socket.clear();
      config.qmp_socket.clear();
      config.memory_image.clear();
      auto relaunched = hypervisor_->Launch(config);
      if (!relaunched.ok()) return relaunched.status();
      pid = *relaunched;
      return absl::OkStatus();
    };
    // Only a snapshot QEMU could not load, or whose guest panicked, goes
    // (RestoreCondemnsSnapshot); one whose VM died otherwise (killed, out
    // of memory) stays. The VM has exited or is about to (QEMU ends on a
    // failed load, and on a panic's reboot): its files are read after.
    auto drop_if_broken = [&]() -> bool {
      AwaitExit(pid, seconds(1));
      bool broken = RestoreCondemnsSnapshot(ReadFileToString(config.vmm_log),
                                            ReadFileToString(config.console_log));
      if (broken) {
        snapshots_.Remove(restore_key);
        RetireGoneWarmVms();
        AllowSnapshotRemake(restore_key);
      }
      return broken;
    };
    if (!restore_key.empty()) {
      SetProgress(name, "restoring snapshot");
      if (absl::Status rs = SendSnapshot(restore_key, config); !rs.ok()) {
        bool removed = drop_if_broken();
        AIRLOCK_LOG_WARN("cannot restore the snapshot; booting instead",
                         {{"sandbox", name}, {"error", std::string(rs.message())},
                          {"snapshot_removed", removed ? "yes" : "no"},
                          {"vmm_log", ReadFileToString(config.vmm_log)},
                          {"console", FileTail(config.console_log, 20)}});
        restore_key.clear();
        if (absl::Status bs = boot_instead(); !bs.ok()) return bs;
      }
    }
    bool restored = !restore_key.empty();
    absl::Status s = Update(name, restored ? "" : "booting kernel", [&](vmm::Sandbox& sb) {
      sb.set_state(vmm::STARTING);
      sb.set_failure("");
      sb.set_accelerator(accel);
      sb.set_vmm_pid(pid);
      sb.set_kernel(images->release);
      sb.set_started_from(restored ? "restore" : "boot");
      sb.set_pool_slot("");
    });
    if (!s.ok()) return s;
    // A boot that hangs (its VM sits halted) is booted once more (its VM
    // goes with its shares' servers) rather than waited on to the
    // deadline.
    auto wait_booted = [&]() -> absl::Status {
      bool hung = false;
      absl::Status ws = WaitForAgent(name, pid, launch, /*restored=*/false, nullptr, &hung);
      if (!hung) return ws;
      AIRLOCK_LOG_WARN("the guest's boot hangs; booting again",
                       {{"sandbox", name}, {"error", std::string(ws.message())}});
      if (absl::Status bs = boot_instead(); !bs.ok()) return bs;
      if (absl::Status us = Update(name, "booting kernel again",
                                   [&](vmm::Sandbox& sb) { sb.set_vmm_pid(pid); });
          !us.ok()) {
        return us;
      }
      return WaitForAgent(name, pid, launch);
    };
    if (!restored) return wait_booted();
    s = WaitForAgent(name, pid, launch, /*restored=*/true);
    if (s.ok()) RefillWarmPool(restore_key, shape);
    if (s.code() != absl::StatusCode::kAborted) return s;
    // QEMU exited before the agent answered, or the VM could not take the
    // sandbox's shares: the sandbox boots its disk (as after any crash).
    bool removed = !ProcessAlive(pid) && drop_if_broken();
    // The boot that follows starts the console again: what the restored
    // guest printed (a panic's reason) is kept here.
    AIRLOCK_LOG_WARN("the restored VM did not come up as the sandbox; booting",
                     {{"sandbox", name}, {"error", std::string(s.message())},
                      {"snapshot_removed", removed ? "yes" : "no"},
                      {"vmm_log", ReadFileToString(config.vmm_log)},
                      {"console", FileTail(config.console_log, 20)}});
    if (absl::Status bs = boot_instead(); !bs.ok()) return bs;
    s = Update(name, "booting kernel", [&](vmm::Sandbox& sb) {
      sb.set_vmm_pid(pid);
      sb.set_started_from("boot");
      sb.set_pool_slot("");
    });
    if (!s.ok()) return s;
    return wait_booted();
  }
  return WaitForAgent(name, pid, launch);
}

absl::Status SandboxManager::WaitForAgent(const std::string& name, pid_t pid,
                                          bool mount_shares, bool restored,
                                          std::shared_ptr<AgentLink> link, bool* hung) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  VmConfig config = ConfigFor(sb);
  auto deadline = steady_clock::now() + seconds(options_.boot_timeout_s);
  // A boot launched just now is watched for a hang too.
  BootWatcher watch(pid, config.console_log, hung != nullptr ? &options_.hang_limits : nullptr);
  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return records_[name].cancel || stopping_;
  };
  // The agent announces on the console that its port is open; connecting
  // earlier would queue bytes for a guest that is not listening yet.
  // A restored guest's agent came up in the snapshot's VM: its console
  // never shows the marker (reattaching after a vmmd restart included;
  // a warm VM's is a restored guest too).
  bool ready = restored || sb.started_from() == "restore" || sb.started_from() == "pool";
  while (!ready) {
    if (cancelled()) return absl::CancelledError("boot cancelled");
    if (!ProcessAlive(pid)) {
      return absl::UnavailableError(FailureReason(name, "the hypervisor exited during boot"));
    }
    BootConsole read = watch.Read();
    if (read.state == BootConsole::State::kFailed) {
      return absl::UnavailableError(
          FailureReason(name, read.failure + AgentFailureHint(read.failure)));
    }
    if (read.state == BootConsole::State::kHalted) {
      *hung = true;
      return absl::DeadlineExceededError(FailureReason(name, read.why));
    }
    ready = read.state == BootConsole::State::kReady;
    if (steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(FailureReason(
          name, absl::StrCat("the guest agent did not start within ", options_.boot_timeout_s,
                             " s")));
    }
    if (!ready) std::this_thread::sleep_for(milliseconds(20));
  }
  // A restored VM's shares' devices are plugged in first: the guest takes
  // the hot-plug while its agent is greeted and claimed. No byte of them
  // reaches it before its Claim (virtiofs says nothing until mounted, and
  // the mounts come after). A VM that cannot take them goes, and the
  // sandbox boots its disk with them (the caller, on ABORTED, says why).
  if (mount_shares && restored) {
    if (absl::Status as = AttachShares(sb); !as.ok()) {
      return absl::AbortedError(FailureReason(
          name, absl::StrCat("cannot add the shared paths to the restored VM: ", as.message())));
    }
  }
  SetProgress(name, "waiting for agent");
  // A guest restored just now may take the first hello for bytes of the
  // snapshot VM's last connection: it is said again soon (its agent is of
  // this release; one reattached to may be older).
  if (link == nullptr) {
    link = std::make_shared<AgentLink>(config.agent_socket,
                                       restored ? milliseconds(100) : seconds(3));
  }
  std::string last;
  while (steady_clock::now() < deadline) {
    if (cancelled()) return absl::CancelledError("boot cancelled");
    if (!ProcessAlive(pid)) {
      // QEMU refusing a snapshot's state exits before the guest ran: the
      // caller boots instead.
      if (restored) return absl::AbortedError(FailureReason(name, "the restore failed"));
      return absl::UnavailableError(FailureReason(name, "the hypervisor exited during boot"));
    }
    auto channel = link->Channel(seconds(10));
    if (!channel.ok()) {
      last = std::string(channel.status().message());
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    auto stub = airlock::agent::v1::Agent::NewStub(*channel);
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    airlock::agent::v1::PingResponse pong;
    grpc::Status s = stub->Ping(&ctx, {}, &pong);
    if (s.ok() && mount_shares) {
      // Before anything of the sandbox's reaches the guest (a restored
      // VM's share devices are plugged in, but nothing of them is read).
      if (absl::Status cs = ClaimGuest(name, *channel, restored); !cs.ok()) {
        return absl::UnavailableError(FailureReason(name, std::string(cs.message())));
      }
    }
    if (s.ok() && mount_shares) {
      for (const Share& share : SharesOf(sb)) {
        grpc::ClientContext mctx;
        DeadlineAfter(mctx, seconds(30));
        airlock::agent::v1::MountRequest mr;
        mr.set_tag(share.tag);
        mr.set_path(share.guest_path);
        mr.set_read_only(share.mount.read_only());
        mr.set_file(share.file);
        // A share plugged into the running VM is there once the guest has
        // taken the hot-plug.
        if (restored) mr.set_wait_ms(kHotplugMountWaitMs);
        airlock::agent::v1::Empty empty;
        grpc::Status ms = stub->Mount(&mctx, mr, &empty);
        if (!ms.ok()) {
          // A restored guest that did not take a plugged-in share goes, and
          // its disk boots (the caller, on ABORTED, says why).
          return absl::Status(
              restored ? absl::StatusCode::kAborted : absl::StatusCode::kUnavailable,
              FailureReason(name, absl::StrCat("cannot mount ", share.mount.host_path(),
                                               " in the guest: ", ms.error_message())));
        }
      }
    }
    if (s.ok() && mount_shares && sb.spec().clone()) {
      SetProgress(name, "cloning the source");
      if (absl::Status cs = SetUpClone(sb, *channel); !cs.ok()) {
        return absl::FailedPreconditionError(FailureReason(name, std::string(cs.message())));
      }
    }
    if (s.ok()) {
      SetProgress(name, "attaching egress");
      if (absl::Status es = AttachEgress(name, config); !es.ok()) {
        // A reattach finds a guest that was RUNNING, so proxyd attached its
        // egress at the boot and keeps that in its own store: a proxyd that
        // is down now attaches it again when it starts. The guest reaches
        // nothing until then (egress fails closed), and it is not lost.
        if (mount_shares || !PeerDown(es)) {
          return absl::UnavailableError(FailureReason(name, std::string(es.message())));
        }
        AIRLOCK_LOG_WARN("reattached without proxyd; it attaches the egress when it starts",
                         {{"sandbox", name}, {"error", std::string(es.message())}});
      }
      // On a live guest (vmmd restarted) this finds the engine running, or
      // starts it when the restart came before it did.
      if (HasDocker(sb.spec())) {
        SetProgress(name, "starting dockerd");
        if (absl::Status ds = StartDocker(name, *channel); !ds.ok()) {
          return absl::Status(ds.code(), FailureReason(name, std::string(ds.message())));
        }
      }
      if (mount_shares) {
        if (absl::Status ks = ApplyKitsAtBoot(name, *channel); !ks.ok()) {
          return absl::Status(ks.code(), FailureReason(name, std::string(ks.message())));
        }
      } else if (sb.has_kit_plan()) {
        // Reattaching (vmmd restarted under a live guest): an install cut
        // short cannot be resumed; a finished one means runtime rules.
        if (!sb.kit_installed()) {
          return absl::FailedPreconditionError(FailureReason(
              name, "vmmd restarted while the kits' install hooks ran; start the sandbox again "
                    "(`airlock stop` then `airlock start`) to rerun them"));
        }
        // RUNNING came after policyd and secretsd took the runtime phase,
        // which they keep in their stores: this only says it again, and a
        // peer that is down now does not end a running sandbox.
        if (absl::Status ps = SetKitPhase(name, sb.kit_plan(), "runtime"); !ps.ok()) {
          if (!PeerDown(ps)) {
            return absl::Status(ps.code(), FailureReason(name, std::string(ps.message())));
          }
          AIRLOCK_LOG_WARN("reattached without confirming the kits' runtime phase; the peers "
                           "keep it, and it is said again until they answer",
                           {{"sandbox", name}, {"error", std::string(ps.message())}});
          std::lock_guard<std::mutex> lock(mu_);
          records_[name].kit_sync.Ended(false, time(nullptr));
        }
      }
      {
        // The agent answers: exec need not wait for the ports and remote.
        std::lock_guard<std::mutex> lock(mu_);
        records_[name].agent = link;
        records_[name].reattaching = false;
        changed_.notify_all();
      }
      // RUNNING comes after what the sandbox publishes: its ports listen,
      // and a clone's `sandbox-NAME` remote is in the host repo unless gitd
      // was down (then the monitor retries it). A caller that saw RUNNING
      // and then read the repo saw it change under it.
      // (A reattach's ports listen since vmmd started: opened again, they
      // would cut what connected meanwhile.)
      if (mount_shares) OpenPorts(name);
      if (sb.spec().clone()) PublishClone(name);
      absl::Status st = Update(name, "", [&](vmm::Sandbox& sb) {
        sb.set_state(vmm::RUNNING);
        sb.set_kernel(pong.kernel());
        // Armed once per boot: a reattach after a vmmd restart keeps it.
        if (sb.expires_at() == 0) sb.set_expires_at(ArmedExpiry(sb.spec(), time(nullptr)));
      });
      if (st.ok()) {
        // The first boot of an image (in this shape) makes the snapshot
        // the next sandboxes of it restore.
        if (mount_shares && !restored) MaybeSnapshot(name);
      }
      return st;
    }
    last = s.error_message();
    link->Reset();
  }
  return absl::DeadlineExceededError(
      FailureReason(name, absl::StrCat("the guest agent does not answer: ", last)));
}

absl::Status SandboxManager::AttachEgress(const std::string& name, const VmConfig& config) {
  return peers_.proxy->Attach(name, config.egress_socket);
}

void SandboxManager::DetachEgress(const std::string& name) {
  // Best effort: proxyd drops an attachment whose channel closes anyway.
  if (absl::Status s = peers_.proxy->Detach(name); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot detach egress from proxyd",
                     {{"sandbox", name}, {"error", std::string(s.message())}});
  }
}

std::string SandboxManager::FailureReason(const std::string& name, const std::string& what) const {
  std::string dir = SandboxDir(name);
  std::string out = what;
  std::string vmm_log = FileTail(dir + "/vmm.log", 5);
  if (!vmm_log.empty()) absl::StrAppend(&out, "\nhypervisor log:\n", vmm_log);
  // A share's server that stalls stalls the guest (QEMU waits for its
  // answers): its log belongs beside the console's.
  for (int i = 0;; ++i) {
    std::string path = absl::StrCat(dir, "/virtiofsd", i, ".log");
    if (access(path.c_str(), F_OK) != 0) break;
    std::string log = FileTail(path, 5);
    if (!log.empty()) absl::StrAppend(&out, "\nshare ", i, " server log (", path, "):\n", log);
  }
  absl::StrAppend(&out, "\nconsole (", dir, "/console.log):\n", FileTail(dir + "/console.log", 15));
  return out;
}

std::string SandboxManager::VmMarker(const vmm::Sandbox& sb) const {
  if (!sb.pool_slot().empty()) return WarmMarker(sb.pool_slot());
  return hypervisor_->Marker(ConfigFor(sb));
}

pid_t SandboxManager::FindVm(const vmm::Sandbox& sb) const {
  std::string marker = VmMarker(sb);
  pid_t pid = static_cast<pid_t>(sb.vmm_pid());
  if (pid > 0 && ProcessAlive(pid) &&
      ProcessCmdline(pid).find(marker) != std::string::npos) {
    return pid;
  }
  std::vector<pid_t> found = ProcessesMatching(marker);
  return found.empty() ? 0 : found.front();
}

void SandboxManager::KillVm(const vmm::Sandbox& sb) {
  std::string marker = VmMarker(sb);
  std::vector<pid_t> pids = ProcessesMatching(marker);
  for (const Share& share : SharesOf(sb)) {
    for (pid_t p : ProcessesMatching("--socket-path=" + share.socket)) pids.push_back(p);
  }
  // Waited for until gone (up to 30 s each): a QEMU still tearing down its
  // memory holds the disk's lock, and a boot that follows would fail on it
  // (seen under load on a nested host, where 5 s was not always enough).
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    AwaitExit(pid, seconds(30));
  }
}

std::vector<uint32_t> SandboxManager::JailUidsInUseLocked(const std::string& except) const {
  std::vector<uint32_t> used;
  for (const auto& [other, r] : records_) {
    if (other != except && r.sb.jail_uid() != 0) used.push_back(r.sb.jail_uid());
  }
  if (snapshot_jail_uid_ != 0) used.push_back(snapshot_jail_uid_);
  for (uint32_t uid : warm_.JailUids()) used.push_back(uid);
  return used;
}

absl::Status SandboxManager::AssignJail(const std::string& name, vmm::Sandbox& sb) {
  if (!jails_.enabled()) return absl::OkStatus();
  uint32_t base = 0;
  {
    // Picked and taken under one lock: two boots never get one block.
    std::lock_guard<std::mutex> lock(mu_);
    auto assigned = jails_.Assign(records_[name].sb.jail_uid(), JailUidsInUseLocked(name));
    if (!assigned.ok()) return assigned.status();
    base = *assigned;
    records_[name].sb.set_jail_uid(base);
  }
  sb.set_jail_uid(base);
  return Update(name, "", [&](vmm::Sandbox& s) { s.set_jail_uid(base); });
}

absl::Status SandboxManager::StartShares(const vmm::Sandbox& sb, const VmConfig& config) {
  std::vector<Share> shares = SharesOf(sb);
  for (size_t i = 0; i < shares.size(); ++i) {
    const Share& share = shares[i];
    for (pid_t old : ProcessesMatching("--socket-path=" + share.socket)) kill(old, SIGKILL);
    ShareJail jail = jails_.ForShare(config, i);
    auto fsd = StartShare(share, config.jail_uid != 0 ? &jail : nullptr,
                          absl::StrCat(config.dir, "/shares/", i),
                          absl::StrCat(config.dir, "/virtiofsd", i, ".log"));
    if (!fsd.ok()) return fsd.status();
  }
  return absl::OkStatus();
}

absl::Status SandboxManager::AttachShares(const vmm::Sandbox& sb) {
  std::vector<Share> shares = SharesOf(sb);
  if (shares.empty()) return absl::OkStatus();
  VmConfig config = ConfigFor(sb);
  config.qmp_socket = config.socket_dir + "/qmp.sock";
  // A jailed QEMU sees the socket directory where it was when QEMU
  // started: a claimed warm VM's under its slot's name.
  std::string seen_dir = config.socket_dir;
  if (config.jail_uid != 0 && !sb.pool_slot().empty()) seen_dir = jails_.SocketDir(sb.pool_slot());
  for (size_t i = 0; i < shares.size(); ++i) {
    const std::string& socket = shares[i].socket;
    VmShare share{shares[i].tag, seen_dir + socket.substr(socket.rfind('/'))};
    if (absl::Status s = hypervisor_->AttachShare(config, i, share); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(shares[i].mount.host_path(), ": ", s.message()));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
