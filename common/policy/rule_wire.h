// Rules to and from airlock.policy.v1.Rule, so policyd's answers and the
// snapshots proxyd enforces carry the same rules. A snapshot's rules are
// validated again on arrival: proxyd trusts policyd, not the bytes.
#ifndef AIRLOCK_COMMON_POLICY_RULE_WIRE_H_
#define AIRLOCK_COMMON_POLICY_RULE_WIRE_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/policy/rules.h"
#include "protos/policy/v1/policy.pb.h"

namespace airlock::policy {

void RuleToProto(const Rule& rule, airlock::policy::v1::Rule* out);

absl::StatusOr<Rule> RuleFromProto(const airlock::policy::v1::Rule& rule);

// A rule spec to and from the wire form (unvalidated: ValidateRule judges it).
void SpecToProto(const RuleSpec& spec, airlock::policy::v1::Rule* out);
RuleSpec SpecFromProto(const airlock::policy::v1::Rule& rule);

// CompileSnapshot builds the RuleSet of a compiled policy.
absl::StatusOr<std::shared_ptr<const RuleSet>> CompileSnapshot(
    const airlock::policy::v1::CompiledPolicy& policy);

}  // namespace airlock::policy

#endif  // AIRLOCK_COMMON_POLICY_RULE_WIRE_H_
