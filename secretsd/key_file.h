// secretsd's master key file: 32 raw bytes, created once with mode 0600,
// and refused when group or others may access it or its size is wrong.
#ifndef AIRLOCK_SECRETSD_KEY_FILE_H_
#define AIRLOCK_SECRETSD_KEY_FILE_H_

#include <string>

#include "absl/status/statusor.h"
#include "secretsd/crypto.h"

namespace airlock::secretsd {

// LoadKeyFile reads the key at `path` (symlinks followed, so a mounted
// secret works). NOT_FOUND when there is no file (a dangling symlink is
// INVALID_ARGUMENT, so it is never replaced by a new key); INVALID_ARGUMENT, naming
// the file and the fix, when it is not a regular file, when its mode
// grants group or others any access, or when it is not exactly kKeySize
// bytes.
absl::StatusOr<SecretKey> LoadKeyFile(const std::string& path);

// CreateKeyFile writes a fresh random key to `path` with mode 0600: to a
// temporary file beside it (O_CREAT|O_EXCL, fsync) that is then renamed
// into place, so a crash never leaves a short key behind. ALREADY_EXISTS
// when `path` exists. The directory must exist.
absl::StatusOr<SecretKey> CreateKeyFile(const std::string& path);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_KEY_FILE_H_
