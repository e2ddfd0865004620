// Mounting the host paths vmmd shares into the guest (virtiofs).
#ifndef AIRLOCK_GUEST_MOUNTS_H_
#define AIRLOCK_GUEST_MOUNTS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace airlock::guest {

// MountShare mounts virtiofs export `tag` at `path` (a directory), or with
// `file` mounts it under /run/airlock/shares/<tag> and bind-mounts the one
// file it holds onto `path`. Missing parent directories are created.
// `wait`: the export's device was just plugged into the running VM, so its
// tag may not be known yet (the kernel's hot-plug runs on its own); the
// mount is tried again until it is, for up to that long.
absl::Status MountShare(const std::string& tag, const std::string& path, bool read_only,
                        bool file, absl::Duration wait = absl::ZeroDuration());

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_MOUNTS_H_
