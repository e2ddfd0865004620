// policyd: network rules, presets, the decision check and the compiled
// snapshots proxyd enforces (kits and the grant surface are not built yet
// and answer UNIMPLEMENTED). This file only wires objects.
#include "common/daemon_runtime.h"
#include "policyd/policy_service.h"
#include "policyd/rule_store.h"

int main(int argc, char** argv) {
  return airlock::DaemonMain("policyd", argc, argv, {}, [](airlock::DaemonRuntime& rt) {
    airlock::policyd::RuleStore store(&rt.state());
    if (absl::Status s = store.Init(); !s.ok()) return s;
    airlock::policyd::PolicyService service(&store);
    return rt.Serve({&service});
  });
}
