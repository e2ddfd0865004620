// How the multi-Kit entry points (resolve.h, validate.h) word a problem
// with one of the refs they were given, so both say it the same way.
#ifndef AIRLOCK_COMMON_KIT_INTERNAL_REF_ERRORS_H_
#define AIRLOCK_COMMON_KIT_INTERNAL_REF_ERRORS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace airlock::kit::internal {

// InRef prefixes `s` with the ref it is about, unless it already starts so.
inline absl::Status InRef(const std::string& ref, const absl::Status& s) {
  if (s.ok() || absl::StartsWith(s.message(), ref + ":")) return s;
  return absl::Status(s.code(), absl::StrCat(ref, ": ", s.message()));
}

// CheckArgsUsed refuses the supplied args (`args`, by name) that no Kit
// declared (`used`), so a typo never passes silently.
inline absl::Status CheckArgsUsed(const std::map<std::string, std::string>& args,
                                  const std::set<std::string>& used) {
  std::vector<std::string> unknown;
  for (const auto& [name, value] : args) {
    if (!used.count(name)) unknown.push_back(name);
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "no kit declares the arg", unknown.size() > 1 ? "s " : " ", absl::StrJoin(unknown, ", "),
      " (`airlock kit inspect REF` lists a kit's args)"));
}

}  // namespace airlock::kit::internal

#endif  // AIRLOCK_COMMON_KIT_INTERNAL_REF_ERRORS_H_
