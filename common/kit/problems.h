// Collecting every independent problem of a descriptor, each tied to the
// field path it is about ("capabilities[2].config.allow[0]"), so an author
// fixes them in one pass instead of one per attempt.
#ifndef AIRLOCK_COMMON_KIT_PROBLEMS_H_
#define AIRLOCK_COMMON_KIT_PROBLEMS_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace airlock::kit {

// FieldPath builds the dotted paths problems are reported at. The root is
// the empty path; `Key("kind")` is "kind", `Key("a").Index(2)` is "a[2]".
class FieldPath {
 public:
  FieldPath() = default;

  FieldPath Key(absl::string_view key) const;
  FieldPath Index(size_t i) const;

  const std::string& str() const { return path_; }
  bool empty() const { return path_.empty(); }

 private:
  explicit FieldPath(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Problems gathers errors and warnings. Errors make a descriptor invalid;
// warnings (the advisory size budget) do not.
class Problems {
 public:
  // Error records "path: message", or just the message at the root.
  void Error(const FieldPath& path, absl::string_view message);
  void Warning(const FieldPath& path, absl::string_view message);

  bool ok() const { return errors_.empty(); }
  size_t error_count() const { return errors_.size(); }
  const std::vector<std::string>& errors() const { return errors_; }
  const std::vector<std::string>& warnings() const { return warnings_; }

  // ToStatus is OK when there are no errors, else InvalidArgument starting
  // with `what` and listing every error on its own line.
  absl::Status ToStatus(absl::string_view what) const;

 private:
  std::vector<std::string> errors_;
  std::vector<std::string> warnings_;
};

// Quote renders a string the way the spec's error texts do (%q): in double
// quotes with backslash escapes for quotes, backslashes and control bytes.
std::string Quote(absl::string_view s);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_PROBLEMS_H_
