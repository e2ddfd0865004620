// The guest's egress interface, set up by the agent over rtnetlink before
// switch root (it was six busybox `ip` processes, ~0.13 s of a TCG boot).
//
// A guest has no NIC. A dummy interface, egress0, holds 10.0.2.15/24 and
// the default route, so that connect() to any address reaches the egress
// ruleset's redirect (guest/egress.nft) instead of failing with "network
// unreachable". The dummy module's own dummy0 is removed.
// Where it stops: it does not load the ruleset (nft does) or bring up lo
// (SwitchRoot does), and it makes no route to anywhere real.
#ifndef AIRLOCK_GUEST_NET_SETUP_H_
#define AIRLOCK_GUEST_NET_SETUP_H_

#include <string>

#include "absl/status/status.h"

namespace airlock::guest {

inline constexpr char kEgressInterface[] = "egress0";
inline constexpr char kEgressInterfaceKind[] = "dummy";
inline constexpr char kEgressAddress[] = "10.0.2.15";
inline constexpr int kEgressPrefix = 24;

// SetUpEgressInterface creates egress0 (a link of `kind`) in the calling
// thread's network namespace, gives it kEgressAddress/kEgressPrefix,
// brings it up and routes the default route through it. An error names
// the step. The guest's is a dummy; `kind` is for tests on hosts whose
// kernel has no dummy driver (another device that drops what it is sent,
// such as "ifb", behaves the same here).
absl::Status SetUpEgressInterface(const std::string& kind = kEgressInterfaceKind);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_NET_SETUP_H_
