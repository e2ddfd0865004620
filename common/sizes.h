// Sandbox sizes as users write them: memory ("2048", "512m", "4g") and the
// Cloud Sandboxes API's named sizes. Shared by vmmd, the CLI and apid, so
// all of them read a size the same way.
#ifndef AIRLOCK_COMMON_SIZES_H_
#define AIRLOCK_COMMON_SIZES_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock {

// ParseMemory reads "2048" (MiB), "512m", "512MiB", "4g", "4GiB" into MiB.
absl::StatusOr<uint64_t> ParseMemory(absl::string_view text);

// ParseDiskSize reads a disk size the same way, with "t"/"TiB" too:
// "10g", "512m", "1t", "20480" (MiB).
absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text);

// NamedSize is a size of the Cloud Sandboxes API.
struct NamedSize {
  uint32_t cpus;
  uint64_t memory_mib;
};

// LookupSize finds "micro", "small", "medium", "large" or "xl".
absl::StatusOr<NamedSize> LookupSize(absl::string_view name);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_SIZES_H_
