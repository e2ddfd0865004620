#include "common/sizes.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {

namespace {

// ParseMib reads a number of MiB with an optional unit; `what` names the
// size in errors, and terabytes count only with `terabytes`.
absl::StatusOr<uint64_t> ParseMib(absl::string_view text, absl::string_view what,
                                  bool terabytes) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t digits = 0;
  while (digits < t.size() && absl::ascii_isdigit(t[digits])) ++digits;
  uint64_t n = 0;
  if (digits == 0 || !absl::SimpleAtoi(t.substr(0, digits), &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid ", what, " size \"", text, "\": use MiB as a number, or a unit as in 512m or 4g"));
  }
  std::string unit = t.substr(digits);
  if (unit.empty() || unit == "m" || unit == "mb" || unit == "mib") return n;
  if (unit == "g" || unit == "gb" || unit == "gib") {
    if (n > (1ull << 40)) return absl::InvalidArgumentError(absl::StrCat(what, " size too large"));
    return n * 1024;
  }
  if (terabytes && (unit == "t" || unit == "tb" || unit == "tib")) {
    if (n > (1ull << 30)) return absl::InvalidArgumentError(absl::StrCat(what, " size too large"));
    return n * 1024 * 1024;
  }
  return absl::InvalidArgumentError(absl::StrCat("invalid ", what, " size \"", text,
                                                 "\": unknown unit \"", unit, "\" (use m",
                                                 terabytes ? ", g or t)" : " or g)"));
}

}  // namespace

absl::StatusOr<uint64_t> ParseMemory(absl::string_view text) {
  return ParseMib(text, "memory", false);
}

absl::StatusOr<uint64_t> ParseDiskSize(absl::string_view text) {
  return ParseMib(text, "disk", true);
}

absl::StatusOr<NamedSize> LookupSize(absl::string_view name) {
  struct Entry {
    const char* name;
    NamedSize size;
  };
  static constexpr Entry kSizes[] = {{"micro", {1, 2048}},  {"small", {2, 4096}},
                                     {"medium", {4, 8192}}, {"large", {8, 16384}},
                                     {"xl", {16, 32768}}};
  for (const auto& e : kSizes) {
    if (name == e.name) return e.size;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown size \"", name, "\": use micro, small, medium, large or xl"));
}

}  // namespace airlock
