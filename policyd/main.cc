// policyd: network rules, presets, the decision check, kits and their
// widening gate, and the compiled snapshots proxyd enforces. This file
// only wires objects.
#include "common/daemon_runtime.h"
#include "policyd/kit_grant.h"
#include "policyd/policy_service.h"
#include "policyd/rule_store.h"

int main(int argc, char** argv) {
  return airlock::DaemonMain("policyd", argc, argv, {}, [](airlock::DaemonRuntime& rt) {
    airlock::policyd::RuleStore store(&rt.state());
    if (absl::Status s = store.Init(); !s.ok()) return s;
    airlock::policyd::KitGate kits(&rt.state(), &store);
    airlock::policyd::PolicyService service(&store, &kits);
    return rt.Serve({&service});
  });
}
