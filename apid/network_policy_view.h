// How Airlock's rules and decisions look through the REST API: the
// effective and exact views of the rules that apply (default deny, deny
// beats allow), and the decision log coalesced into policy-log entries.
// Pure functions, unit-tested.
#ifndef AIRLOCK_APID_NETWORK_POLICY_VIEW_H_
#define AIRLOCK_APID_NETWORK_POLICY_VIEW_H_

#include <string>
#include <vector>

#include "protos/api/v1/wire.pb.h"
#include "protos/policy/v1/policy.pb.h"
#include "protos/proxy/v1/proxy.pb.h"

namespace airlock::apid {

// LayerOf names where a rule came from: a kit ("kit"), a preset
// ("default"), the sandbox's own ("attached") or the owner's global rules
// ("owner").
std::string LayerOf(const airlock::policy::v1::Rule& rule);

// NetworkPolicies renders `rules`. The exact view is the expression
// any(allows) AND NOT any(denies), each leaf a destination of its kind
// (dns, dnsSubtree, ip, cidr) with its source; its revision changes with
// the rules.
airlock::api::wire::v1::GetNetworkPoliciesResponse NetworkPolicies(
    const std::vector<airlock::policy::v1::Rule>& rules);

// PolicyLog coalesces `decisions` (oldest first) by destination, verdict
// and rule into entries with counts and first/last times, newest last
// first, keeping those seen in [since_ms, until_ms] (0: unbounded).
std::vector<airlock::api::wire::v1::PolicyLogEntry> PolicyLog(
    const std::vector<airlock::proxy::v1::Decision>& decisions, int64_t since_ms,
    int64_t until_ms);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_NETWORK_POLICY_VIEW_H_
