// `airlock review`: what a sandbox changed among the files that run without
// being invoked by name (git hooks, CI workflows, build scripts, editor and
// agent configs, newly executable files). A snapshot of the shared paths is
// taken at create (the baseline) and compared with the tree later.
#ifndef AIRLOCK_GITD_REVIEW_H_
#define AIRLOCK_GITD_REVIEW_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::gitd {

// Classify names the risk category of a path relative to a shared root
// ("git-hook", "git-config", "ci-workflow", "build-script",
// "package-scripts", "go-generate", "editor-tasks", "agent-config",
// "envrc"), or "" when the path is not one of them.
std::string Classify(absl::string_view rel);

// Entry is what a snapshot keeps of one file.
struct Entry {
  std::string kind;     // Classify(), or "" for files kept only for their mode
  std::string digest;   // content digest of the risky part ("" for kind "")
  bool executable = false;
};

// Snapshot maps absolute paths to entries.
using Snapshot = std::map<std::string, Entry>;

// TakeSnapshot walks `roots` (directories or files) without following
// symlinks and without descending into .git/objects and node_modules.
absl::StatusOr<Snapshot> TakeSnapshot(const std::vector<std::string>& roots);

// Finding is one risky change.
struct Finding {
  std::string path;    // absolute host path
  std::string kind;    // a category, or "new-executable"
  std::string change;  // "added", "modified", "removed"
  std::string detail;
};

// Compare lists the risky changes from `before` to `after`, sorted by path.
std::vector<Finding> Compare(const Snapshot& before, const Snapshot& after);

// Serialize and Parse store a snapshot as JSON.
std::string SerializeSnapshot(const Snapshot& s);
absl::StatusOr<Snapshot> ParseSnapshot(absl::string_view json);

}  // namespace airlock::gitd

#endif  // AIRLOCK_GITD_REVIEW_H_
