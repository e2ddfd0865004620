// One cgroup per sandbox, with its limits: memory (guest size plus a
// bounded overhead), CPU time (its vCPUs), and pids. cgroup v2 where the
// host's unified hierarchy has the controllers; the v1 hierarchies
// (memory, cpu, pids) where it does not (hybrid hosts, such as this
// project's CI machines).
//
// Sandboxes live under the cgroup vmmd itself was started in, in a
// directory named for the vmmd instance, so two vmmds on one host never
// share a sandbox's cgroup. Under systemd on cgroup v2 that needs
// Delegate=yes (the unit has it): vmmd moves itself into a "vmmd" leaf
// first, as v2 allows processes only in leaves of a controlled subtree.
#ifndef AIRLOCK_VMMD_CGROUP_H_
#define AIRLOCK_VMMD_CGROUP_H_

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::vmmd {

struct CgroupLimits {
  uint64_t memory_bytes = 0;
  // CPU time as a number of CPUs (cpus * period of quota); 0: no limit.
  uint32_t cpus = 0;
  uint32_t pids = 0;
};

// CgroupUsage is what a sandbox's cgroup reports.
struct CgroupUsage {
  uint64_t memory_bytes = 0;       // now
  uint64_t memory_peak_bytes = 0;  // highest seen (0 where the kernel does not say)
  uint64_t memory_limit_bytes = 0;
  uint64_t oom_kills = 0;          // processes the cgroup's own limit killed
  uint64_t pids_limit = 0;
};

class Cgroups {
 public:
  // Detect finds the hierarchy to use from `mountinfo` and `self_cgroup`
  // (the contents of /proc/self/mountinfo and /proc/self/cgroup) and names
  // this vmmd's directory `instance`. Fails, saying why, when no memory
  // controller can be used.
  static absl::StatusOr<Cgroups> Detect(const std::string& mountinfo,
                                        const std::string& self_cgroup,
                                        const std::string& instance);
  // ForThisProcess is Detect on this process's own files.
  static absl::StatusOr<Cgroups> ForThisProcess(const std::string& instance);

  bool v2() const { return v2_; }
  // Describe says where sandboxes' cgroups are ("cgroup v1: /sys/fs/cgroup/memory/...").
  std::string Describe() const;

  // Prepare makes the instance directory (v2: moving this process into a
  // leaf and enabling the controllers). Idempotent.
  absl::Status Prepare();

  // Create makes (or updates) `name`'s cgroup with `limits` and returns the
  // cgroup.procs files a process writes to join it.
  absl::StatusOr<std::vector<std::string>> Create(const std::string& name,
                                                  const CgroupLimits& limits);
  // Usage reads `name`'s figures; NotFound when it has no cgroup.
  absl::StatusOr<CgroupUsage> Usage(const std::string& name) const;
  // Remove deletes `name`'s cgroup once its processes are gone (they are
  // killed first by the caller); a missing cgroup is fine.
  absl::Status Remove(const std::string& name);

  // Rename gives `from`'s cgroup, processes and all, the name `to` (an
  // empty cgroup already named `to` is removed first).
  absl::Status Rename(const std::string& from, const std::string& to);

  // Dirs is `name`'s cgroup directory in each hierarchy used.
  std::vector<std::string> Dirs(const std::string& name) const;

 private:
  bool v2_ = false;
  // Controller ("memory", "cpu", "pids"; "" for v2) to the directory holding
  // this instance's sandboxes.
  std::map<std::string, std::string> parents_;
  // v2: the cgroup vmmd was started in, which becomes the delegated root.
  std::string v2_base_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_CGROUP_H_
