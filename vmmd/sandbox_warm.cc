// SandboxManager's warm pool (warm_pool.h): starting VMs restored from a
// snapshot ahead of need, a new sandbox claiming one, and ending the ones
// nobody claimed.

#include <dirent.h>
#include <signal.h>
#include <sys/random.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/guest_run.h"
#include "vmmd/sandbox_manager.h"
#include "vmmd/store/layer_apply.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

// Commands a warm VM runs before it is ready (under TCG).
constexpr int kWarmupExecs = 3;
// How long after a sandbox started from the snapshot the pool refills.
constexpr int kRefillDelayMs = 1000;

std::string NewSlot() {
  unsigned char bytes[4] = {};
  if (getrandom(bytes, sizeof(bytes), 0) != sizeof(bytes)) {
    uint32_t t = static_cast<uint32_t>(steady_clock::now().time_since_epoch().count());
    memcpy(bytes, &t, sizeof(bytes));
  }
  return absl::StrCat(kWarmSlotPrefix,
                      absl::BytesToHexString(absl::string_view(reinterpret_cast<char*>(bytes), 4)));
}

// KillIfOurs kills `pid` and waits until it is gone, when it is still the
// VM whose command line holds `marker` (a QEMU that died leaves its pid to
// be reused by any process).
void KillIfOurs(pid_t pid, const std::string& marker) {
  if (pid <= 0 || ProcessCmdline(pid).find(marker) == std::string::npos) return;
  kill(pid, SIGKILL);
  AwaitExit(pid, seconds(30));
}

}  // namespace

std::string SandboxManager::WarmDir(const std::string& slot) const {
  return absl::StrCat(options_.state_dir, "/pool/", slot);
}

VmConfig SandboxManager::WarmVmConfig(const std::string& slot, const VmConfig& shape) const {
  VmConfig c = SnapshotVm(shape, WarmDir(slot), jails_.SocketDir(slot));
  c.name = slot;
  return c;
}

std::string SandboxManager::WarmMarker(const std::string& slot) const {
  return hypervisor_->Marker(WarmVmConfig(slot));
}

void SandboxManager::RefillWarmPool(const std::string& key, const VmConfig& shape) {
  if (warm_.size() == 0 || key.empty()) return;
  WarmPool::Plan plan;
  std::vector<std::pair<std::string, uint32_t>> starts;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || warm_stopped_) return;
    plan = warm_.Want(key);
    for (size_t i = 0; i < plan.start; ++i) {
      auto uid = jails_.Assign(0, JailUidsInUseLocked(""));
      if (!uid.ok()) {
        AIRLOCK_LOG_WARN("no jail ids for a warm VM", {{"error", std::string(uid.status().message())}});
        break;
      }
      WarmVm vm;
      vm.key = key;
      vm.slot = NewSlot();
      vm.jail_uid = *uid;
      starts.emplace_back(vm.slot, vm.jail_uid);
      warm_.Reserve(std::move(vm));
    }
  }
  for (const WarmVm& vm : plan.retire) {
    StartWorker([this, vm] { EndWarmVm(vm); });
  }
  for (const auto& [slot, uid] : starts) {
    StartWorker([this, key, shape, slot = slot, uid = uid] { StartWarmVm(key, shape, slot, uid); });
  }
}

void SandboxManager::RetireGoneWarmVms() {
  std::vector<WarmVm> gone;
  {
    std::lock_guard<std::mutex> lock(mu_);
    gone = warm_.Retire([this](const std::string& key) { return snapshots_.Find(key).has_value(); });
  }
  for (const WarmVm& vm : gone) {
    AIRLOCK_LOG_INFO("ending a warm VM: its snapshot is gone",
                     {{"slot", vm.slot}, {"key", vm.key.substr(0, 12)}});
    StartWorker([this, vm] { EndWarmVm(vm); });
  }
}

void SandboxManager::StartWarmVm(const std::string& key, VmConfig shape, const std::string& slot,
                                 uint32_t jail_uid) {
  // The sandbox that just started comes first: its first commands do not
  // share the CPUs with a restore (about one CPU-second under TCG).
  for (int i = 0; i < kRefillDelayMs / 50 && !stopping_; ++i) {
    std::this_thread::sleep_for(milliseconds(50));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || warm_stopped_) {
      warm_.Drop(slot);
      return;
    }
  }
  auto begun = steady_clock::now();
  WarmVm vm;
  vm.key = key;
  vm.slot = slot;
  vm.jail_uid = jail_uid;
  auto snapshot = snapshots_.Find(key);
  VmConfig config = WarmVmConfig(slot, shape);
  config.shares.clear();
  config.jail_uid = jails_.enabled() ? jail_uid : 0;
  config.incoming_socket = config.socket_dir + "/incoming.sock";
  config.qmp_socket = config.socket_dir + "/qmp.sock";
  auto start = [&]() -> absl::Status {
    if (!snapshot) return absl::NotFoundError("the snapshot is gone");
    config.memory_image = snapshot->ram;
    if (absl::Status s = MakeDirs(config.dir, 0700); !s.ok()) return s;
    if (absl::Status s = CopySynced(snapshot->disk, config.disk); !s.ok()) return s;
    if (absl::Status s = MakeDirs(config.socket_dir, 0700); !s.ok()) return s;
    if (config.jail_uid != 0) {
      if (absl::Status s = jails_.Prepare(config); !s.ok()) return s;
    }
    auto launched = hypervisor_->Launch(config);
    if (!launched.ok()) return launched.status();
    vm.pid = *launched;
    {
      // Known from now on: vmmd stopping kills it instead of waiting.
      std::lock_guard<std::mutex> lock(mu_);
      warm_.Launched(slot, vm.pid);
    }
    if (absl::Status s = SendSnapshot(key, config); !s.ok()) return s;
    // Greeted now, so that a claim finds the agent answering on this
    // connection, and the guest code of its first calls translated.
    vm.link = std::make_shared<AgentLink>(config.agent_socket, milliseconds(100));
    auto channel = vm.link->Channel(seconds(30));
    if (!channel.ok()) return channel.status();
    auto stub = airlock::agent::v1::Agent::NewStub(*channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + seconds(30));
    airlock::agent::v1::PingResponse pong;
    grpc::Status ps = stub->Ping(&ctx, {}, &pong);
    if (!ps.ok()) return absl::UnavailableError("the agent did not answer: " + ps.error_message());
    // Under TCG a restored guest translates again every code path it
    // runs: a few commands now (nothing of any sandbox's) and the first
    // exec of the sandbox that claims it runs translated code, as a
    // long-running sandbox's does.
    if (config.accelerator != "kvm") {
      GuestCommand warmup;
      warmup.argv = {"true"};
      for (int i = 0; i < kWarmupExecs; ++i) {
        auto ran = GuestRun(*channel, warmup);
        if (!ran.ok()) return ran.status();
      }
    }
    return absl::OkStatus();
  };
  absl::Status s = start();
  bool kept = false;
  if (s.ok()) {
    std::lock_guard<std::mutex> lock(mu_);
    kept = !stopping_ && !warm_stopped_ && warm_.Ready(slot, vm.link);
  }
  if (kept) {
    AIRLOCK_LOG_INFO("warm VM ready", {{"slot", slot}, {"key", key.substr(0, 12)},
                                       {"ms", std::to_string(std::chrono::duration_cast<milliseconds>(
                                                                  steady_clock::now() - begun)
                                                                  .count())}});
    return;
  }
  if (!s.ok() && !stopping_) {
    AIRLOCK_LOG_WARN("cannot start a warm VM", {{"slot", slot}, {"key", key.substr(0, 12)},
                                                {"error", std::string(s.message())}});
  }
  EndWarmVm(vm);
}

void SandboxManager::EndWarmVm(const WarmVm& vm) {
  // Found by its disk (its pid may not have been recorded yet).
  std::string marker = WarmMarker(vm.slot);
  for (pid_t p : ProcessesMatching(marker)) KillIfOurs(p, marker);
  jails_.Teardown(vm.slot);
  (void)RemoveTree(WarmDir(vm.slot));
  // Its jail ids go back to the pool only now that nothing runs as them.
  std::lock_guard<std::mutex> lock(mu_);
  warm_.Drop(vm.slot);
}

absl::Status SandboxManager::ClaimWarmVm(const std::string& name, const std::string& key,
                                         const std::string& release,
                                         const std::string& accelerator) {
  std::optional<WarmVm> vm;
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    vm = warm_.Take(key);
    sb = records_[name].sb;
  }
  if (!vm) return absl::NotFoundError("no warm VM");
  // Taken, it leaves the pool but keeps its jail ids there until they are
  // the sandbox's on record (or nothing runs as them): no other sandbox or
  // warm VM is given them meanwhile.
  VmConfig warm = WarmVmConfig(vm->slot);
  std::string marker = hypervisor_->Marker(warm);
  if (!ProcessAlive(vm->pid) || ProcessCmdline(vm->pid).find(marker) == std::string::npos) {
    EndWarmVm(*vm);
    return absl::NotFoundError("the warm VM is gone");
  }
  // Its files and jail become the sandbox's, then the record says so: a
  // crash in between leaves a VM no record owns, which the next vmmd kills
  // (sandbox_recover.cc), and the sandbox boots its disk.
  VmConfig config = ConfigFor(sb);
  absl::Status moved = jails_.Rename(vm->slot, name);
  for (const auto& [from, to] : std::vector<std::pair<std::string, std::string>>{
           {warm.disk, config.disk}, {warm.console_log, config.console_log},
           {warm.vmm_log, config.vmm_log}}) {
    if (moved.ok() && rename(from.c_str(), to.c_str()) != 0) {
      moved = absl::InternalError(absl::StrCat("cannot move ", from, " to ", to, ": ", strerror(errno)));
    }
  }
  if (!moved.ok()) {
    // Whatever moved stays the sandbox's; the VM goes, and its disk boots
    // (it is no longer the snapshot's copy as the guest left it).
    AIRLOCK_LOG_WARN("cannot claim the warm VM; the sandbox boots",
                     {{"sandbox", name}, {"slot", vm->slot}, {"error", std::string(moved.message())}});
    EndWarmVm(*vm);
    return absl::AbortedError("the warm VM could not be claimed");
  }
  rmdir(warm.dir.c_str());
  absl::Status s = Update(name, "", [&](vmm::Sandbox& r) {
    r.set_state(vmm::STARTING);
    r.set_failure("");
    r.set_accelerator(accelerator);
    r.set_vmm_pid(vm->pid);
    r.set_kernel(release);
    r.set_started_from("pool");
    r.set_pool_slot(vm->slot);
    if (jails_.enabled()) r.set_jail_uid(vm->jail_uid);
  });
  if (!s.ok()) {
    EndWarmVm(*vm);
    return s;
  }
  {
    // The record holds its jail ids now.
    std::lock_guard<std::mutex> lock(mu_);
    warm_.Drop(vm->slot);
  }
  vm->link->Relocate(config.agent_socket);
  // Its shares' virtiofsd, jailed with the ids now on record: WaitForAgent
  // plugs them into the VM.
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  if (!SharesOf(sb).empty()) {
    VmConfig jailed = ConfigFor(sb);
    // The warm VM's jail had no share: their roots are made now, and the
    // cgroup (renamed with the VM) is what they join.
    absl::Status fs = jailed.jail_uid != 0 ? jails_.Prepare(jailed) : absl::OkStatus();
    if (fs.ok()) fs = StartShares(sb, jailed);
    if (!fs.ok()) {
      // The VM is the sandbox's now: it goes, and the sandbox boots.
      AIRLOCK_LOG_WARN("cannot start the claimed warm VM's shares; the sandbox boots",
                       {{"sandbox", name}, {"error", std::string(fs.message())}});
      return absl::AbortedError(absl::StrCat("the warm VM's shares: ", fs.message()));
    }
  }
  s = WaitForAgent(name, vm->pid, /*mount_shares=*/true, /*restored=*/true, vm->link);
  if (s.code() == absl::StatusCode::kAborted) {
    AIRLOCK_LOG_WARN("the claimed warm VM did not come up as the sandbox; booting",
                     {{"sandbox", name}, {"slot", vm->slot}, {"error", std::string(s.message())}});
  }
  return s;
}

void SandboxManager::StopWarmPool() {
  std::vector<WarmVm> vms;
  {
    std::lock_guard<std::mutex> lock(mu_);
    warm_stopped_ = true;
    vms = warm_.TakeAll();
  }
  for (const WarmVm& vm : vms) {
    if (vm.state == WarmVm::kLeaving) {
      EndWarmVm(vm);
    } else {
      // Still starting: killed now, so that its start fails at once; its
      // starter removes the rest.
      KillIfOurs(vm.pid, WarmMarker(vm.slot));
    }
  }
}

void SandboxManager::RecoverWarmPool(const std::set<std::string>& claimed) {
  // Their processes are gone (killed as orphans: no record names them).
  std::string dir = WarmDir("");
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return;
  std::vector<std::string> slots;
  while (dirent* e = readdir(d)) {
    if (IsWarmSlot(e->d_name) && claimed.count(e->d_name) == 0) slots.push_back(e->d_name);
  }
  closedir(d);
  for (const std::string& slot : slots) {
    WarmVm vm;
    vm.slot = slot;
    EndWarmVm(vm);
  }
}

}  // namespace airlock::vmmd
