#include "common/kit/validate.h"

#include <set>
#include <utility>
#include <variant>

#include "absl/strings/str_cat.h"
#include "common/kit/internal/ref_errors.h"
#include "common/kit/oci.h"
#include "common/kit/problems.h"
#include "common/kit/resolve.h"

namespace airlock::kit {
namespace {

using internal::CheckArgsUsed;
using internal::InRef;

// UnprovidedTypes notes each entry whose type this host does not provide,
// saying what creating a sandbox would do about it.
void UnprovidedTypes(const std::string& ref, const Descriptor& d,
                     std::vector<std::string>* warnings) {
  const std::set<std::string>& provided = AcceptedTypes();
  auto note = [&](const FieldPath& at, const CapabilityEntry& e, absl::string_view outcome) {
    if (provided.count(e.type) > 0) return;
    warnings->push_back(
        absl::StrCat(ref, ": ", at.str(), ": this host does not provide ", e.type, "; ", outcome));
  };
  FieldPath caps = FieldPath().Key("capabilities");
  for (size_t i = 0; i < d.capabilities.size(); ++i) {
    const CapabilityItem& item = d.capabilities[i];
    if (const auto* e = std::get_if<CapabilityEntry>(&item)) {
      note(caps.Index(i), *e,
           e->optional ? "a sandbox skips the optional entry"
                       : "creating a sandbox refuses the kit while the entry is required");
      continue;
    }
    const auto& g = std::get<CapabilityGroup>(item);
    FieldPath members = caps.Index(i).Key("group").Key("capabilities");
    for (size_t j = 0; j < g.members.size(); ++j) {
      note(members.Index(j), g.members[j],
           g.optional ? "a sandbox skips the optional group"
                      : "creating a sandbox refuses the kit while the group is required");
    }
  }
}

// ValidateOne checks one ref alone and adds the names of the supplied args
// it declares to `used`.
absl::StatusOr<ValidatedKit> ValidateOne(const std::string& ref, const ArgValues& args,
                                         std::set<std::string>* used,
                                         std::vector<std::string>* warnings) {
  auto loaded = LoadKitRef(ref);
  if (!loaded.ok()) return InRef(ref, loaded.status());
  ValidatedKit kit{ref, loaded->from_oci_layout, std::move(loaded->descriptor)};
  for (const auto& [name, arg] : kit.descriptor.args) {
    if (args.count(name) == 0) continue;
    used->insert(name);
    if (kit.from_oci_layout && arg.build_phase()) {
      return absl::InvalidArgumentError(absl::StrCat(
          ref, ": arg \"", name, "\" is a build arg, fixed when the kit was published"));
    }
  }
  if (absl::Status s = CheckArgValues(kit.descriptor, args); !s.ok()) return InRef(ref, s);
  for (const std::string& w : kit.descriptor.warnings) warnings->push_back(ref + ": " + w);
  UnprovidedTypes(ref, kit.descriptor, warnings);
  return kit;
}

}  // namespace

absl::StatusOr<Validation> ValidateKits(const std::vector<std::string>& refs, const ArgValues& args,
                                        const std::map<std::string, std::string>& env) {
  if (refs.empty()) return absl::InvalidArgumentError("no kit given");
  Validation out;
  std::set<std::string> used;
  for (const std::string& ref : refs) {
    auto kit = ValidateOne(ref, args, &used, &out.warnings);
    if (!kit.ok()) return kit.status();
    out.kits.push_back(*std::move(kit));
  }
  if (absl::Status s = CheckArgsUsed(args, used); !s.ok()) return s;
  if (refs.size() == 1) {
    const ValidatedKit& only = out.kits[0];
    if (only.descriptor.kind == KitKind::kMixin) {
      for (const Requirement& r : only.descriptor.requirements) {
        out.warnings.push_back(
            absl::StrCat(only.ref, ": requires ", r.text, ", which only a composition can meet"));
      }
    }
    return out;
  }
  // Composing needs the effective form of each Kit, so this is where the
  // values creation supplies are needed.
  auto resolved = ResolveKits(refs, args, env);
  if (!resolved.ok()) return resolved.status();
  out.order = resolved->composition.order;
  return out;
}

}  // namespace airlock::kit
