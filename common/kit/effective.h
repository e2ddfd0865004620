// From a published descriptor to the effective one that enforcement, the
// lock and the gate judge: resolve the installer's args, expand
// `${{ kit.args.x }}` and then `${{ kit.env.NAME }}` structurally,
// validate strictly, and select the capabilities this host provides
// (an unknown required type refuses the Kit by name; an unknown optional
// one, or a group holding one, is skipped and recorded).
#ifndef AIRLOCK_COMMON_KIT_EFFECTIVE_H_
#define AIRLOCK_COMMON_KIT_EFFECTIVE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/kit/descriptor.h"

namespace airlock::kit {

// ArgValues maps arg names to values (always strings).
using ArgValues = std::map<std::string, std::string>;

// ArgPhase is when an arg resolves: build (it has `buildArg:`) or create.
enum class ArgPhase { kBuild, kCreate };

// ResolveArgs picks the value of every arg of `phase`: the supplied one,
// else the default, else none (a reference to it then fails expansion).
// Refused: a supplied name the Kit does not declare or that resolves in
// the other phase, a missing required arg, a value outside the enum or not
// fully matching the pattern (defaults included), and at create a value
// holding a Kit placeholder or NUL.
absl::StatusOr<ArgValues> ResolveArgs(const Descriptor& d, const ArgValues& supplied,
                                      ArgPhase phase);

// CheckArgValues holds each supplied value `d` declares an arg for to that
// declaration (enum or pattern; a create-phase value holds no Kit
// placeholder or NUL), as ResolveArgs would, without asking for the args
// not supplied: it checks values before there are all of them. Names `d`
// does not declare are the caller's to judge.
absl::Status CheckArgValues(const Descriptor& d, const ArgValues& supplied);

// ExpandBuildArgs is publishing's expansion for a descriptor read from a
// file: build-phase args resolved and expanded everywhere, the result
// validated as a published descriptor. Sets are refused (merging them is
// not implemented).
absl::StatusOr<Descriptor> ExpandBuildArgs(const Descriptor& authored, const ArgValues& supplied);

// CreateRequest is what sandbox creation brings to a Kit.
struct CreateRequest {
  ArgValues args;                                    // --arg name=value
  std::map<std::string, std::string> image_env;      // the image config's Env
  std::map<std::string, std::string> env_overrides;  // --env NAME=value, applied last
  std::set<std::string> host_types;                  // capability types this host provides
};

// SkippedCapability records an optional entry or group left out.
struct SkippedCapability {
  std::string path;                   // "capabilities[3]"
  std::string name;                   // display label, if any
  std::vector<std::string> members;   // a group's member paths
  std::vector<std::string> rejected;  // the paths whose type this host lacks
  std::string reason;
};

// EffectiveKit is one Kit ready to compose.
struct EffectiveKit {
  // Form::kEffective; groups flattened into plain entries at their
  // position, members keeping a `source.path` naming where they came from.
  Descriptor descriptor;
  ArgValues args;  // resolved create-phase values; they reproduce this on recreate
  // Container variables the args export (`env:`), before runtime overrides.
  std::map<std::string, std::string> env_exports;
  std::vector<SkippedCapability> skipped;
};

// MakeEffective runs the create-time pipeline on a published descriptor
// (an authored one goes through ExpandBuildArgs first):
// resolve create-phase args; expand them over the whole document (a whole
// value reference is typed: "8080" becomes 8080, except volume@1 size and
// mode); expand kit.env references in capability config values from the
// final container environment (image env, then arg exports, then
// overrides); validate every declaration strictly; then select against
// `host_types`. Every error names the field path.
absl::StatusOr<EffectiveKit> MakeEffective(const Descriptor& published,
                                           const CreateRequest& request);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_EFFECTIVE_H_
