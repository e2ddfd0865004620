// Putting a kit plan's guest paths in place at boot: its lifecycle files
// and its volumes. File content travels in the agent's WriteFile stream,
// so its size is bounded by no command line; no shell runs. What the
// agent's file calls do not do (mounting a tmpfs, giving an existing
// volume root to the agent user) is an exec with a fixed argv.
#ifndef AIRLOCK_VMMD_KIT_FILES_H_
#define AIRLOCK_VMMD_KIT_FILES_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "grpcpp/channel.h"
#include "protos/policy/v1/policy.pb.h"

namespace airlock::vmmd {

// kKitFileChunkBytes is the most file content one WriteFile message
// carries.
inline constexpr size_t kKitFileChunkBytes = 256 << 10;

// ParseKitMode reads a kit's octal mode ("0644", "755"); empty gives
// `fallback`. Anything else than 3 or 4 octal digits is INVALID_ARGUMENT.
absl::StatusOr<uint32_t> ParseKitMode(const std::string& mode, uint32_t fallback);

// WriteKitFile writes `file` into the guest behind `agent`. Its directory
// is made when missing, each directory made belonging to the agent user
// (root when the guest has no "agent"). The content goes to a new file of
// the agent user with the file's mode (default 0644) that then replaces
// whatever was at the path, a symlink included, without following it.
// Without overwrite an existing entry at the path is left as it is.
absl::Status WriteKitFile(std::shared_ptr<grpc::Channel> agent,
                          const airlock::policy::v1::KitFile& file);

// MakeKitVolume makes `volume`'s directory (and its missing parents, the
// agent user's), mounts a tmpfs there (nosuid, nodev, the volume's size)
// when asked and none is mounted yet, and gives the root to agent:agent
// (left to root when the guest has no such user) with the volume's mode.
// A path that is a symlink in the guest is refused: nothing is mounted,
// chowned or chmodded through it.
absl::Status MakeKitVolume(std::shared_ptr<grpc::Channel> agent,
                           const airlock::policy::v1::KitVolume& volume);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_KIT_FILES_H_
