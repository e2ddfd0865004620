// Validation of what a user asks a sandbox to be: its name, CPUs and memory
// (plain sizes or the Cloud Sandboxes API's named sizes), with defaults
// taken from the host as sbx does.
#ifndef AIRLOCK_VMMD_RESOURCES_H_
#define AIRLOCK_VMMD_RESOURCES_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/sizes.h"

namespace airlock::vmmd {

// kMinMemoryMib is the smallest guest memory accepted.
inline constexpr uint64_t kMinMemoryMib = 512;

// ValidateName accepts 2..63 characters of letters, digits, '-' and '.',
// starting with a letter or digit; "default" is reserved.
absl::Status ValidateName(absl::string_view name);


// HostFacts are the host's CPUs and memory.
struct HostFacts {
  uint32_t cpus;
  uint64_t memory_mib;
  static HostFacts Read();
};

// Resolved is the effective CPU count and memory of a sandbox.
struct Resolved {
  uint32_t cpus;
  uint64_t memory_mib;
};

// ResolveResources applies the size name (for fields left 0), then the
// defaults (CPUs: host CPUs up to 4; memory: half the host clamped to
// 512 MiB..32 GiB), then the limits: 1..64 CPUs, at least 512 MiB, at most
// twice the host's memory (guest memory is allocated as it is touched).
absl::StatusOr<Resolved> ResolveResources(uint32_t cpus, uint64_t memory_mib,
                                          absl::string_view size, const HostFacts& host);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_RESOURCES_H_
