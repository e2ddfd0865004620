// The host repository of a clone-mode sandbox, through libgit2: finding
// its Git root, branch and remotes, and writing the one thing gitd may
// write to it, the "sandbox-<name>" remote.
#ifndef AIRLOCK_GITD_HOST_REPO_H_
#define AIRLOCK_GITD_HOST_REPO_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace airlock::gitd {

// RepoFacts are what the guest's clone needs to know of the host repo.
struct RepoFacts {
  // Working tree root (the directory holding .git).
  std::string root;
  // Branch to check out: the requested one, else the current branch, else
  // "" for a detached HEAD.
  std::string branch;
  // Remote name to URL, without remotes that point at local paths.
  std::map<std::string, std::string> remotes;
  bool shallow = false;
};

// InspectRepo finds the Git root of `path` and reads its facts. A
// requested `branch` must exist locally. NOT_FOUND when `path` is not in a
// Git working tree; bare repositories are refused.
absl::StatusOr<RepoFacts> InspectRepo(const std::string& path, const std::string& branch);

// IsLocalUrl is true for URLs that name a path on this host (which mean
// nothing inside a sandbox): "/x", "./x", "../x", "file://...", "C:..."-less
// scp-like forms are remote.
bool IsLocalUrl(const std::string& url);

// SetRemote creates or updates the remote `name` of the repo at `root` to
// `url`; the config file is not rewritten when the URL is already right.
absl::Status SetRemote(const std::string& root, const std::string& name, const std::string& url);

// DeleteRemote removes the remote `name`; absent is fine.
absl::Status DeleteRemote(const std::string& root, const std::string& name);

}  // namespace airlock::gitd

#endif  // AIRLOCK_GITD_HOST_REPO_H_
