// A guest's own identity, applied when vmmd claims it (the agent's Claim):
// hostname, machine id, a reseeded entropy pool and the host's clock. A
// guest restored from a snapshot is, until then, a copy of every other
// guest restored from it.
#ifndef AIRLOCK_GUEST_IDENTITY_H_
#define AIRLOCK_GUEST_IDENTITY_H_

#include <string>

#include "absl/status/status.h"
#include "protos/agent/v1/agent.pb.h"

namespace airlock::guest {

// ValidateClaim says what is wrong with `claim` (INVALID_ARGUMENT), before
// anything is changed.
absl::Status ValidateClaim(const airlock::agent::v1::ClaimRequest& claim);

// WriteMachineId replaces `root`/etc/machine-id with `id` and a newline.
absl::Status WriteMachineId(const std::string& root, const std::string& id);

// ApplyClaim applies a validated `claim` to this guest (PID 1 only): the
// hostname, /etc/machine-id, the seed mixed into the entropy pool and the
// CRNG reseeded (RNDADDENTROPY, RNDRESEEDCRNG), and CLOCK_REALTIME.
absl::Status ApplyClaim(const airlock::agent::v1::ClaimRequest& claim);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_IDENTITY_H_
