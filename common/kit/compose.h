// Composing effective Kits into one sandbox: exactly one workload plus
// mixins, checked as a closed set (every require met inside it, no
// conflict present, no present provider violating an integrates, one
// owner per provided name), ordered providers-first by the provides /
// requires / integrates graph, and their declarations merged by the
// spec's per-type rules into one effective descriptor.
#ifndef AIRLOCK_COMMON_KIT_COMPOSE_H_
#define AIRLOCK_COMMON_KIT_COMPOSE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kit/descriptor.h"

namespace airlock::kit {

// KitInput is one Kit to compose: the reference it was named by (its
// identity in diagnostics and in tie-breaks) and its effective descriptor
// (MakeEffective's output: arguments expanded, groups selected).
struct KitInput {
  std::string ref;
  Descriptor descriptor;
};

// Composition is the result of Compose.
struct Composition {
  // Kit refs in composition order: layers stack and hooks run in it.
  std::vector<std::string> order;
  // The merged effective descriptor: kind workload, display metadata of
  // the workload, relations merged, capabilities merged per type with
  // `source` stripped. It is validated again as a whole, so the
  // cross-entry rules (inject domains within the merged allow lists, the
  // session/launch agreements) hold across Kits too.
  Descriptor merged;
};

// Compose checks and merges `kits`. Order: a provider before every Kit
// that requires it or integrates with it; the spec leaves independent
// Kits unordered, and this implementation puts the workload first and
// the rest by ref, so flag order never matters. Merge rules, by type:
//   network-policy @1/@2  one entry; per phase allow and deny concatenated,
//                         identical entries deduplicated, a bounded allow
//                         dropped where another entry grants its host
//                         outright; @2 if any contribution used @2.
//   credential@1          one owner per (service, phase).
//   volume@1, host-mount@1  one owner per cleaned path, across both types.
//   lifecycle@1           hooks and files concatenated in order; one
//                         author per file path and per interactive tail.
//   resources@1, agent-sessions@1, agent-interactive-sessions@1
//                         one author; an identical restatement collapses.
//   dev.airlock/agent@1   the workload's; a mixin cannot declare one.
//   acp@1                 one config per agent.
//   agent-context@1       every contribution kept.
//   anything else         keyed on type and config: identical requests
//                         collapse, different ones both stay.
// A merged entry is required if any contributor required it and keeps the
// first non-empty name.
absl::StatusOr<Composition> Compose(const std::vector<KitInput>& kits);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_COMPOSE_H_
