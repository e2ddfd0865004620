// Checking Kits by the rules of the form they are in, as `airlock kit
// validate` does: a descriptor file by the authoring rules, an OCI
// layout's descriptor by the published ones. Nothing only sandbox
// creation supplies is asked for: a required arg needs no value,
// `${{ kit.env.NAME }}` no variable, and a required capability type this
// host does not provide is only noted, because resolution is where the
// spec refuses it (§7.3). Several Kits are also composed, which does
// resolve them (resolve.h).
#ifndef AIRLOCK_COMMON_KIT_VALIDATE_H_
#define AIRLOCK_COMMON_KIT_VALIDATE_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kit/descriptor.h"
#include "common/kit/effective.h"

namespace airlock::kit {

// ValidatedKit is one ref, checked on its own.
struct ValidatedKit {
  std::string ref;
  bool from_oci_layout = false;
  // Form::kAuthored for a file or a built-in agent, Form::kPublished for
  // an OCI layout.
  Descriptor descriptor;
};

// Validation is what ValidateKits found acceptable.
struct Validation {
  // Each ref as given, in the order given.
  std::vector<ValidatedKit> kits;
  // The composition order (workload first) when several refs were given;
  // empty for one.
  std::vector<std::string> order;
  // Advisory, each starting with its ref: the size budget, a lone mixin's
  // requires, and each capability entry whose type this host does not
  // provide (what a sandbox would do about it).
  std::vector<std::string> warnings;
};

// ValidateKits checks each of `refs` (descriptor files, OCI image layout
// directories or "builtin:NAME", see LoadKitRef) by the rules of its form. Each
// supplied arg is checked against the declaration of every Kit that
// declares it (enum, pattern; a build arg of a published layout is
// fixed), and one no Kit declares is an error; args not supplied are not
// asked for. With several refs, the Kits are then resolved with `args` and
// `env` and composed, as a sandbox would (ResolveKits), so their required
// args and container variables are needed then. Errors name the ref and
// the field path.
absl::StatusOr<Validation> ValidateKits(const std::vector<std::string>& refs, const ArgValues& args,
                                        const std::map<std::string, std::string>& env = {});

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_VALIDATE_H_
