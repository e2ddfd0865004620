// QEMU `-M microvm` as the Hypervisor: the command line, the TCG timing
// parameters, and the KVM probe.
#ifndef AIRLOCK_VMMD_QEMU_BACKEND_H_
#define AIRLOCK_VMMD_QEMU_BACKEND_H_

#include <string>
#include <vector>

#include "vmmd/hypervisor.h"
#include "vmmd/jail.h"

namespace airlock::vmmd {

// HostTscKhz is the host's TSC frequency in kHz (sysfs, else the kernel
// log, else /proc/cpuinfo), or 0 when unknown. Under TCG the guest must be
// told it (tsc_early_khz): microvm has no PIT/HPET to calibrate against and
// some boots otherwise hang.
uint64_t HostTscKhz();

// KernelCmdline is the guest kernel command line for `name`.
// With `ensure_agent_user` the guest creates the "agent" user when the
// image lacks it.
// With `docker` it loads the Docker Engine's modules too.
// Without `aslr` the guest turns off the address space randomization of
// the processes started after it (GuestAslr).
std::string KernelCmdline(const std::string& name, uint64_t tsc_khz, bool probe,
                          bool ensure_agent_user = false, bool docker = false,
                          bool aslr = true);

// VmMemoryLimitMib is the host memory a VM of `config` may use: its guest
// size, TCG's translation cache, and QEMU's own (devices, buffers, the
// I/O thread's allocations).
inline uint64_t VmMemoryLimitMib(const VmConfig& config) {
  return config.memory_mib + (config.accelerator == "kvm" ? 0 : config.tcg_cache_mib) + 384;
}

// QcowBackingChain lists the backing files of the qcow2 image at `path`,
// nearest first, each an absolute path (a relative one is resolved against
// the image's directory).
absl::StatusOr<std::vector<std::string>> QcowBackingChain(const std::string& path);

// How many shares a running VM can take (QemuBackend::HotplugShares).
inline constexpr size_t kShareHotplugSlots = 4;

// QemuJail is the jail of `config`'s QEMU: the kernel, initramfs and the
// root disk's backing chain read-only, the root disk, docker disk and
// console log writable, the socket directory, /dev/null, /dev/urandom and
// friends, /dev/kvm (a node of the jail's uid alone) with KVM, and the
// sandbox's cgroup. vmmd as an ordinary user maps its own ids instead.
absl::StatusOr<JailSpec> QemuJail(const VmConfig& config);
// Where the jail shows the kernel and initramfs.
inline constexpr char kJailKernel[] = "/vm/kernel";
inline constexpr char kJailInitrd[] = "/vm/initrd";

// FindProgram is `name` resolved against PATH (unchanged when it has a '/').
std::string FindProgram(const std::string& name);

class QemuBackend final : public Hypervisor {
 public:
  // With `probe_uid` the KVM probe's QEMU runs jailed as that uid (vmmd as
  // an ordinary user: its own, in a user namespace); 0: as vmmd.
  explicit QemuBackend(std::string qemu = "qemu-system-x86_64", uint32_t probe_uid = 0)
      : qemu_(std::move(qemu)), probe_uid_(probe_uid) {}

  // Args is the full argv of the QEMU process for `config`.
  std::vector<std::string> Args(const VmConfig& config) const;

  absl::StatusOr<pid_t> Launch(const VmConfig& config) override;
  std::string Marker(const VmConfig& config) const override;
  std::pair<std::string, std::string> ProbeAccelerator(const std::string& kernel,
                                                       const std::string& initrd,
                                                       const std::string& work_dir) override;
  // Build is the QEMU binary's path, size and change time.
  std::string Build() const override;
  // Describe is Build() and the command line of `config` with its
  // per-VM paths left out.
  std::string Describe(const VmConfig& config) const override;
  // microvm (QEMU 6.0 on, with its second IOAPIC) has 24 virtio-mmio
  // slots, of which the guest gets interrupts on the first 23 (a share on
  // the 24th hangs its first read: tried with QEMU 7.2 and Debian's 6.1).
  // The root disk, the balloon and the Docker disk take theirs first (the
  // serial ports' device is on PCI).
  int MaxShares(bool docker) const override { return docker ? 20 : 21; }
  // Every VM has kShareHotplugSlots PCIe root ports (microvm with its PCIe
  // host bridge) where a share is plugged once it runs: vhost-user-fs
  // cannot be part of a saved VM (QEMU 7.2 refuses to load a stream into
  // a VM that has one), so a restored VM takes its shares this way.
  size_t HotplugShares() const override { return kShareHotplugSlots; }
  absl::Status AttachShare(const VmConfig& config, size_t slot, const VmShare& share) override;

 private:
  std::string qemu_;
  uint32_t probe_uid_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_QEMU_BACKEND_H_
