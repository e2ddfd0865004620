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

// HostsWithName is `hosts` (an /etc/hosts) with `hostname` on the line of
// 127.0.1.1, Debian's address for the machine's own name: any other
// 127.0.1.1 line goes, the rest is kept in order (an empty file gets the
// localhost lines too). A program that looks up its own host's name (git
// daemon, sudo) then finds it in the file instead of asking DNS, which
// goes through proxyd and is not attached yet while the sandbox starts
// (a lookup there waited out the resolver's timeouts: 10 s of a clone
// mode start).
std::string HostsWithName(const std::string& hosts, const std::string& hostname);

// WriteHostsName rewrites `root`/etc/hosts with HostsWithName (replaced
// whole, never left half written).
absl::Status WriteHostsName(const std::string& root, const std::string& hostname);

// ApplyClaim applies a validated `claim` to this guest (PID 1 only): the
// hostname (and its /etc/hosts line, when the file can be written),
// /etc/machine-id, the seed mixed into the entropy pool and the CRNG
// reseeded (RNDADDENTROPY, RNDRESEEDCRNG), and CLOCK_REALTIME.
absl::Status ApplyClaim(const airlock::agent::v1::ClaimRequest& claim);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_IDENTITY_H_
