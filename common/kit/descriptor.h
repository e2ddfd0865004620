// The Kit descriptor (Sandbox Kit Specification v3): its typed model and
// the strict parser for the authored YAML and the published compact JSON.
// Expanding args and the container environment into an effective
// descriptor is in effective.h; composing several Kits is in compose.h.
#ifndef AIRLOCK_COMMON_KIT_DESCRIPTOR_H_
#define AIRLOCK_COMMON_KIT_DESCRIPTOR_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kit/capabilities.h"
#include "common/kit/document.h"
#include "common/kit/relations.h"

namespace airlock::kit {

// Descriptor size budget, measured on the raw bytes.
inline constexpr size_t kAdvisoryDescriptorBytes = 64 * 1024;
inline constexpr size_t kMaxDescriptorBytes = 512 * 1024;

enum class KitKind { kWorkload, kMixin, kSet };
const char* KitKindName(KitKind kind);

// Form is which stage of a descriptor's life is being judged; each stage
// allows less than the one before.
enum class Form {
  // What an author writes: arg references of both phases, `kind: set`.
  kAuthored,
  // What the OCI annotation carries: build-phase args expanded, no set,
  // kits pinned by digest. The old spelling `kind: sandbox` is accepted.
  // Cross-entry checks wait for the effective form (declarations only).
  kPublished,
  // What enforcement judges: every reference expanded, checked strictly.
  kEffective,
};

// Arg is one declared installer input. A value is always a string.
struct Arg {
  std::optional<std::string> default_value;  // "" is a real default
  bool required = false;
  std::string description;
  std::vector<std::string> enum_values;
  std::optional<std::string> pattern;  // RE2, whole-value match
  std::string env;                     // exported into the container as this variable
  std::string build_arg;               // resolves at build instead of create
  bool build_phase() const { return !build_arg.empty(); }
};

// KitEntry is one `kits:` entry of a set.
struct KitEntry {
  std::string ref;
  std::string digest;
  std::map<std::string, std::string> args;
};

// Descriptor is a decoded, validated descriptor.
struct Descriptor {
  Form form = Form::kAuthored;
  KitKind kind = KitKind::kWorkload;
  // The published Kit spelled its kind "sandbox" (accepted as workload).
  bool legacy_sandbox_kind = false;

  // Display metadata: self-asserted, never identity or a trust input.
  std::string display_name;
  std::string author;
  std::string description;
  std::string source_url;
  std::string icon_url;

  // Fallback version for unversioned provides (may be an arg reference
  // in the authored form).
  std::string version;
  std::vector<std::string> licenses;

  // Kit-to-Kit relations. An authored provides entry holding an arg
  // reference keeps only `text` until publish expands it.
  std::vector<Provide> provides;
  std::vector<Requirement> requirements;  // `requires`
  std::vector<Requirement> integrates;
  std::vector<std::string> conflicts;  // normalized names

  std::vector<CapabilityItem> capabilities;
  std::map<std::string, Arg> args;

  std::string build;
  std::string dockerfile;
  std::vector<KitEntry> kits;

  // The decoded document this was read from. Expansion works on it, and
  // ToCanonicalJson(document) is the descriptor's JSON form.
  Value document;
  // Advisory problems (the 64 KiB budget).
  std::vector<std::string> warnings;

  // HasGroups reports whether any capability item is a group.
  bool HasGroups() const;
};

// ParseDescriptor reads a descriptor in YAML or JSON (JSON is YAML) and
// validates it for `form`. Strict: unknown fields anywhere but inside an
// unknown capability type's config are errors, and so is every rule the
// spec states for that form. All independent problems are reported in one
// InvalidArgument status, one per line, each as "field.path: what is
// wrong", e.g. "capabilities[2].config.runtime.allow[0]: host must not be
// empty".
absl::StatusOr<Descriptor> ParseDescriptor(absl::string_view text, Form form = Form::kAuthored);

// DescriptorFromDocument validates an already decoded document (the size
// budget is the caller's; ParseDescriptor applies it).
absl::StatusOr<Descriptor> DescriptorFromDocument(Value document, Form form);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_DESCRIPTOR_H_
