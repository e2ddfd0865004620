// What vmmd keeps of the sandboxes' jails: the id pool (each sandbox's
// block, given at its first boot and back to the pool at rm), the
// per-sandbox cgroups, and the host-side files a jail uses (its socket
// directory, its empty roots, the VM files its uid must write).
#ifndef AIRLOCK_VMMD_SANDBOX_JAILS_H_
#define AIRLOCK_VMMD_SANDBOX_JAILS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "vmmd/cgroup.h"
#include "vmmd/hypervisor.h"
#include "vmmd/shares.h"

namespace airlock::vmmd {

struct JailOptions {
  // false: QEMU and virtiofsd run as vmmd does (for debugging only).
  bool enabled = true;
  // First host id of the pool; blocks of kJailIdsPerSandbox follow it.
  uint32_t id_base = kDefaultJailIdBase;
  std::string runtime_dir;
  // Names this vmmd's cgroup directory (several vmmds may share a host).
  std::string instance;
};

class SandboxJails {
 public:
  explicit SandboxJails(JailOptions options);

  bool enabled() const { return options_.enabled; }
  // Describe is one line for vmmd's log: ids, cgroups, and what is missing.
  std::string Describe() const;

  // SocketDir is the directory of `name`'s sockets.
  std::string SocketDir(const std::string& name) const;

  // Assign is the id block of a sandbox: `current` when it has one, else
  // the lowest block not in `used` (an ordinary user's vmmd: its own uid).
  absl::StatusOr<uint32_t> Assign(uint32_t current, const std::vector<uint32_t>& used) const;

  // Prepare readies `config` (jail_uid set) for a boot, or a claimed warm
  // VM for its shares (again: it changes nothing already right): the socket
  // directory and the writable VM files belong to its uid, the jail roots
  // exist, and the cgroup has its limits (config.cgroup_procs).
  absl::Status Prepare(VmConfig& config);

  // ForShare is the jail of share `index` of `config` (after Prepare).
  ShareJail ForShare(const VmConfig& config, size_t index) const;

  // Teardown removes `name`'s jail roots, socket directory and cgroup,
  // once its processes are gone.
  void Teardown(const std::string& name);

  // Rename moves `from`'s jail roots, socket directory and cgroup (with
  // its processes) to `to`, replacing what `to` has left of them (a warm
  // VM becoming a sandbox). The jailed processes keep their own view.
  absl::Status Rename(const std::string& from, const std::string& to);

  // Usage is `name`'s cgroup figures, when it has a cgroup.
  std::optional<CgroupUsage> Usage(const std::string& name) const;

 private:
  std::string JailDir(const std::string& name) const;

  JailOptions options_;
  std::optional<Cgroups> cgroups_;
  std::string cgroups_missing_;
};

// InstanceName is a short stable name for the vmmd whose state is in
// `state_dir`.
std::string InstanceName(const std::string& state_dir);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SANDBOX_JAILS_H_
