// Kit-to-Kit names and versions: the grammar of `provides`, `requires`,
// `integrates` and `conflicts` entries, name normalization, version order
// and whether a provide satisfies a requirement. Capability *types* (what
// the host answers) are a different grammar, in capabilities.h.
#ifndef AIRLOCK_COMMON_KIT_RELATIONS_H_
#define AIRLOCK_COMMON_KIT_RELATIONS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::kit {

// The namespace a bare name normalizes into: `gh` is `com.docker.kit/gh`.
inline constexpr absl::string_view kDefaultNamespace = "com.docker.kit";

// NormalizeName checks a name (`gh`, `com.example/gh`, `deb/curl`) and
// returns it namespace-qualified. A namespace of one's own is reverse-DNS
// (two labels at least); single labels are reserved to the spec, of which
// only `deb` and `apk` exist (filled by publishing, never authored).
absl::StatusOr<std::string> NormalizeName(absl::string_view name);

// ShortName strips the default namespace for display.
std::string ShortName(absl::string_view normalized);

// IsReservedNamespace reports a `deb/` or `apk/` name.
bool IsReservedNamespace(absl::string_view normalized);

// IsVersion checks ^[0-9]+(\.[0-9A-Za-z-]+)*$ (no "v" prefix).
bool IsVersion(absl::string_view v);

// CompareVersions orders versions segment by segment: two all-digit
// segments numerically (no overflow), anything else byte-wise, a missing
// segment as "" (lowest). So 1.2 < 1.2.0 and 2.0-rc1 > 2.0, as the spec
// acknowledges. Returns <0, 0 or >0.
int CompareVersions(absl::string_view a, absl::string_view b);

// Provide is one `provides` entry: `name` or `name@version`.
struct Provide {
  std::string text;     // as written, trimmed
  std::string name;     // normalized
  std::string version;  // empty when unversioned
};

// ParseProvide splits on the first '@' and checks both halves.
absl::StatusOr<Provide> ParseProvide(absl::string_view text);

enum class Op { kGe, kGt, kLe, kLt, kEq };

// Constraint is one `<op> version` of a requirement.
struct Constraint {
  Op op = Op::kEq;
  std::string version;
  // Text renders "op version" with no space, e.g. ">=1.2".
  std::string Text() const;
  bool Holds(absl::string_view version) const;
};

// Requirement is one `requires` or `integrates` entry.
struct Requirement {
  std::string text;                     // as written, trimmed
  std::string name;                     // normalized
  std::vector<Constraint> constraints;  // ANDed; empty means any version
};

// ParseRequirement reads `name` or `name <op> version[, <op> version]*`
// (ops >=, >, <=, <, =; spaces optional) and refuses constraint sets no
// version can satisfy: two different pins, a pin outside another bound, a
// lower bound above the upper, and anything below the implicit `>= 0`.
absl::StatusOr<Requirement> ParseRequirement(absl::string_view text);

// Satisfies reports whether `provide` meets `require`: same normalized
// name, and either no constraints or a version meeting all of them. An
// unversioned provide meets only an unconstrained requirement.
bool Satisfies(const Provide& provide, const Requirement& require);

// ParseConflict reads a `conflicts` entry, a bare name, and returns it
// normalized.
absl::StatusOr<std::string> ParseConflict(absl::string_view text);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_RELATIONS_H_
