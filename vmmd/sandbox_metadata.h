// What a sandbox carries for people and API clients beside what it runs:
// its display name, labels and deadline. Validation and the deadline's
// arithmetic as pure functions; SandboxManager applies them.
#ifndef AIRLOCK_VMMD_SANDBOX_METADATA_H_
#define AIRLOCK_VMMD_SANDBOX_METADATA_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

// ValidateDisplayName accepts "" or up to 64 letters, digits, '_' and '-'.
absl::Status ValidateDisplayName(absl::string_view display_name);

// ValidateMetadata checks the display name, the labels (at most 64; keys 1
// to 63 of letters, digits, '_', '-', '.', '/'; values at most 256 bytes)
// and the timeout (at most 30 days) of a spec to be created.
absl::Status ValidateMetadata(const airlock::vmm::v1::SandboxSpec& spec);

// ArmedExpiry is the expires_at a sandbox gets when it becomes RUNNING at
// `now`: now + timeout, or 0 without a timeout.
int64_t ArmedExpiry(const airlock::vmm::v1::SandboxSpec& spec, int64_t now);

// Expired is true when a RUNNING sandbox's armed deadline has passed.
bool Expired(const airlock::vmm::v1::Sandbox& sb, int64_t now);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SANDBOX_METADATA_H_
