#include "vmmd/store/reference.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "vmmd/store/oci.h"

namespace airlock::vmmd {
namespace {

// A path component: lowercase alphanumerics separated by '.', '_', '__'
// or runs of '-'.
bool ValidComponent(absl::string_view c) {
  if (c.empty() || !absl::ascii_isalnum(c.front()) || !absl::ascii_isalnum(c.back())) return false;
  for (size_t i = 0; i < c.size(); ++i) {
    char ch = c[i];
    if (absl::ascii_isdigit(ch) || (ch >= 'a' && ch <= 'z')) continue;
    if (ch == '.' || ch == '_' || ch == '-') {
      if (ch == '.' && (c[i + 1] == '.' || c[i + 1] == '_' || c[i + 1] == '-')) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool ValidTag(absl::string_view t) {
  if (t.empty() || t.size() > 128) return false;
  if (!absl::ascii_isalnum(t[0]) && t[0] != '_') return false;
  for (char c : t) {
    if (!absl::ascii_isalnum(c) && c != '_' && c != '.' && c != '-') return false;
  }
  return true;
}

bool LooksLikeHost(absl::string_view c) {
  return c == "localhost" || absl::StrContains(c, '.') || absl::StrContains(c, ':');
}

bool ValidHost(absl::string_view h) {
  if (h.empty() || h.size() > 255) return false;
  for (char c : h) {
    if (!absl::ascii_isalnum(c) && c != '.' && c != '-' && c != ':' && c != '[' && c != ']') {
      return false;
    }
  }
  return true;
}

absl::Status Bad(absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("invalid image reference \"", text, "\": ", why));
}

}  // namespace

std::string Reference::Name() const {
  std::string out = absl::StrCat(registry, "/", repository);
  if (!tag.empty()) absl::StrAppend(&out, ":", tag);
  if (!digest.empty()) absl::StrAppend(&out, "@", digest);
  return out;
}

absl::StatusOr<Reference> ParseReference(absl::string_view text,
                                         absl::string_view default_registry) {
  if (text.empty()) return Bad(text, "it is empty");
  if (text.size() > 512) return Bad(text.substr(0, 40), "it is longer than 512 characters");
  Reference r;
  absl::string_view rest = text;
  size_t at = rest.find('@');
  if (at != absl::string_view::npos) {
    r.digest = std::string(rest.substr(at + 1));
    rest = rest.substr(0, at);
    if (!oci::ValidDigest(r.digest)) {
      return Bad(text, "the digest must be sha256: and 64 lowercase hex digits");
    }
  }
  std::vector<absl::string_view> parts = absl::StrSplit(rest, '/');
  if (parts.size() > 1 && LooksLikeHost(parts[0])) {
    if (!ValidHost(parts[0])) return Bad(text, "the registry host has invalid characters");
    r.registry = std::string(parts[0]);
    r.explicit_registry = true;
    parts.erase(parts.begin());
  } else {
    r.registry = std::string(default_registry);
  }
  // The tag follows the last component's ':'.
  absl::string_view& last = parts.back();
  size_t colon = last.find(':');
  if (colon != absl::string_view::npos) {
    r.tag = std::string(last.substr(colon + 1));
    last = last.substr(0, colon);
    if (!ValidTag(r.tag)) {
      return Bad(text, "a tag is 1-128 letters, digits, '_', '.' and '-', not starting with "
                       "'.' or '-'");
    }
  }
  for (absl::string_view c : parts) {
    if (!ValidComponent(c)) {
      return Bad(text, absl::StrCat("\"", c, "\" is not a valid name component (lowercase "
                                             "letters, digits and separators . _ -)"));
    }
  }
  r.repository = absl::StrJoin(parts, "/");
  if (r.registry == "docker.io" && parts.size() == 1) {
    r.repository = absl::StrCat("library/", r.repository);
  }
  if (r.tag.empty() && r.digest.empty()) r.tag = "latest";
  return r;
}

absl::StatusOr<std::string> NormalizeLocalName(absl::string_view text) {
  if (absl::StrContains(text, '@')) {
    return Bad(text, "a name to store an image under cannot carry a digest");
  }
  auto r = ParseReference(text, "");
  if (!r.ok()) return r.status();
  std::string repo = r->repository;
  if (r->explicit_registry && r->registry == "docker.io") {
    // Docker Hub names are kept short, as docker shows them.
    if (absl::StartsWith(repo, "library/")) repo = repo.substr(8);
  } else if (r->explicit_registry) {
    repo = absl::StrCat(r->registry, "/", repo);
  }
  return absl::StrCat(repo, ":", r->tag);
}

}  // namespace airlock::vmmd
