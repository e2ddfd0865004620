#include "vmmd/sandbox_metadata.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

namespace {
constexpr uint64_t kMaxTimeoutSeconds = 30ull * 24 * 3600;

bool LabelKeyChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' ||
         c == '.' || c == '/';
}
}  // namespace

absl::Status ValidateDisplayName(absl::string_view d) {
  if (d.size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("display name is ", d.size(), " characters; at most 64"));
  }
  for (char c : d) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "display name \"", d, "\" may hold only letters, digits, '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateMetadata(const vmm::SandboxSpec& spec) {
  if (absl::Status s = ValidateDisplayName(spec.display_name()); !s.ok()) return s;
  if (spec.labels_size() > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat(spec.labels_size(), " labels; at most 64"));
  }
  for (const auto& [k, v] : spec.labels()) {
    if (k.empty() || k.size() > 63) {
      return absl::InvalidArgumentError(
          absl::StrCat("label key \"", k, "\" must be 1 to 63 characters"));
    }
    for (char c : k) {
      if (!LabelKeyChar(c)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "label key \"", k, "\" may hold only letters, digits, '_', '-', '.' and '/'"));
      }
    }
    if (v.size() > 256) {
      return absl::InvalidArgumentError(
          absl::StrCat("label \"", k, "\" has a value of ", v.size(), " bytes; at most 256"));
    }
  }
  if (spec.timeout_seconds() > kMaxTimeoutSeconds) {
    return absl::InvalidArgumentError(absl::StrCat(
        "timeout of ", spec.timeout_seconds(), " s is over 30 days"));
  }
  return absl::OkStatus();
}

int64_t ArmedExpiry(const vmm::SandboxSpec& spec, int64_t now) {
  return spec.timeout_seconds() == 0 ? 0 : now + static_cast<int64_t>(spec.timeout_seconds());
}

bool Expired(const vmm::Sandbox& sb, int64_t now) {
  return sb.state() == vmm::RUNNING && sb.expires_at() > 0 && now >= sb.expires_at();
}

}  // namespace airlock::vmmd
