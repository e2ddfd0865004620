// Resolving the Kits a sandbox is created or updated with: load each
// reference, take it to its effective form with the installer's args,
// compose the set, and project the grant surface. This is the one
// pipeline behind `airlock kit inspect|diff`, the composition check of
// `airlock kit validate` (validate.h), policyd's Resolve and Diff, and
// the kit benchmark.
#ifndef AIRLOCK_COMMON_KIT_RESOLVE_H_
#define AIRLOCK_COMMON_KIT_RESOLVE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kit/compose.h"
#include "common/kit/descriptor.h"
#include "common/kit/effective.h"
#include "common/kit/surface.h"

namespace airlock::kit {

// AcceptedTypes is every capability type Airlock accepts: the spec's
// well-known types and Airlock's own (kAirlockAgent). A required entry of
// any other type refuses its Kit by name; an optional one is skipped and
// recorded.
const std::set<std::string>& AcceptedTypes();

// IsEnforcedType reports a type Airlock applies (network-policy@1/@2,
// credential@1, lifecycle@1, volume@1, port@1, resources@1,
// privileged@1, dev.airlock/agent@1). The other accepted types are
// recorded in the surface and reported as not enforced.
bool IsEnforcedType(const std::string& type);

// KitSkip is a capability entry one Kit left out at selection.
struct KitSkip {
  std::string ref;
  SkippedCapability skipped;
};

// PublishedKit is one ref as given, in its published form: a file's
// build-phase args expanded, an OCI layout's descriptor as published.
struct PublishedKit {
  std::string ref;
  bool from_oci_layout = false;
  Descriptor published;
  ArgValues build_args;  // the build-phase values supplied (files only)
};

// ResolvedKits is a composed, effective set of Kits.
struct ResolvedKits {
  // Each kit as given, in the order given.
  std::vector<PublishedKit> kits;
  Composition composition;
  Surface surface;
  // Accepted types present in the merged descriptor that Airlock does not
  // enforce, sorted.
  std::vector<std::string> not_enforced;
  std::vector<KitSkip> skipped;
  // Container variables the Kits' args export (`env:`), by Kit order.
  std::map<std::string, std::string> env_exports;
  // Resolved create-phase arg values per ref.
  std::map<std::string, ArgValues> args;
  std::vector<std::string> warnings;
};

// ResolveKits loads `refs` (descriptor files, OCI image layout
// directories or "builtin:NAME"; see LoadKitRef), expands a file's (or a
// built-in agent's) build-phase args (an OCI layout is published, its
// build args are fixed), makes each effective
// with the create-phase args it declares, and composes them. Each supplied
// arg goes to every Kit that declares it; one that no Kit declares is an
// error, so a typo never passes silently. `env` is the container
// environment `${{ kit.env.NAME }}` reads. A single mixin resolves on its
// own (its requires become warnings); anything else composes, with
// exactly one workload. Errors name the ref first.
absl::StatusOr<ResolvedKits> ResolveKits(const std::vector<std::string>& refs,
                                         const ArgValues& args,
                                         const std::map<std::string, std::string>& env = {});

// DiffKits resolves `old_refs` and `new_refs` (each side with the args
// its kits declare; one neither declares is an error) and compares the new
// surface against the old one.
absl::StatusOr<SurfaceDiff> DiffKits(const std::vector<std::string>& old_refs,
                                     const std::vector<std::string>& new_refs,
                                     const ArgValues& args,
                                     const std::map<std::string, std::string>& env = {});

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_RESOLVE_H_
