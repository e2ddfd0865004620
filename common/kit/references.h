// The two Kit placeholders inside descriptor strings:
// `${{ kit.args.NAME }}` (an installer-supplied arg) and `${{ kit.env.NAME }}`
// (a variable of the final container environment). This file finds them
// and substitutes them in one string; walking the document is the caller's.
#ifndef AIRLOCK_COMMON_KIT_REFERENCES_H_
#define AIRLOCK_COMMON_KIT_REFERENCES_H_

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kit/document.h"

namespace airlock::kit {

// Reference is one well-formed placeholder: the name and where it sits.
struct Reference {
  size_t begin = 0;
  size_t end = 0;  // one past the closing "}}"
  std::string name;
};

// FindArgRefs returns every `${{ kit.args.NAME }}` in `s`, in order.
// Whitespace inside the braces is optional, as in the spec's regex.
std::vector<Reference> FindArgRefs(absl::string_view s);
bool HasArgRef(absl::string_view s);

// HasEnvOpener reports whether `s` contains `${{ kit.env` (well-formed or
// not): the test for "an environment reference is here".
bool HasEnvOpener(absl::string_view s);

// FindEnvRefs returns every `${{ kit.env.NAME }}`; an opener that does not
// continue into a well-formed reference is "malformed kit.env reference".
absl::StatusOr<std::vector<Reference>> FindEnvRefs(absl::string_view s);

// HasKitPlaceholder reports whether `s` contains a `${{ kit.` opener,
// well-formed or not. Substituted values must not, so substitution never
// creates a reference; other `${{ ... }}` text (a CI template, say) is
// just text.
bool HasKitPlaceholder(absl::string_view s);

// Substituted is the result of substituting one string.
struct Substituted {
  std::string text;
  // The input was exactly one reference and it was substituted: the
  // spec's typing rule applies to such a whole value.
  bool whole = false;
  bool changed = false;
};

// ArgLookup answers one arg reference: a value to substitute, nullopt to
// leave the reference for another pass, or an error.
using ArgLookup = std::function<absl::StatusOr<std::optional<std::string>>(absl::string_view)>;

// SubstituteArgRefs replaces the arg references `lookup` owns. It refuses a
// result in which a `${{ kit.env` opener is not wholly inside one unchanged
// literal span of the input: joining fragments must not smuggle in an
// environment reference the signed descriptor did not contain.
absl::StatusOr<Substituted> SubstituteArgRefs(absl::string_view s, const ArgLookup& lookup);

// EnvLookup answers one env reference with its value or an error.
using EnvLookup = std::function<absl::StatusOr<std::string>(absl::string_view)>;

// SubstituteEnvRefs replaces every env reference. Values are never typed:
// a whole-value env reference still yields a string.
absl::StatusOr<Substituted> SubstituteEnvRefs(absl::string_view s, const EnvLookup& lookup);

// TypeWholeValue applies the spec's typing rule to the value a whole-value
// arg reference resolved to: "true"/"false" become bools, an int64 that
// re-renders identically an integer ("8080", not "007"), a finite float
// that re-renders identically in shortest fixed form a float ("1.5", not
// "1.0" or "1e5"); anything else stays a string.
Value TypeWholeValue(const std::string& resolved);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_REFERENCES_H_
