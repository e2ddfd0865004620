// Sandbox lifecycle: create (asynchronous), start, stop, remove, the state
// machine, reattaching to running VMs after a vmmd restart, and noticing VMs
// that exit on their own. No gRPC surface here (see vmm_service.h); the
// guest agent's channel is handed out to the service for exec and files.
#ifndef AIRLOCK_VMMD_SANDBOX_MANAGER_H_
#define AIRLOCK_VMMD_SANDBOX_MANAGER_H_

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.pb.h"
#include "common/agent_link.h"
#include "common/peer.h"
#include "vmmd/boot_console.h"
#include "vmmd/hypervisor.h"
#include "vmmd/sandbox_jails.h"
#include "vmmd/image_catalog.h"
#include "vmmd/peer_clients.h"
#include "vmmd/port_forwarder.h"
#include "vmmd/shares.h"
#include "vmmd/snapshots.h"
#include "vmmd/warm_pool.h"
#include "vmmd/resources.h"
#include "vmmd/sandbox_store.h"

namespace airlock::vmmd {

struct ManagerOptions {
  std::string state_dir;
  std::string runtime_dir;
  std::string image_dir;
  // "auto" (probe KVM, fall back to TCG), "kvm" or "tcg".
  std::string accelerator = "auto";
  // Seconds a boot may take until the agent answers.
  int boot_timeout_s = 180;
  // When a boot vmmd launched (a sandbox's cold boot, the snapshot VM's)
  // is taken for hung before its deadline: a sandbox's VM is booted once
  // more, the snapshot is tried again by the next sandbox of its image.
  HangLimits hang_limits;
  // gitd: the review baseline of shared paths is recorded there.
  Peer gitd;
  // proxyd: every boot attaches the sandbox's egress port.
  Peer proxyd;
  // secretsd: sentinels for the guest's environment.
  Peer secretsd;
  // policyd: kits are resolved and gated there.
  Peer policyd;
  // The jails of QEMU and virtiofsd (sandbox_jails.h).
  bool jail = true;
  // New sandboxes of an image booted before restore a snapshot of it
  // (snapshots.h) instead of booting.
  bool snapshots = true;
  uint32_t jail_id_base = kDefaultJailIdBase;
  // TCG's translation cache of each VM, MiB (hypervisor.h).
  uint64_t tcg_cache_mib = kTcgCacheMib;
  // The guests' address space randomization: "auto", "on" or "off"
  // (GuestAslr, hypervisor.h).
  std::string guest_aslr = "auto";
  // How many VMs restored ahead of need to keep (warm_pool.h); 0: none.
  size_t warm_pool = 1;
};

class SandboxManager {
  // sandbox_manager_test's window on SnapshotKeyFor.
  friend class SnapshotKeyProbe;

 public:
  // Calls the daemons at options.gitd, .proxyd, .secretsd and .policyd.
  SandboxManager(ManagerOptions options, SandboxStore* store, ImageCatalog* images,
                 std::unique_ptr<Hypervisor> hypervisor, HostFacts host);
  // Calls `peers` instead (tests give fakes).
  SandboxManager(ManagerOptions options, SandboxStore* store, ImageCatalog* images,
                 std::unique_ptr<Hypervisor> hypervisor, HostFacts host, PeerClients peers);
  ~SandboxManager();

  // Recover loads the stored sandboxes, reattaches to VMs that still run,
  // marks the others with a reason, kills VM processes nobody owns, and
  // starts the monitor. Call once before serving.
  absl::Status Recover();

  // Shutdown stops every running sandbox (vmmd is stopping).
  void Shutdown();

  // Create validates and records the sandbox (state CREATING) and returns at
  // once; preparing its disk and, with `start`, booting happen in the
  // background. Bad input changes nothing.
  absl::StatusOr<airlock::vmm::v1::Sandbox> Create(const airlock::vmm::v1::SandboxSpec& spec,
                                                   bool start);
  // SecretSentinels is the environment secretsd gives the sandbox's guest:
  // variable -> sentinel, never a value; UNAVAILABLE when secretsd does not
  // answer (an exec without them would fail confusingly later).
  // `without_globals` registers a sandbox new to secretsd with none of the
  // global secrets; `registry_credentials` one whose Docker Engine pulls
  // with the registry secrets (proxyd places them).
  absl::StatusOr<std::map<std::string, std::string>> SecretSentinels(
      const std::string& name, bool without_globals = false, bool registry_credentials = false);
  // Get returns the sandbox's record, with its host memory read from its
  // cgroup unless `with_host_memory` is false (exec needs only the spec).
  absl::StatusOr<airlock::vmm::v1::Sandbox> Get(const std::string& name,
                                                bool with_host_memory = true);
  std::vector<airlock::vmm::v1::Sandbox> List();
  // Start boots a STOPPED or FAILED sandbox in the background.
  absl::StatusOr<airlock::vmm::v1::Sandbox> Start(const std::string& name);
  // Stop shuts the guest down cleanly (killing the VM after `timeout_s`).
  absl::StatusOr<airlock::vmm::v1::Sandbox> Stop(const std::string& name, int timeout_s);
  // Remove deletes the sandbox and everything it owns on the host.
  absl::Status Remove(const std::string& name, bool force);
  // SetDisplayName changes the label people see; the name stays.
  absl::StatusOr<airlock::vmm::v1::Sandbox> SetDisplayName(const std::string& name,
                                                          const std::string& display_name);
  // RenewTimeout sets the deadline `timeout_seconds` from now (armed when
  // RUNNING, else at the next boot).
  absl::StatusOr<airlock::vmm::v1::Sandbox> RenewTimeout(const std::string& name,
                                                        uint64_t timeout_seconds);

  // Watch calls `on_change` with the current state and on every change
  // until it returns false, the sandbox is removed, or `cancelled` is true.
  absl::Status Watch(const std::string& name,
                     const std::function<bool(const airlock::vmm::v1::Sandbox&,
                                              const std::string& progress)>& on_change,
                     const std::function<bool()>& cancelled);

  // AgentChannel is the gRPC channel to a RUNNING sandbox's agent.
  absl::StatusOr<std::shared_ptr<grpc::Channel>> AgentChannel(const std::string& name);

  // AgentBroken says a call on the sandbox's agent channel failed with
  // UNAVAILABLE; the next AgentChannel connects afresh.
  void AgentBroken(const std::string& name);

  // PublishPort forwards a host port to the running sandbox and keeps the
  // mapping (with the host port chosen) for later boots.
  absl::StatusOr<airlock::vmm::v1::PortMapping> PublishPort(const std::string& name,
                                                            airlock::vmm::v1::PortMapping m);
  // UnpublishPort stops forwarding and forgets the mapping; NOT_FOUND when
  // no published mapping matches.
  absl::Status UnpublishPort(const std::string& name, const airlock::vmm::v1::PortMapping& m);
  // ListPorts returns the sandbox's published mappings.
  absl::StatusOr<std::vector<airlock::vmm::v1::PortMapping>> ListPorts(const std::string& name);

  // UpdateKits moves a sandbox to other kits or args through policyd's
  // gate; a widening comes back held (hold_id set) and changes nothing.
  absl::StatusOr<airlock::vmm::v1::UpdateKitsResponse> UpdateKits(
      const airlock::vmm::v1::UpdateKitsRequest& req);

  // ImageUsage maps each image's manifest digest to the sandboxes using it.
  Usage ImageUsage();

  // SaveTemplate captures the sandbox's disk as one layer over its image,
  // names the new image `req.tag`, and writes an archive when asked. A
  // running sandbox needs req.force: it is stopped and started again.
  absl::StatusOr<airlock::vmm::v1::Image> SaveTemplate(
      const airlock::vmm::v1::SaveTemplateRequest& req, const Progress& progress);

  // Accelerator resolves (probing once per host boot and kernel) which
  // accelerator VMs use.
  std::string Accelerator();

 private:
  // Retry is something the monitor tries again for a running sandbox until
  // it takes (a peer was down): whether it is owed, whether a try runs on
  // a worker, and when the next may start (1, 2, 4 ... 30 s apart).
  struct Retry {
    bool pending = false;
    bool in_flight = false;
    int64_t next_try = 0;
    int backoff_s = 0;
    // Take marks a try as running when one is owed and due (true).
    bool Take(int64_t now) {
      if (!pending || in_flight || now < next_try) return false;
      in_flight = true;
      return true;
    }
    // Ended records how an attempt went: done, or owed again later.
    void Ended(bool ok, int64_t now) {
      pending = !ok;
      if (ok) {
        backoff_s = 0;
        return;
      }
      backoff_s = std::min(30, std::max(1, backoff_s * 2));
      next_try = now + backoff_s;
    }
  };

  struct Record {
    airlock::vmm::v1::Sandbox sb;
    std::shared_ptr<AgentLink> agent;
    std::string progress;
    uint64_t version = 0;
    // A lifecycle operation (boot, stop, remove) owns the sandbox.
    bool busy = false;
    // rm -f or vmmd shutdown asks a boot in progress to give up.
    bool cancel = false;
    // The deadline passed and its action is under way.
    bool expiring = false;
    // A running clone-mode sandbox whose sandbox-<name> remote gitd has not
    // taken yet (gitd was down): the monitor retries it.
    Retry publish;
    // A reattached kit sandbox whose runtime phase and kit credentials
    // policyd or secretsd did not confirm (down at the reattach): the
    // monitor says them again until both take them (their stores may lag
    // vmmd's plan after a kit update one of them missed).
    Retry kit_sync;
    // vmmd restarted under the running guest and is reattaching: exec and
    // file calls wait for it instead of being refused.
    bool reattaching = false;
    // A restarted vmmd's own work on the sandbox (a reattach, or the boot
    // of one that was starting): it holds the record until it ends, and
    // a lifecycle call waits for it instead of being refused (the caller
    // did not race anyone; the restart did).
    bool recovering = false;
  };

  std::string SandboxDir(const std::string& name) const;
  VmConfig ConfigFor(const airlock::vmm::v1::Sandbox& sb) const;
  // Update applies `mutate` to the record, persists it and wakes watchers.
  absl::Status Update(const std::string& name, const std::string& progress,
                      const std::function<void(airlock::vmm::v1::Sandbox&)>& mutate);
  // SetProgress changes only the progress line watchers see (never stored).
  void SetProgress(const std::string& name, const std::string& progress);
  // UpdateOrWarn is Update where a store failure cannot undo what already
  // happened (the VM is gone, the deadline passed): the record changes in
  // memory only when stored, and the failure is logged as an error.
  void UpdateOrWarn(const std::string& name, const std::string& progress,
                    const std::function<void(airlock::vmm::v1::Sandbox&)>& mutate);
  // Begin marks the record busy; FAILED_PRECONDITION when it already is.
  // A restarted vmmd's own reattach or boot (`recovering`) is waited for
  // first, up to the boot timeout; UNAVAILABLE when it still runs.
  absl::StatusOr<airlock::vmm::v1::Sandbox> Begin(const std::string& name,
                                                  const std::string& what);
  void End(const std::string& name);
  // PrepareDisk makes the sandbox's disk: its image (installing a
  // built-in agent first when its image is not there yet), the image's
  // boot disk, and the sandbox's own qcow2 overlay on it.
  absl::Status PrepareDisk(const std::string& name);
  // BootDiskFor is the boot disk of the sandbox's image, built on first
  // use (progress shown as the sandbox's).
  absl::StatusOr<std::string> BootDiskFor(const std::string& name,
                                          const airlock::vmm::v1::ImageRef& image);
  // Boot runs on a worker thread: disk, launch, wait for the agent.
  void Boot(const std::string& name, bool launch);
  absl::Status BootSteps(const std::string& name, bool launch);
  // KillVm ends the VM process of `sb` and waits for it to be gone.
  void KillVm(const airlock::vmm::v1::Sandbox& sb);
  pid_t FindVm(const airlock::vmm::v1::Sandbox& sb) const;
  std::string FailureReason(const std::string& name, const std::string& what) const;
  // WaitForAgent waits until the booted guest's agent answers, mounts the
  // shared paths (unless reattaching to a guest that has them), and marks
  // the sandbox RUNNING.
  // `restored`: the guest was restored from a snapshot, its agent already
  // serves (there is no console marker to wait for).
  // `link`: the agent's connection when there is one already (a claimed
  // warm VM's).
  // `hung`, when given: a guest launched just now whose boot hangs
  // (ReadBootConsole with the hang limits) ends the wait with it set; the
  // caller boots again.
  absl::Status WaitForAgent(const std::string& name, pid_t pid, bool mount_shares,
                            bool restored = false, std::shared_ptr<AgentLink> link = nullptr,
                            bool* hung = nullptr);
  // VmMarker is what the command line of `sb`'s VM process holds
  // (Hypervisor::Marker; a claimed warm VM's names its slot).
  std::string VmMarker(const airlock::vmm::v1::Sandbox& sb) const;

  // Snapshots (sandbox_snapshot.cc). SnapshotKeyFor is the key of the
  // snapshot a sandbox of `sb`'s shape may start from, "" when it cannot
  // (shares, Docker, snapshots off, a hypervisor without them).
  std::string SnapshotKeyFor(const airlock::vmm::v1::Sandbox& sb, const std::string& base_disk,
                             const std::string& accelerator);
  // GiveSnapshotDisk makes a new sandbox's disk a copy of its snapshot's,
  // marked to be restored at its first boot. False when there is no
  // snapshot or the copy failed: the caller makes a plain overlay.
  bool GiveSnapshotDisk(const std::string& name, const std::string& base_disk);
  // TakeRestoreMarker removes the mark and returns the snapshot's key when
  // it is still the one for `sb` (else "": boot).
  std::string TakeRestoreMarker(const airlock::vmm::v1::Sandbox& sb);
  // SendSnapshot streams the snapshot's device state into the VM QEMU
  // started with config.incoming_socket, and returns once QEMU says the
  // VM runs (config.qmp_socket): bytes sent to the agent's port before the
  // port's state is loaded are lost.
  absl::Status SendSnapshot(const std::string& key, const VmConfig& config);
  // ClaimGuest gives the guest its identity (the agent's Claim): hostname,
  // a fresh machine id, entropy and the clock.
  absl::Status ClaimGuest(const std::string& name, std::shared_ptr<grpc::Channel> channel,
                          bool restored);
  // MaybeSnapshot starts making the snapshot for a sandbox that just
  // booted, when there is none for its shape (one at a time).
  void MaybeSnapshot(const std::string& name);
  // AllowSnapshotRemake lets the snapshot of `key`, deleted because a
  // restore of it failed, be built once more in this vmmd run (by the next
  // boot of its image); a second one that fails stays gone.
  void AllowSnapshotRemake(const std::string& key);
  // BuildSnapshot boots a VM of `config`'s shape that is no sandbox, saves
  // it when its agent is up and commits the snapshot; returns its size.
  // `boot_hung` is set when its guest did not come up in time.
  absl::StatusOr<uint64_t> BuildSnapshot(const std::string& key, const VmConfig& config,
                                         const std::string& base_disk, bool* boot_hung);
  // RecoverSnapshots drops what a vmmd stopped while making one left.
  void RecoverSnapshots();

  // The warm pool (warm_pool.h, sandbox_warm.cc). ClaimWarmVm makes a
  // ready warm VM of snapshot `key` the sandbox `name`'s VM and brings it
  // to RUNNING: NOT_FOUND when the pool has none (nothing changed),
  // ABORTED when the VM it took died before its agent answered (the
  // sandbox's disk is the warm VM's now, and boots), else WaitForAgent's
  // status. `release` and `accelerator` are what the record says of it.
  absl::Status ClaimWarmVm(const std::string& name, const std::string& key,
                           const std::string& release, const std::string& accelerator);
  // RefillWarmPool keeps the pool at its size with VMs of snapshot `key`
  // in `shape` (a sandbox of it just started from it), on workers.
  void RefillWarmPool(const std::string& key, const VmConfig& shape);
  // RetireGoneWarmVms ends the warm VMs whose snapshot was removed (QEMU
  // could not load it, or newer ones pushed it out).
  void RetireGoneWarmVms();
  // StartWarmVm restores, greets and readies the reserved slot.
  void StartWarmVm(const std::string& key, VmConfig shape, const std::string& slot,
                   uint32_t jail_uid);
  // EndWarmVm kills a warm VM that no sandbox claimed, removes its files
  // and jail, and drops it from the pool (its jail ids free again).
  void EndWarmVm(const WarmVm& vm);
  // WarmDir is the directory of a warm VM's files; WarmVmConfig its VM
  // (of `shape`: files, sockets and name the slot's); WarmMarker what its
  // QEMU's command line holds (Hypervisor::Marker).
  std::string WarmDir(const std::string& slot) const;
  VmConfig WarmVmConfig(const std::string& slot, const VmConfig& shape = VmConfig{}) const;
  std::string WarmMarker(const std::string& slot) const;
  // StopWarmPool ends every warm VM (vmmd stopping); RecoverWarmPool ends
  // what a vmmd that stopped without doing so left.
  // (`claimed`: the slots sandboxes' VMs came from, never ended.)
  void StopWarmPool();
  void RecoverWarmPool(const std::set<std::string>& claimed);
  // SharesOf lists the virtiofs exports of a sandbox.
  std::vector<Share> SharesOf(const airlock::vmm::v1::Sandbox& sb) const;
  // StartShares starts the virtiofsd of each of `sb`'s shares (one left
  // from an earlier start is killed first), jailed as `config` says.
  absl::Status StartShares(const airlock::vmm::v1::Sandbox& sb, const VmConfig& config);
  // AttachShares plugs `sb`'s shares into its running VM: one restored
  // from a snapshot, or a claimed warm VM (Hypervisor::AttachShare).
  absl::Status AttachShares(const airlock::vmm::v1::Sandbox& sb);
  void Monitor();
  // PrepareClone asks gitd about the host repo of a clone-mode spec.
  absl::StatusOr<airlock::vmm::v1::CloneInfo> PrepareClone(const airlock::vmm::v1::SandboxSpec& spec);
  // SetUpClone clones the source in the guest (first boot) and starts the
  // guest's git daemon (every boot).
  absl::Status SetUpClone(const airlock::vmm::v1::Sandbox& sb, std::shared_ptr<grpc::Channel> agent);
  // PublishClone points the host repo's sandbox-<name> remote at the
  // sandbox's git port; when gitd does not answer the record stays
  // publish.pending and the monitor tries again (backing off to 30 s).
  void PublishClone(const std::string& name);
  // RetryPublish is the monitor's PublishClone for a running, idle sandbox
  // still publish.pending.
  void RetryPublish(const std::string& name);
  // RetryKitSync is the monitor's runtime-phase SetKitPhase for a running,
  // idle sandbox still kit_sync.pending.
  void RetryKitSync(const std::string& name);
  // AttachEgress hands the sandbox's egress port to proxyd (which installs
  // its CA in the guest); a boot fails without it. DetachEgress is best
  // effort.
  absl::Status AttachEgress(const std::string& name, const VmConfig& config);
  // StartDocker (sandbox_docker.cc) mounts the docker disk and starts
  // dockerd in a booting guest whose spec has Docker, and waits for it.
  absl::Status StartDocker(const std::string& name, std::shared_ptr<grpc::Channel> agent);
  void DetachEgress(const std::string& name);
  // ForgetSecrets tells secretsd the sandbox is gone; rm stops when it
  // cannot.
  absl::Status ForgetSecrets(const std::string& name);
  // AnswerStoppedClone makes the git port say that the sandbox is stopped.
  void AnswerStoppedClone(const airlock::vmm::v1::Sandbox& sb);
  // OpenPorts starts listening for every mapping of a sandbox that just
  // became RUNNING; ClosePorts stops them.
  void OpenPorts(const std::string& name);
  void ClosePorts(const std::string& name);
  void StartWorker(std::function<void()> fn);

  // Kits (sandbox_kits.cc). ResolveKits asks policyd to resolve and gate
  // the spec's kits; ForgetKits drops a sandbox's grant there.
  // `create` grants (see ResolveRequest.create).
  absl::StatusOr<airlock::policy::v1::ResolveResponse> ResolveKits(
      const airlock::vmm::v1::SandboxSpec& spec, bool create);
  // KitNotes is what the kits asked for that the sandbox does not get:
  // optional entries left out and accepted types not enforced.
  static std::vector<std::string> KitNotes(const airlock::policy::v1::ResolveResponse& r);
  // ForgetKitRegistration drops what secretsd registered for a create that
  // did not happen (its kit bindings and globals snapshot), keeping the
  // sandbox's own secrets.
  void ForgetKitRegistration(const std::string& name);
  absl::Status ForgetKits(const std::string& name);
  // ForgetSandboxRules removes every rule scoped to sandbox `name` alone
  // (`policy allow --sandbox`, the REST API's networkPolicies), so a later
  // sandbox of that name starts without them.
  absl::Status ForgetSandboxRules(const std::string& name);
  // ApplyKitPlanToSpec applies resources@1 (when no size was asked) and
  // publishes port@1 on free loopback ports.
  static absl::Status ApplyKitPlanToSpec(const airlock::policy::v1::KitPlan& plan,
                                         airlock::vmm::v1::SandboxSpec* spec,
                                         std::vector<std::string>* skipped);
  // BindKitCredentials binds `phase`'s credentials in secretsd; a required
  // one without a secret is FAILED_PRECONDITION saying how to set it.
  absl::Status BindKitCredentials(const std::string& name,
                                  const airlock::policy::v1::KitPlan& plan,
                                  const std::string& phase);
  // SetKitPhase puts `phase`'s network rules and credentials in force.
  absl::Status SetKitPhase(const std::string& name, const airlock::policy::v1::KitPlan& plan,
                           const std::string& phase);
  // CreateSandbox is Create; a non-empty `installs_image` marks vmmd's own
  // sandbox that installs a built-in agent to be saved as that image (it
  // gets no global secrets, and a restarted vmmd removes it).
  absl::StatusOr<airlock::vmm::v1::Sandbox> CreateSandbox(
      const airlock::vmm::v1::SandboxSpec& spec, bool start, const std::string& installs_image);
  // InstallAgentImage makes the image a built-in agent's sandbox `name`
  // starts from (its spec's template, "agents/AGENT:VERSION") by
  // installing the agent in a sandbox of its own and saving that;
  // sandbox_agents.cc.
  absl::StatusOr<airlock::vmm::v1::ImageRef> InstallAgentImage(const std::string& name);
  // InstallLock is the mutex one install of the image `tag` holds.
  std::shared_ptr<std::mutex> InstallLock(const std::string& tag);

  // ApplyKitsAtBoot mounts volumes, writes files, runs the install hooks
  // (first boot only) in the install phase, closes it, and runs the
  // startup hooks.
  absl::Status ApplyKitsAtBoot(const std::string& name, std::shared_ptr<grpc::Channel> agent);

  // WithHostMemory fills `sb`'s host memory figures from its cgroup.
  void WithHostMemory(airlock::vmm::v1::Sandbox& sb) const;
  // JailUidsInUseLocked lists the jail id blocks taken (every sandbox's but
  // `except`'s, and a snapshot VM's being made); mu_ held.
  std::vector<uint32_t> JailUidsInUseLocked(const std::string& except) const;
  // AssignJail gives `name` its jail id block (kept until rm) and records it.
  absl::Status AssignJail(const std::string& name, airlock::vmm::v1::Sandbox& sb);

  ManagerOptions options_;
  PeerClients peers_;
  SandboxStore* store_;
  ImageCatalog* images_;
  std::unique_ptr<Hypervisor> hypervisor_;
  HostFacts host_;
  SandboxJails jails_;

  std::mutex mu_;
  // Orders the monitor's retried publishes before rm's Unpublish (taken before mu_).
  std::mutex publish_mu_;
  std::condition_variable changed_;
  std::map<std::string, Record> records_;
  // Names a Create holds until the sandbox is recorded or the create
  // fails: a second create of the name must not touch what the peers hold
  // for the first.
  std::set<std::string> creating_;
  // One mutex per agent image tag being installed (sandbox_agents.cc).
  std::map<std::string, std::shared_ptr<std::mutex>> installs_;

  std::mutex accel_mu_;
  std::string accelerator_;

  SnapshotStore snapshots_;
  std::mutex snapshot_mu_;
  bool snapshot_building_ = false;
  // Tries per snapshot key while vmmd runs: a VM whose boot hung may be
  // tried again, up to kSnapshotTries; a success or any other failure is
  // final, but for one more build of a snapshot deleted because a restore
  // of it failed (AllowSnapshotRemake; snapshot_remade_: the keys that had
  // theirs).
  std::map<std::string, int> snapshot_tried_;
  std::set<std::string> snapshot_remade_;
  // The jail ids the snapshot's VM uses while one is made (under mu_).
  uint32_t snapshot_jail_uid_ = 0;
  // Under mu_; warm_stopped_: no more warm VMs (vmmd stopping).
  WarmPool warm_{0};
  bool warm_stopped_ = false;

  PortForwarder ports_;
  std::atomic<bool> stopping_{false};
  std::thread monitor_;
  std::mutex workers_mu_;
  std::condition_variable workers_done_;
  int workers_ = 0;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SANDBOX_MANAGER_H_
