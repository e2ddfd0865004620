// What policyd makes of a resolved set of Kits: network-policy compiled
// into the sandbox's rules per phase, the plan vmmd applies (credentials,
// lifecycle, volumes, ports, resources, privileged, the agent), the
// surface in its wire form, and the gate that records what a sandbox was
// granted and holds an update that would widen it until someone approves.
#ifndef AIRLOCK_POLICYD_KIT_GRANT_H_
#define AIRLOCK_POLICYD_KIT_GRANT_H_

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/state_db.h"
#include "common/kit/resolve.h"
#include "policyd/rule_store.h"
#include "protos/policy/v1/policy.pb.h"

namespace airlock::policyd {

// Rule origins of kit-compiled rules, by phase.
inline constexpr char kKitInstallOrigin[] = "kit:install";
inline constexpr char kKitRuntimeOrigin[] = "kit:runtime";

// CompileNetworkRules turns the merged network-policy of `merged` for
// `phase` into rule specs for `sandbox`: each host of each entry becomes
// one rule with the entry's methods and paths ("*" and "**" become "**").
// An entry Airlock's rule grammar cannot express is INVALID_ARGUMENT
// naming it; nothing is dropped silently.
absl::StatusOr<std::vector<RuleSpec>> CompileNetworkRules(const kit::Descriptor& merged,
                                                          kit::Phase phase,
                                                          const std::string& sandbox);

// InjectFormat maps a credential@1 inject rule to the placement proxyd
// applies: scheme basic -> "basic:<user>"; header Authorization with
// "Bearer %s" (or no header and no format) -> "bearer"; a header with
// "%s" or no format -> "header:<name>"; any other template ->
// "header:<name>=<template>" (exactly one "%s").
absl::StatusOr<std::string> InjectFormat(const kit::InjectRule& rule);

// BuildPlan derives what vmmd applies from a resolution. Without
// `allow_privileged`, a required privileged@1 is FAILED_PRECONDITION and
// an optional one is left out (and said so in `skipped`).
absl::StatusOr<airlock::policy::v1::KitPlan> BuildPlan(const kit::ResolvedKits& resolved,
                                                       bool allow_privileged,
                                                       std::vector<std::string>* skipped);

// Surface conversions; SurfaceFromProto(SurfaceToProto(s)) == s.
void SurfaceToProto(const kit::Surface& s, airlock::policy::v1::GrantSurface* out);
kit::Surface SurfaceFromProto(const airlock::policy::v1::GrantSurface& p);

// KitGate keeps, per sandbox, the Kits and args it runs, the surface it
// was granted, its phase and the rules both phases compile to; and the
// updates held for approval. State lives in policyd's SQLite file; a
// grant and its rules change in one transaction.
class KitGate {
 public:
  KitGate(StateDb* db, RuleStore* rules) : db_(db), rules_(rules) {}

  // Resolve composes the request's Kits and gates them (see policy.proto).
  absl::StatusOr<airlock::policy::v1::ResolveResponse> Resolve(
      const airlock::policy::v1::ResolveRequest& req);
  absl::StatusOr<airlock::policy::v1::ApproveResponse> Approve(const std::string& hold_id);
  absl::StatusOr<std::vector<airlock::policy::v1::Hold>> Holds(const std::string& sandbox);
  // SetPhase puts `phase`'s kit rules in force; NOT_FOUND for a sandbox
  // without kits.
  absl::Status SetPhase(const std::string& sandbox, const std::string& phase);
  // Forget drops a sandbox's grant, holds and kit rules.
  absl::Status Forget(const std::string& sandbox);

 private:
  // Granted is what a sandbox holds now.
  struct Granted {
    std::string phase;
    kit::Surface surface;
  };
  // Candidate is a gated resolution, ready to apply or to hold.
  struct Candidate {
    airlock::policy::v1::ResolveRequest request;
    airlock::policy::v1::ResolveResponse response;
    std::vector<RuleSpec> install_rules;
    std::vector<RuleSpec> runtime_rules;
  };
  absl::StatusOr<Candidate> Prepare(const airlock::policy::v1::ResolveRequest& req);
  absl::StatusOr<bool> Find(const std::string& sandbox, Granted* out);
  // Apply records `c` as the sandbox's grant and puts its rules for
  // `phase` in force, in one transaction.
  // `also` runs inside the same transaction.
  absl::Status Apply(const Candidate& c, const std::string& phase,
                     const std::function<absl::Status()>& also);

  StateDb* db_;
  RuleStore* rules_;
  std::mutex mu_;
};

}  // namespace airlock::policyd

#endif  // AIRLOCK_POLICYD_KIT_GRANT_H_
