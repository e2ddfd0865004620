// QEMU `-M microvm` as the Hypervisor: the command line, the TCG timing
// parameters, and the KVM probe.
#ifndef AIRLOCK_VMMD_QEMU_BACKEND_H_
#define AIRLOCK_VMMD_QEMU_BACKEND_H_

#include <string>
#include <vector>

#include "vmmd/hypervisor.h"

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
std::string KernelCmdline(const std::string& name, uint64_t tsc_khz, bool probe,
                          bool ensure_agent_user = false, bool docker = false);

class QemuBackend final : public Hypervisor {
 public:
  explicit QemuBackend(std::string qemu = "qemu-system-x86_64") : qemu_(std::move(qemu)) {}

  // Args is the full argv of the QEMU process for `config`.
  std::vector<std::string> Args(const VmConfig& config) const;

  absl::StatusOr<pid_t> Launch(const VmConfig& config) override;
  std::string Marker(const VmConfig& config) const override;
  std::pair<std::string, std::string> ProbeAccelerator(const std::string& kernel,
                                                       const std::string& initrd,
                                                       const std::string& work_dir) override;

 private:
  std::string qemu_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_QEMU_BACKEND_H_
