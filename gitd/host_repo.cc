#include "gitd/host_repo.h"

#include <git2.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"

namespace airlock::gitd {
namespace {

absl::Status GitError(const std::string& what) {
  const git_error* e = git_error_last();
  return absl::InternalError(
      absl::StrCat(what, ": ", e != nullptr && e->message != nullptr ? e->message : "unknown"));
}

struct RepoCloser {
  void operator()(git_repository* r) const { git_repository_free(r); }
};
using Repo = std::unique_ptr<git_repository, RepoCloser>;

absl::StatusOr<Repo> Open(const std::string& path) {
  git_libgit2_init();
  git_repository* r = nullptr;
  if (git_repository_open_ext(&r, path.c_str(), 0, nullptr) != 0) {
    return absl::NotFoundError(absl::StrCat(path, " is not inside a Git working tree"));
  }
  Repo repo(r);
  if (git_repository_is_bare(r)) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is a bare repository; clone mode needs a working tree"));
  }
  return repo;
}

// DropEmptySection removes the line `header` from a git config file when no
// key follows it before the next section, writing the file atomically.
absl::Status DropEmptySection(const std::string& path, const std::string& header) {
  std::ifstream in(path);
  if (!in) return absl::OkStatus();
  std::vector<std::string> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  std::vector<std::string> kept;
  bool changed = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    bool empty_section =
        lines[i] == header && (i + 1 == lines.size() || absl::StartsWith(lines[i + 1], "["));
    if (empty_section) {
      changed = true;
      continue;
    }
    kept.push_back(lines[i]);
  }
  if (!changed) return absl::OkStatus();
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return absl::OkStatus();
  std::string content;
  for (const auto& l : kept) absl::StrAppend(&content, l, "\n");
  return ReplaceFile(path, content, st.st_mode & 07777);
}

}  // namespace

bool IsLocalUrl(const std::string& url) {
  return url.empty() || url[0] == '/' || absl::StartsWith(url, "./") ||
         absl::StartsWith(url, "../") || absl::StartsWith(url, "file:") || url == "." ||
         url == "..";
}

absl::StatusOr<RepoFacts> InspectRepo(const std::string& path, const std::string& branch) {
  auto repo = Open(path);
  if (!repo.ok()) return repo.status();
  git_repository* r = repo->get();
  RepoFacts f;
  f.root = git_repository_workdir(r);
  while (f.root.size() > 1 && f.root.back() == '/') f.root.pop_back();
  f.shallow = git_repository_is_shallow(r) == 1;
  if (!branch.empty()) {
    git_reference* ref = nullptr;
    if (git_branch_lookup(&ref, r, branch.c_str(), GIT_BRANCH_LOCAL) != 0) {
      return absl::NotFoundError(
          absl::StrCat("branch \"", branch, "\" does not exist in ", f.root));
    }
    git_reference_free(ref);
    f.branch = branch;
  } else if (git_repository_head_detached(r) != 1) {
    git_reference* head = nullptr;
    if (git_repository_head(&head, r) == 0) {
      f.branch = git_reference_shorthand(head);
      git_reference_free(head);
    } else {
      // An unborn branch (no commit yet): nothing to clone from.
      return absl::FailedPreconditionError(
          absl::StrCat(f.root, " has no commit yet; commit something before using clone mode"));
    }
  }
  git_strarray names{};
  if (git_remote_list(&names, r) != 0) return GitError("git_remote_list");
  for (size_t i = 0; i < names.count; ++i) {
    git_remote* remote = nullptr;
    if (git_remote_lookup(&remote, r, names.strings[i]) != 0) continue;
    const char* url = git_remote_url(remote);
    std::string name = names.strings[i];
    if (url != nullptr && !IsLocalUrl(url) && !absl::StartsWith(name, "sandbox-")) {
      f.remotes[name] = url;
    }
    git_remote_free(remote);
  }
  git_strarray_dispose(&names);
  return f;
}

absl::Status SetRemote(const std::string& root, const std::string& name, const std::string& url) {
  auto repo = Open(root);
  if (!repo.ok()) return repo.status();
  git_remote* remote = nullptr;
  if (git_remote_lookup(&remote, repo->get(), name.c_str()) == 0) {
    bool same = git_remote_url(remote) != nullptr && url == git_remote_url(remote);
    git_remote_free(remote);
    if (same) return absl::OkStatus();
    if (git_remote_set_url(repo->get(), name.c_str(), url.c_str()) != 0) {
      return GitError("git_remote_set_url");
    }
    return absl::OkStatus();
  }
  if (git_remote_create(&remote, repo->get(), name.c_str(), url.c_str()) != 0) {
    return GitError("git_remote_create");
  }
  git_remote_free(remote);
  return absl::OkStatus();
}

absl::Status DeleteRemote(const std::string& root, const std::string& name) {
  auto repo = Open(root);
  if (!repo.ok()) return repo.status();
  git_remote* remote = nullptr;
  if (git_remote_lookup(&remote, repo->get(), name.c_str()) != 0) return absl::OkStatus();
  git_remote_free(remote);
  if (git_remote_delete(repo->get(), name.c_str()) != 0) return GitError("git_remote_delete");
  // libgit2 leaves the emptied [remote "NAME"] header behind; drop it so the
  // host's config reads as before the sandbox existed.
  return DropEmptySection(absl::StrCat(git_repository_path(repo->get()), "config"),
                          absl::StrCat("[remote \"", name, "\"]"));
}

}  // namespace airlock::gitd
