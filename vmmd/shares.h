// Host paths shared into a sandbox (direct mode) through virtiofsd, one
// process per path. Read-only is enforced on the host: the export is a
// read-only bind mount in a private mount namespace, so a guest that is
// root cannot write through it. virtiofsd pivots into the exported
// directory, and the guest kernel resolves symlinks itself, so a symlink in
// the workspace never reaches a host file outside it.
#ifndef AIRLOCK_VMMD_SHARES_H_
#define AIRLOCK_VMMD_SHARES_H_

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.pb.h"
#include "vmmd/jail.h"

namespace airlock::vmmd {

// ValidateMount checks a requested share and makes its path canonical: it
// must exist, a directory, or a single file when read-only.
absl::Status ValidateMount(airlock::vmm::v1::Mount* m);

// Share is one export of a running sandbox.
struct Share {
  std::string tag;     // virtiofs tag, "airlock<N>"
  std::string guest_path;  // where the guest mounts it
  std::string socket;  // vhost-user socket virtiofsd listens on
  airlock::vmm::v1::Mount mount;
  bool file = false;
};

// ShareJail is where a sandbox's virtiofsd runs (jail.h): in a user
// namespace whose ids are ShareIdMap(base, owner of the shared tree), so
// it acts on the tree with the owner's permissions (and the sandbox's own
// block of ids), and no host capability; its root holds /usr, the socket
// directory and the shared tree (a single file under /share), nothing else.
struct ShareJail {
  uint32_t base = 0;
  std::string root;  // an empty directory
  std::string socket_dir;
  // virtiofsd's lock directory, its /var/run/virtiofsd (owned by the base id).
  std::string lock_dir;
  std::vector<std::string> cgroup_procs;
};

// VirtiofsdJail is the jail and argv of `share`'s virtiofsd.
// The guest user is the tree's owner only when that owner is not root
// (ShareIdMap). Fails when the shared path cannot be read.
absl::StatusOr<std::pair<JailSpec, std::vector<std::string>>> VirtiofsdJail(
    const Share& share, const ShareJail& jail, const std::string& virtiofsd);

// VirtiofsdCommand is the argv that exports `share` (wrapped in unshare for
// read-only and single-file exports; `stage_dir` holds the file's stand-in).
std::vector<std::string> VirtiofsdCommand(const Share& share, const std::string& stage_dir,
                                          const std::string& virtiofsd);

// StartShare launches virtiofsd for `share` (detached, so it outlives vmmd
// like the VM it serves), jailed when `jail` is given, and waits until its
// socket exists.
absl::StatusOr<pid_t> StartShare(const Share& share, const ShareJail* jail,
                                 const std::string& stage_dir, const std::string& log_path);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SHARES_H_
