#include "common/kit/references.h"

#include <charconv>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace airlock::kit {
namespace {

constexpr char kOpen[] = "${{";
constexpr size_t kOpenSize = 3;

// RE2's \s: the characters the spec's regexes allow around names.
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'; }
bool IsWordChar(char c) { return absl::ascii_isalnum(c) || c == '_'; }

size_t SkipSpaces(absl::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// AfterOpener returns the index after `${{\s*kit.<ns>` at `i`, or npos.
size_t AfterOpener(absl::string_view s, size_t i, absl::string_view ns) {
  if (s.substr(i, kOpenSize) != kOpen) return absl::string_view::npos;
  i = SkipSpaces(s, i + kOpenSize);
  std::string head = absl::StrCat("kit.", ns);
  if (s.substr(i, head.size()) != head) return absl::string_view::npos;
  return i + head.size();
}

// MatchRef matches `${{\s*kit.<ns>.NAME\s*}}` at `i` (NAME is
// [A-Za-z_][A-Za-z0-9_]*) and returns the reference, or nullopt.
std::optional<Reference> MatchRef(absl::string_view s, size_t i, absl::string_view ns) {
  size_t j = AfterOpener(s, i, ns);
  if (j == absl::string_view::npos || j >= s.size() || s[j] != '.') return std::nullopt;
  ++j;
  size_t name_begin = j;
  if (j >= s.size() || !(absl::ascii_isalpha(s[j]) || s[j] == '_')) return std::nullopt;
  while (j < s.size() && IsWordChar(s[j])) ++j;
  size_t name_end = j;
  j = SkipSpaces(s, j);
  if (s.substr(j, 2) != "}}") return std::nullopt;
  return Reference{i, j + 2, std::string(s.substr(name_begin, name_end - name_begin))};
}

std::vector<Reference> FindRefs(absl::string_view s, absl::string_view ns) {
  std::vector<Reference> out;
  size_t i = s.find(kOpen);
  while (i != absl::string_view::npos) {
    std::optional<Reference> ref = MatchRef(s, i, ns);
    if (ref) {
      out.push_back(*ref);
      i = s.find(kOpen, ref->end);
    } else {
      i = s.find(kOpen, i + 1);
    }
  }
  return out;
}

// EnvOpenerAt matches `${{\s*kit.env\b` at `i`.
bool EnvOpenerAt(absl::string_view s, size_t i) {
  size_t j = AfterOpener(s, i, "env");
  return j != absl::string_view::npos && (j == s.size() || !IsWordChar(s[j]));
}

}  // namespace

std::vector<Reference> FindArgRefs(absl::string_view s) { return FindRefs(s, "args"); }

bool HasArgRef(absl::string_view s) { return !FindArgRefs(s).empty(); }

bool HasKitPlaceholder(absl::string_view s) {
  for (size_t i = s.find(kOpen); i != absl::string_view::npos; i = s.find(kOpen, i + 1)) {
    if (s.substr(SkipSpaces(s, i + kOpenSize), 4) == "kit.") return true;
  }
  return false;
}

bool HasEnvOpener(absl::string_view s) {
  for (size_t i = s.find(kOpen); i != absl::string_view::npos; i = s.find(kOpen, i + 1)) {
    if (EnvOpenerAt(s, i)) return true;
  }
  return false;
}

absl::StatusOr<std::vector<Reference>> FindEnvRefs(absl::string_view s) {
  std::vector<Reference> refs = FindRefs(s, "env");
  size_t next = 0;
  for (size_t i = s.find(kOpen); i != absl::string_view::npos; i = s.find(kOpen, i + 1)) {
    if (!EnvOpenerAt(s, i)) continue;
    while (next < refs.size() && refs[next].begin < i) ++next;
    if (next == refs.size() || refs[next].begin != i) {
      return absl::InvalidArgumentError("malformed kit.env reference");
    }
  }
  return refs;
}

absl::StatusOr<Substituted> SubstituteArgRefs(absl::string_view s, const ArgLookup& lookup) {
  Substituted out;
  // span[k] is the index of the literal span output byte k was copied
  // from, or -1 for bytes a substitution produced.
  std::vector<int> span;
  int spans = 0;
  auto literal = [&](absl::string_view piece) {
    out.text.append(piece.data(), piece.size());
    span.insert(span.end(), piece.size(), spans++);
  };
  size_t pos = 0;
  std::vector<Reference> refs = FindArgRefs(s);
  for (const Reference& ref : refs) {
    absl::StatusOr<std::optional<std::string>> value = lookup(ref.name);
    if (!value.ok()) return value.status();
    if (!value->has_value()) continue;  // another pass owns it; stays literal
    literal(s.substr(pos, ref.begin - pos));
    out.text += **value;
    span.insert(span.end(), (*value)->size(), -1);
    pos = ref.end;
    out.changed = true;
    if (refs.size() == 1 && ref.begin == 0 && ref.end == s.size()) out.whole = true;
  }
  if (!out.changed) return Substituted{std::string(s), false, false};
  literal(s.substr(pos));

  for (size_t i = out.text.find(kOpen); i != std::string::npos; i = out.text.find(kOpen, i + 1)) {
    if (!EnvOpenerAt(out.text, i)) continue;
    std::optional<Reference> ref = MatchRef(out.text, i, "env");
    size_t end = ref ? ref->end : AfterOpener(out.text, i, "env");
    for (size_t k = i; k < end; ++k) {
      if (span[k] < 0 || span[k] != span[i]) {
        return absl::InvalidArgumentError(
            "argument substitution introduces an environment reference");
      }
    }
  }
  return out;
}

absl::StatusOr<Substituted> SubstituteEnvRefs(absl::string_view s, const EnvLookup& lookup) {
  absl::StatusOr<std::vector<Reference>> refs = FindEnvRefs(s);
  if (!refs.ok()) return refs.status();
  if (refs->empty()) return Substituted{std::string(s), false, false};
  Substituted out;
  size_t pos = 0;
  for (const Reference& ref : *refs) {
    absl::StatusOr<std::string> value = lookup(ref.name);
    if (!value.ok()) return value.status();
    absl::StrAppend(&out.text, s.substr(pos, ref.begin - pos), *value);
    pos = ref.end;
  }
  absl::StrAppend(&out.text, s.substr(pos));
  out.changed = true;
  out.whole = refs->size() == 1 && (*refs)[0].begin == 0 && (*refs)[0].end == s.size();
  return out;
}

Value TypeWholeValue(const std::string& resolved) {
  if (resolved == "true") return Value::Bool(true);
  if (resolved == "false") return Value::Bool(false);
  int64_t i;
  if (absl::SimpleAtoi(resolved, &i) && absl::StrCat(i) == resolved) return Value::Int(i);
  double d;
  if (!resolved.empty() && absl::SimpleAtod(resolved, &d) && std::isfinite(d)) {
    char buf[64];
    auto res = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
    if (std::string(buf, res.ptr) == resolved) return Value::Float(d);
  }
  return Value::String(resolved);
}

}  // namespace airlock::kit
