#include "common/kit/resolve.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/kit/capabilities.h"
#include "common/kit/internal/ref_errors.h"
#include "common/kit/oci.h"

namespace airlock::kit {

namespace {

using internal::CheckArgsUsed;
using internal::InRef;

// ArgsFor picks the supplied args `d` declares for `phase`.
ArgValues ArgsFor(const Descriptor& d, const ArgValues& supplied, ArgPhase phase) {
  ArgValues out;
  for (const auto& [name, value] : supplied) {
    auto it = d.args.find(name);
    if (it == d.args.end()) continue;
    if (it->second.build_phase() == (phase == ArgPhase::kBuild)) out[name] = value;
  }
  return out;
}

}  // namespace

const std::set<std::string>& AcceptedTypes() {
  static const std::set<std::string>* types =
      new std::set<std::string>{std::string(kNetworkPolicyV1),
                                std::string(kNetworkPolicyV2),
                                std::string(kCredential),
                                std::string(kLifecycle),
                                std::string(kVolume),
                                std::string(kHostMount),
                                std::string(kPort),
                                std::string(kResources),
                                std::string(kPrivileged),
                                std::string(kSbx),
                                std::string(kLongRunning),
                                std::string(kGitIdentity),
                                std::string(kKitRegistry),
                                std::string(kAgentSessions),
                                std::string(kAgentInteractiveSessions),
                                std::string(kAgentContext),
                                std::string(kAgentSkills),
                                std::string(kAgentSkill),
                                std::string(kAcp),
                                std::string(kSshAgent),
                                std::string(kUsbDevice),
                                std::string(kAirlockAgent)};
  return *types;
}

bool IsEnforcedType(const std::string& type) {
  return type == kNetworkPolicyV1 || type == kNetworkPolicyV2 || type == kCredential ||
         type == kLifecycle || type == kVolume || type == kPort || type == kResources ||
         type == kPrivileged || type == kAirlockAgent;
}

namespace {

// Resolve is ResolveKits without the check for args no kit declares: it
// adds the names of the args some kit declares to `used`, so a caller
// resolving two sets with one arg list (DiffKits) judges them together.
absl::StatusOr<ResolvedKits> Resolve(const std::vector<std::string>& refs, const ArgValues& args,
                                     const std::map<std::string, std::string>& env,
                                     std::set<std::string>* used) {
  if (refs.empty()) return absl::InvalidArgumentError("no kit given");
  ResolvedKits out;
  std::vector<KitInput> inputs;
  for (const std::string& ref : refs) {
    auto loaded = LoadKitRef(ref);
    if (!loaded.ok()) return InRef(ref, loaded.status());
    PublishedKit kit{ref, loaded->from_oci_layout, std::move(loaded->descriptor), {}};
    for (const auto& [name, arg] : kit.published.args) {
      if (args.count(name)) used->insert(name);
    }
    if (!kit.from_oci_layout) {
      kit.build_args = ArgsFor(kit.published, args, ArgPhase::kBuild);
      auto expanded = ExpandBuildArgs(kit.published, kit.build_args);
      if (!expanded.ok()) return InRef(ref, expanded.status());
      kit.published = std::move(*expanded);
    } else {
      for (const auto& [name, value] : ArgsFor(kit.published, args, ArgPhase::kBuild)) {
        return absl::InvalidArgumentError(absl::StrCat(
            ref, ": arg \"", name, "\" is a build arg, fixed when the kit was published"));
      }
    }
    for (const std::string& w : kit.published.warnings) out.warnings.push_back(ref + ": " + w);
    CreateRequest request;
    request.args = ArgsFor(kit.published, args, ArgPhase::kCreate);
    request.env_overrides = env;
    request.host_types = AcceptedTypes();
    auto effective = MakeEffective(kit.published, request);
    if (!effective.ok()) return InRef(ref, effective.status());
    for (const auto& s : effective->skipped) out.skipped.push_back(KitSkip{ref, s});
    for (const auto& [k, v] : effective->env_exports) out.env_exports[k] = v;
    out.args[ref] = effective->args;
    inputs.push_back(KitInput{ref, std::move(effective->descriptor)});
    out.kits.push_back(std::move(kit));
  }
  absl::StatusOr<Composition> composed;
  if (inputs.size() == 1 && inputs[0].descriptor.kind == KitKind::kMixin) {
    // A mixin alone is valid; only a composition can meet its requires.
    composed = Composition{{inputs[0].ref}, inputs[0].descriptor};
    for (const Requirement& r : inputs[0].descriptor.requirements) {
      out.warnings.push_back(absl::StrCat(inputs[0].ref, ": requires ", r.text,
                                          ", which only a composition can meet"));
    }
  } else {
    composed = Compose(inputs);
  }
  if (!composed.ok()) return composed.status();
  out.composition = std::move(*composed);
  out.surface = ProjectSurface(out.composition.merged);
  std::set<std::string> not_enforced;
  for (const auto& item : out.composition.merged.capabilities) {
    if (const auto* e = std::get_if<CapabilityEntry>(&item); e && !IsEnforcedType(e->type)) {
      not_enforced.insert(e->type);
    }
  }
  out.not_enforced.assign(not_enforced.begin(), not_enforced.end());
  return out;
}

}  // namespace

absl::StatusOr<ResolvedKits> ResolveKits(const std::vector<std::string>& refs,
                                         const ArgValues& args,
                                         const std::map<std::string, std::string>& env) {
  std::set<std::string> used;
  auto resolved = Resolve(refs, args, env, &used);
  if (!resolved.ok()) return resolved.status();
  if (absl::Status s = CheckArgsUsed(args, used); !s.ok()) return s;
  return resolved;
}

absl::StatusOr<SurfaceDiff> DiffKits(const std::vector<std::string>& old_refs,
                                     const std::vector<std::string>& new_refs,
                                     const ArgValues& args,
                                     const std::map<std::string, std::string>& env) {
  // Each side takes the args its kits declare (a new version may add one);
  // an arg neither side declares is refused.
  std::set<std::string> used;
  auto before = Resolve(old_refs, args, env, &used);
  if (!before.ok()) return before.status();
  auto after = Resolve(new_refs, args, env, &used);
  if (!after.ok()) return after.status();
  if (absl::Status s = CheckArgsUsed(args, used); !s.ok()) return s;
  return Diff(before->surface, after->surface);
}

}  // namespace airlock::kit
