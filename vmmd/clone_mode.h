// Clone mode's fixed places: where the host repo appears in the guest and
// the port of the guest's git daemon (vmmd publishes it as the host repo's
// sandbox-<name> remote).
#ifndef AIRLOCK_VMMD_CLONE_MODE_H_
#define AIRLOCK_VMMD_CLONE_MODE_H_

#include <cstdint>

namespace airlock::vmmd {

// kCloneSource is the read-only mount of the host repo in the guest.
inline constexpr char kCloneSource[] = "/run/sandbox/source";
// kGitDaemonPort is the guest's git daemon port (git's own default).
inline constexpr uint32_t kGitDaemonPort = 9418;

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_CLONE_MODE_H_
