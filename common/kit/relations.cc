#include "common/kit/relations.h"

#include <algorithm>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/kit/problems.h"

namespace airlock::kit {
namespace {

bool IsLowerAlnum(char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'z'); }

// ValidBaseName: ^[a-z0-9]([a-z0-9+.-]{0,62}[a-z0-9+])?$
bool ValidBaseName(absl::string_view s) {
  if (s.empty() || s.size() > 64 || !IsLowerAlnum(s.front())) return false;
  if (s.size() > 1 && !(IsLowerAlnum(s.back()) || s.back() == '+')) return false;
  return std::all_of(s.begin(), s.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '+' || c == '.' || c == '-'; });
}

// ValidNamespace: dot-separated labels, each alphanumeric at both ends with
// hyphens inside and at most 63 long; at most 253 in all.
bool ValidNamespace(absl::string_view ns) {
  if (ns.empty() || ns.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(ns, '.')) {
    if (label.empty() || label.size() > 63 || !IsLowerAlnum(label.front()) ||
        !IsLowerAlnum(label.back())) {
      return false;
    }
    if (!std::all_of(label.begin(), label.end(),
                     [](char c) { return IsLowerAlnum(c) || c == '-'; })) {
      return false;
    }
  }
  return true;
}

bool AllDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

int CompareSegments(absl::string_view a, absl::string_view b) {
  if (AllDigits(a) && AllDigits(b)) {
    // Compare as digit strings: no overflow, however long.
    while (a.size() > 1 && a.front() == '0') a.remove_prefix(1);
    while (b.size() > 1 && b.front() == '0') b.remove_prefix(1);
    if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  }
  return a.compare(b);
}

const char* OpText(Op op) {
  switch (op) {
    case Op::kGe:
      return ">=";
    case Op::kGt:
      return ">";
    case Op::kLe:
      return "<=";
    case Op::kLt:
      return "<";
    case Op::kEq:
      return "=";
  }
  return "?";
}

// Bound is one side of the interval a requirement's constraints leave.
struct Bound {
  std::string version;
  bool inclusive = true;
  std::string text;  // for messages, as "op version"
};

std::string Spaced(const Constraint& c) { return absl::StrCat(OpText(c.op), " ", c.version); }

absl::Status Unsatisfiable(absl::string_view a, absl::string_view b) {
  return absl::InvalidArgumentError(absl::StrCat("unsatisfiable constraints: ", a, " and ", b));
}

// CheckSatisfiable refuses constraint sets that no version meets. A `> x`
// is read as `>= x.-`, the next version after x (no segment sorts below
// "-"), so every lower bound is inclusive; there is an implicit `>= 0`.
absl::Status CheckSatisfiable(const std::vector<Constraint>& constraints) {
  Bound lower{"0", true, ">= 0"};
  std::optional<Bound> upper;
  std::optional<Constraint> pin;
  for (const Constraint& c : constraints) {
    switch (c.op) {
      case Op::kEq:
        if (pin && CompareVersions(pin->version, c.version) != 0) {
          return Unsatisfiable(Spaced(*pin), Spaced(c));
        }
        pin = c;
        break;
      case Op::kGe:
      case Op::kGt: {
        Bound b{c.op == Op::kGt ? absl::StrCat(c.version, ".-") : c.version, true, Spaced(c)};
        if (CompareVersions(b.version, lower.version) > 0) lower = b;
        break;
      }
      case Op::kLe:
      case Op::kLt: {
        Bound b{c.version, c.op == Op::kLe, Spaced(c)};
        if (!upper) {
          upper = b;
          break;
        }
        int cmp = CompareVersions(b.version, upper->version);
        if (cmp < 0 || (cmp == 0 && !b.inclusive)) upper = b;
        break;
      }
    }
  }
  if (upper) {
    int cmp = CompareVersions(lower.version, upper->version);
    if (cmp > 0 || (cmp == 0 && !upper->inclusive)) return Unsatisfiable(lower.text, upper->text);
  }
  if (pin) {
    if (CompareVersions(pin->version, lower.version) < 0) {
      return Unsatisfiable(lower.text, Spaced(*pin));
    }
    if (upper) {
      int cmp = CompareVersions(pin->version, upper->version);
      if (cmp > 0 || (cmp == 0 && !upper->inclusive)) {
        return Unsatisfiable(Spaced(*pin), upper->text);
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> NormalizeName(absl::string_view raw) {
  absl::string_view name = absl::StripAsciiWhitespace(raw);
  if (name.empty()) return absl::InvalidArgumentError("missing capability name");
  size_t slash = name.find('/');
  absl::string_view ns = slash == absl::string_view::npos ? "" : name.substr(0, slash);
  absl::string_view base = slash == absl::string_view::npos ? name : name.substr(slash + 1);
  if (!ValidBaseName(base)) {
    return absl::InvalidArgumentError(
        absl::StrCat("name ", Quote(name),
                     " is not a valid name: lowercase letters, digits, '+', '-' and '.', "
                     "starting with a letter or digit, at most 64 characters"));
  }
  if (slash == absl::string_view::npos) return absl::StrCat(kDefaultNamespace, "/", base);
  if (!ValidNamespace(ns)) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace ", Quote(ns), " in ", Quote(name), " is not a valid namespace"));
  }
  if (ns.find('.') == absl::string_view::npos && ns != "deb" && ns != "apk") {
    return absl::InvalidArgumentError(absl::StrCat(
        "namespace ", Quote(ns), " in ", Quote(name),
        " is a single label, which this specification reserves; a namespace of your own is "
        "reverse-DNS, as in com.example/",
        base));
  }
  return std::string(name);
}

std::string ShortName(absl::string_view normalized) {
  std::string prefix = absl::StrCat(kDefaultNamespace, "/");
  if (absl::StartsWith(normalized, prefix)) return std::string(normalized.substr(prefix.size()));
  return std::string(normalized);
}

bool IsReservedNamespace(absl::string_view normalized) {
  return absl::StartsWith(normalized, "deb/") || absl::StartsWith(normalized, "apk/");
}

bool IsVersion(absl::string_view v) {
  std::vector<absl::string_view> segments = absl::StrSplit(v, '.');
  if (!AllDigits(segments[0])) return false;
  for (size_t i = 1; i < segments.size(); ++i) {
    absl::string_view s = segments[i];
    if (s.empty() || !std::all_of(s.begin(), s.end(),
                                  [](char c) { return absl::ascii_isalnum(c) || c == '-'; })) {
      return false;
    }
  }
  return true;
}

int CompareVersions(absl::string_view a, absl::string_view b) {
  std::vector<absl::string_view> sa = absl::StrSplit(a, '.');
  std::vector<absl::string_view> sb = absl::StrSplit(b, '.');
  for (size_t i = 0; i < std::max(sa.size(), sb.size()); ++i) {
    int cmp = CompareSegments(i < sa.size() ? sa[i] : "", i < sb.size() ? sb[i] : "");
    if (cmp != 0) return cmp < 0 ? -1 : 1;
  }
  return 0;
}

std::string Constraint::Text() const { return absl::StrCat(OpText(op), version); }

bool Constraint::Holds(absl::string_view v) const {
  int cmp = CompareVersions(v, version);
  switch (op) {
    case Op::kGe:
      return cmp >= 0;
    case Op::kGt:
      return cmp > 0;
    case Op::kLe:
      return cmp <= 0;
    case Op::kLt:
      return cmp < 0;
    case Op::kEq:
      return cmp == 0;
  }
  return false;
}

absl::StatusOr<Provide> ParseProvide(absl::string_view raw) {
  Provide p;
  p.text = std::string(absl::StripAsciiWhitespace(raw));
  size_t at = p.text.find('@');
  absl::StatusOr<std::string> name = NormalizeName(p.text.substr(0, at));
  if (!name.ok()) return name.status();
  p.name = *name;
  if (at != std::string::npos) {
    p.version = std::string(absl::StripAsciiWhitespace(p.text.substr(at + 1)));
    if (p.version.empty()) return absl::InvalidArgumentError("missing version after '@'");
    if (!IsVersion(p.version)) {
      return absl::InvalidArgumentError(
          absl::StrCat("version ", Quote(p.version), " is not a version (digits, then .segments)"));
    }
  }
  return p;
}

absl::StatusOr<Requirement> ParseRequirement(absl::string_view raw) {
  Requirement r;
  r.text = std::string(absl::StripAsciiWhitespace(raw));
  size_t op_at = r.text.find_first_of("<>=");
  absl::string_view name = absl::StripAsciiWhitespace(absl::string_view(r.text).substr(0, op_at));
  if (name.empty()) return absl::InvalidArgumentError("missing capability name");
  absl::StatusOr<std::string> normalized = NormalizeName(name);
  if (!normalized.ok()) return normalized.status();
  r.name = *normalized;
  if (op_at == std::string::npos) return r;

  absl::string_view constraints = absl::string_view(r.text).substr(op_at);
  std::vector<absl::string_view> pieces = absl::StrSplit(constraints, ',');
  for (size_t k = 0; k < pieces.size(); ++k) {
    absl::string_view piece = absl::StripAsciiWhitespace(pieces[k]);
    if (piece.empty()) {
      return absl::InvalidArgumentError(k + 1 == pieces.size() ? "trailing comma in constraints"
                                                               : "empty constraints");
    }
    Constraint c;
    size_t op_len = 1;
    if (absl::StartsWith(piece, ">=")) {
      c.op = Op::kGe;
      op_len = 2;
    } else if (absl::StartsWith(piece, "<=")) {
      c.op = Op::kLe;
      op_len = 2;
    } else if (piece[0] == '>') {
      c.op = Op::kGt;
    } else if (piece[0] == '<') {
      c.op = Op::kLt;
    } else if (piece[0] == '=') {
      c.op = Op::kEq;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("expected version operator, got ", Quote(piece)));
    }
    c.version = std::string(absl::StripAsciiWhitespace(piece.substr(op_len)));
    if (c.version.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("constraint ", Quote(piece), ": missing version"));
    }
    if (!IsVersion(c.version)) {
      return absl::InvalidArgumentError(
          absl::StrCat("constraint ", Quote(piece), ": ", Quote(c.version), " is not a version"));
    }
    r.constraints.push_back(std::move(c));
  }
  if (absl::Status s = CheckSatisfiable(r.constraints); !s.ok()) return s;
  return r;
}

bool Satisfies(const Provide& provide, const Requirement& require) {
  if (provide.name != require.name) return false;
  if (require.constraints.empty()) return true;
  if (provide.version.empty()) return false;
  return std::all_of(require.constraints.begin(), require.constraints.end(),
                     [&](const Constraint& c) { return c.Holds(provide.version); });
}

absl::StatusOr<std::string> ParseConflict(absl::string_view raw) {
  absl::string_view name = absl::StripAsciiWhitespace(raw);
  if (name.find_first_of("@<>=") != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(Quote(name), " is not a bare name; conflicts take no versions"));
  }
  return NormalizeName(name);
}

}  // namespace airlock::kit
