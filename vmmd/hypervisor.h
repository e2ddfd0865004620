// The interface between vmmd and a virtual machine monitor. QEMU microvm is
// the implementation today (qemu_backend.h); Cloud Hypervisor or
// Firecracker can implement the same calls.
#ifndef AIRLOCK_VMMD_HYPERVISOR_H_
#define AIRLOCK_VMMD_HYPERVISOR_H_

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::vmmd {

// VmShare is one virtiofs export attached to the VM.
struct VmShare {
  std::string tag;
  // vhost-user socket of the virtiofsd serving it.
  std::string socket;
};

// VmConfig is everything needed to boot one sandbox's VM.
// The docker disk's virtio serial, by which the guest finds it.
inline constexpr char kDockerDiskSerial[] = "airlock-docker";

// TCG's translation cache, MiB: the default, and the range vmmd's
// --tcg-cache-mib accepts. QEMU keeps the pages of the cache it has filled
// (a full cache is flushed and refilled, never given back), so this bounds
// what an idle sandbox holds after heavy work; a smaller cache means more
// retranslation for code-heavy work (README: Sandbox start-up and memory).
inline constexpr uint64_t kTcgCacheMib = 256;
inline constexpr uint64_t kMinTcgCacheMib = 32;
inline constexpr uint64_t kMaxTcgCacheMib = 2048;

// GuestAslr says whether a VM on `accelerator` randomizes the address
// space of its processes, from vmmd's --guest-aslr ("auto", "on" or "off").
// auto is off under TCG only: QEMU 7.2's TCG keys its translated code by
// virtual address too, so a process whose libraries sit at new addresses
// has all of their code translated again; with randomization off a
// dynamically linked process starts in ~4.5 ms instead of ~25 here (any
// accelerator but "kvm" is TCG, as for QemuBackend's arguments). The
// agent (PID 1) keeps its own randomized layout: the setting is made after
// it starts. Inside the guest everything runs as the sandbox's own; the VM
// is the boundary that keeps a sandbox in.
inline bool GuestAslr(const std::string& option, const std::string& accelerator) {
  return option == "on" || (option == "auto" && accelerator == "kvm");
}

struct VmConfig {
  // Sandbox name; becomes the guest's hostname.
  std::string name;
  // Directory of the sandbox's files (disk, logs).
  std::string dir;
  std::string kernel;
  std::string initrd;
  // The sandbox's copy-on-write root disk.
  std::string disk;
  uint32_t cpus = 1;
  uint64_t memory_mib = 512;
  // "kvm" or "tcg".
  std::string accelerator;
  // TCG's translation cache, MiB (unused under KVM).
  uint64_t tcg_cache_mib = kTcgCacheMib;
  // Address space randomization of the guest's processes started after
  // its agent: vmmd's --guest-aslr, "auto", "on" or "off" (GuestAslr
  // below, with `accelerator`).
  std::string guest_aslr = "auto";
  // Unix socket the host side of the agent channel listens on.
  std::string agent_socket;
  // Unix socket of the egress port's host end (proxyd attaches to it).
  std::string egress_socket;
  // File receiving the guest console.
  std::string console_log;
  // File receiving the VMM's own messages.
  std::string vmm_log;
  // Host paths shared through virtiofs.
  std::vector<VmShare> shares;
  // The image names no user: the guest creates the "agent" user at boot
  // when the image lacks it.
  bool ensure_agent_user = false;
  // The docker disk (raw, ext4) attached with serial kDockerDiskSerial;
  // empty without Docker. Its modules are loaded at boot (airlock.docker=1).
  std::string docker_disk;
  // The jail (jail.h): the host uid and gid QEMU runs as, 0 for none (vmmd
  // started with --jail=false); the empty directory its root is made on;
  // the cgroup.procs files it joins; the directory of its sockets (agent,
  // egress, virtiofs), which only that uid may use.
  uint32_t jail_uid = 0;
  std::string jail_root;
  // The directory every backing file of `disk` must be in (the image
  // store's disks): the disk is the jail's to write, so its header is not
  // trusted to name what vmmd binds into the jail.
  std::string backing_dir;
  std::vector<std::string> cgroup_procs;
  std::string socket_dir;
  // The hostname in the kernel command line when not `name` (a snapshot's
  // VM, and one restored from it: snapshots.h).
  std::string hostname;
  // QEMU's machine protocol socket, to pause and save the VM; empty: none.
  std::string qmp_socket;
  // Restore: QEMU waits on this socket for the migration stream of a
  // snapshot instead of booting; empty: boot.
  std::string incoming_socket;
  // Restore: the snapshot's guest memory image (a sparse file); the VM's
  // RAM is the sandbox's own copy of it (memory_image.h) and the stream on
  // `incoming_socket` carries device state only. Empty: none.
  std::string memory_image;
  // The VM dies with the vmmd thread that launched it, which reaps it (a
  // snapshot's VM: it belongs to no sandbox that could reattach).
  bool die_with_vmmd = false;
};

// Hypervisor starts VMs as processes that outlive vmmd (so a restarted vmmd
// can reattach) and recognizes them again later.
class Hypervisor {
 public:
  virtual ~Hypervisor() = default;

  // Launch starts the VM and returns the pid of its process.
  virtual absl::StatusOr<pid_t> Launch(const VmConfig& config) = 0;

  // Marker is a string found in the command line of the VM process of
  // `config` and of no other process.
  virtual std::string Marker(const VmConfig& config) const = 0;

  // ProbeAccelerator boots `kernel`/`initrd` once with hardware
  // acceleration and says whether the guest reached its init. Returns
  // "kvm" or "tcg" and a sentence saying why.
  virtual std::pair<std::string, std::string> ProbeAccelerator(const std::string& kernel,
                                                               const std::string& initrd,
                                                               const std::string& work_dir) = 0;

  // Build identifies the VMM binary in use (another version may boot what
  // this one could not, so a cached probe verdict keys on it); "" when it
  // cannot be told.
  virtual std::string Build() const { return ""; }

  // Describe is what a VM of `config` is, for a snapshot's key: the VMM
  // build and everything the restored VM must match; "" when this
  // hypervisor cannot save and restore VMs.
  virtual std::string Describe(const VmConfig& config) const { return ""; }

  // MaxShares is how many shared paths one VM can take beside its other
  // devices (`docker`: with the Docker Engine's disk).
  virtual int MaxShares(bool docker) const { return docker ? 64 : 65; }

  // HotplugShares is how many shares a VM can take once it runs
  // (AttachShare): what lets a VM restored from a snapshot, which has
  // none, take a sandbox's. 0: shares are only given at launch.
  virtual size_t HotplugShares() const { return 0; }

  // AttachShare adds `share` to the running VM of `config` (through
  // config.qmp_socket) in hot-plug slot `slot` (< HotplugShares()), its
  // socket named as the VM's process sees it. It returns once the VMM
  // holds the device; the guest sees the tag once it has taken the
  // hot-plug, so its mount waits for it (MountRequest.wait_ms).
  virtual absl::Status AttachShare(const VmConfig& config, size_t slot, const VmShare& share) {
    return absl::UnimplementedError("this hypervisor cannot add shares to a running VM");
  }
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_HYPERVISOR_H_
