#include "common/kit/problems.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace airlock::kit {
namespace {

std::string Located(const FieldPath& path, absl::string_view message) {
  if (path.empty()) return std::string(message);
  return absl::StrCat(path.str(), ": ", message);
}

}  // namespace

FieldPath FieldPath::Key(absl::string_view key) const {
  return FieldPath(path_.empty() ? std::string(key) : absl::StrCat(path_, ".", key));
}

FieldPath FieldPath::Index(size_t i) const { return FieldPath(absl::StrCat(path_, "[", i, "]")); }

void Problems::Error(const FieldPath& path, absl::string_view message) {
  errors_.push_back(Located(path, message));
}

void Problems::Warning(const FieldPath& path, absl::string_view message) {
  warnings_.push_back(Located(path, message));
}

absl::Status Problems::ToStatus(absl::string_view what) const {
  if (errors_.empty()) return absl::OkStatus();
  if (errors_.size() == 1) return absl::InvalidArgumentError(absl::StrCat(what, ": ", errors_[0]));
  return absl::InvalidArgumentError(
      absl::StrCat(what, " (", errors_.size(), " errors):\n  ", absl::StrJoin(errors_, "\n  ")));
}

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += absl::StrFormat("\\x%02x", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  out += "\"";
  return out;
}

}  // namespace airlock::kit
