// Mounting the host paths vmmd shares into the guest (virtiofs).
#ifndef AIRLOCK_GUEST_MOUNTS_H_
#define AIRLOCK_GUEST_MOUNTS_H_

#include <string>

#include "absl/status/status.h"

namespace airlock::guest {

// MountShare mounts virtiofs export `tag` at `path` (a directory), or with
// `file` mounts it under /run/airlock/shares/<tag> and bind-mounts the one
// file it holds onto `path`. Missing parent directories are created.
absl::Status MountShare(const std::string& tag, const std::string& path, bool read_only,
                        bool file);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_MOUNTS_H_
