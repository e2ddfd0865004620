#include "common/policy/rule_wire.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock::policy {

namespace pb = airlock::policy::v1;

void RuleToProto(const Rule& r, pb::Rule* out) {
  out->set_id(r.id);
  out->set_action(r.action == Action::kAllow ? pb::ALLOW : pb::DENY);
  out->set_resource(r.resource.text);
  for (const auto& m : r.methods) out->add_methods(m);
  for (const auto& p : r.paths) out->add_paths(p);
  out->set_sandbox(r.sandbox);
  out->set_origin(r.origin);
}

void SpecToProto(const RuleSpec& spec, pb::Rule* out) {
  out->set_action(spec.action == Action::kAllow ? pb::ALLOW : pb::DENY);
  out->set_resource(spec.resource);
  if (!spec.methods.empty()) {
    for (absl::string_view m : absl::StrSplit(spec.methods, ',')) out->add_methods(std::string(m));
  }
  for (const auto& p : spec.paths) out->add_paths(p);
  out->set_sandbox(spec.sandbox);
  out->set_origin(spec.origin);
}

RuleSpec SpecFromProto(const pb::Rule& r) {
  RuleSpec spec;
  spec.action = r.action() == pb::ALLOW ? Action::kAllow : Action::kDeny;
  spec.resource = r.resource();
  spec.methods = absl::StrJoin(r.methods(), ",");
  spec.paths.assign(r.paths().begin(), r.paths().end());
  spec.sandbox = r.sandbox();
  spec.origin = r.origin();
  return spec;
}

absl::StatusOr<Rule> RuleFromProto(const pb::Rule& r) {
  if (r.action() != pb::ALLOW && r.action() != pb::DENY) {
    return absl::InvalidArgumentError(absl::StrCat("rule ", r.id(), " has no action"));
  }
  auto rule = ValidateRule(SpecFromProto(r));
  if (!rule.ok()) return rule.status();
  rule->id = r.id();
  return rule;
}

absl::StatusOr<std::shared_ptr<const RuleSet>> CompileSnapshot(const pb::CompiledPolicy& policy) {
  std::vector<Rule> rules;
  rules.reserve(policy.rules_size());
  for (const auto& r : policy.rules()) {
    auto rule = RuleFromProto(r);
    if (!rule.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("snapshot ", policy.revision(), ": ", rule.status().message()));
    }
    rules.push_back(std::move(*rule));
  }
  return std::make_shared<const RuleSet>(std::move(rules));
}

}  // namespace airlock::policy
