// Default locations of Airlock's runtime and state directories, and the
// check that keeps the runtime directory private.
#ifndef AIRLOCK_COMMON_PATHS_H_
#define AIRLOCK_COMMON_PATHS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace airlock {

// DefaultRuntimeDir is where sockets and pid files live: $AIRLOCK_RUNTIME_DIR
// if set, else /run/airlock for root, else $XDG_RUNTIME_DIR/airlock, else
// /tmp/airlock-<uid>.
std::string DefaultRuntimeDir();

// DefaultStateDir is where SQLite state, disks and logs live:
// $AIRLOCK_STATE_DIR if set, else /var/lib/airlock for root, else
// $XDG_STATE_HOME/airlock, else ~/.local/state/airlock.
std::string DefaultStateDir();

// DefaultImageDir is where tools/build_images.sh puts guest images:
// $AIRLOCK_IMAGE_DIR if set, else $XDG_CACHE_HOME/airlock/images, else
// ~/.cache/airlock/images.
std::string DefaultImageDir();

// EnsurePrivateDir creates `path` (and missing parents) with mode 0700. An
// existing directory must be owned by the effective uid and have no group or
// other permission bits; otherwise it fails with a message saying how to fix
// it, and changes nothing.
absl::Status EnsurePrivateDir(absl::string_view path);

// MakeDirs creates `path` and missing parents with `mode` (like mkdir -p).
absl::Status MakeDirs(absl::string_view path, int mode);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_PATHS_H_
