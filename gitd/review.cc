#include "gitd/review.h"

#include <ftw.h>
#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <tuple>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/fd_io.h"
#include "nlohmann/json.hpp"

namespace airlock::gitd {
namespace {

std::string Sha256(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) absl::StrAppend(&hex, absl::Hex(md[i], absl::kZeroPad2));
  return hex;
}

// RiskyPart is the part of a file whose change matters: the "scripts" of a
// package.json, the go:generate lines of a Go file, else the whole file.
std::string RiskyPart(const std::string& kind, const std::string& path) {
  std::string text = ReadFileToString(path);
  if (kind == "package-scripts") {
    auto j = nlohmann::json::parse(text, nullptr, false);
    if (!j.is_discarded() && j.is_object()) {
      return j.contains("scripts") ? j["scripts"].dump() : "";
    }
  }
  if (kind == "go-generate") {
    std::string lines;
    for (absl::string_view l : absl::StrSplit(text, '\n')) {
      if (absl::StrContains(l, "//go:generate")) absl::StrAppend(&lines, l, "\n");
    }
    return lines;
  }
  return text;
}

// State of the walk (nftw takes a plain function).
thread_local Snapshot* g_snapshot;
thread_local std::string g_root;

int Visit(const char* p, const struct stat* st, int type, struct FTW*) {
  std::string path = p;
  std::string rel = path.size() > g_root.size() ? path.substr(g_root.size() + 1) : "";
  if (type == FTW_D) return 0;
  if (type != FTW_F) return 0;  // symlinks and others: never followed
  if (absl::StrContains(path, "/.git/objects/") || absl::StrContains(path, "/node_modules/")) {
    return 0;
  }
  Entry e;
  e.kind = Classify(rel.empty() ? path.substr(path.rfind('/') + 1) : rel);
  e.executable = (st->st_mode & 0111) != 0;
  if (!e.kind.empty()) e.digest = Sha256(RiskyPart(e.kind, path));
  (*g_snapshot)[path] = e;
  return 0;
}

}  // namespace

std::string Classify(absl::string_view rel) {
  std::string base(rel.substr(rel.rfind('/') + 1));
  auto under = [&](absl::string_view dir) {
    return absl::StartsWith(rel, dir) || absl::StrContains(rel, absl::StrCat("/", dir));
  };
  if (under(".git/hooks/")) return absl::EndsWith(base, ".sample") ? "" : "git-hook";
  if (rel == ".git/config" || absl::EndsWith(rel, "/.git/config")) return "git-config";
  if (under(".github/workflows/") || base == ".gitlab-ci.yml") return "ci-workflow";
  if (base == "Makefile" || base == "makefile" || base == "GNUmakefile" ||
      base == "Cargo.toml" || base == "build.rs") {
    return "build-script";
  }
  if (base == "package.json") return "package-scripts";
  if (absl::EndsWith(base, ".go")) return "go-generate";
  if (rel == ".vscode/tasks.json" || absl::EndsWith(rel, "/.vscode/tasks.json") ||
      under(".idea/")) {
    return "editor-tasks";
  }
  if (under(".claude/") || under(".codex/")) return "agent-config";
  if (base == ".envrc") return "envrc";
  return "";
}

absl::StatusOr<Snapshot> TakeSnapshot(const std::vector<std::string>& roots) {
  Snapshot s;
  for (const auto& root : roots) {
    struct stat st;
    if (lstat(root.c_str(), &st) != 0) {
      return absl::NotFoundError(absl::StrCat("cannot read ", root));
    }
    g_snapshot = &s;
    g_root = S_ISDIR(st.st_mode) ? root : root.substr(0, root.rfind('/'));
    if (nftw(root.c_str(), Visit, 32, FTW_PHYS) != 0) {
      return absl::InternalError(absl::StrCat("cannot walk ", root));
    }
  }
  return s;
}

std::vector<Finding> Compare(const Snapshot& before, const Snapshot& after) {
  std::vector<Finding> out;
  for (const auto& [path, now] : after) {
    auto it = before.find(path);
    if (!now.kind.empty()) {
      if (it == before.end()) {
        out.push_back({path, now.kind, "added", ""});
      } else if (it->second.digest != now.digest) {
        out.push_back({path, now.kind, "modified",
                       now.kind == "package-scripts" ? "scripts changed"
                       : now.kind == "go-generate"   ? "go:generate lines changed"
                                                     : ""});
      }
    }
    bool was_exec = it != before.end() && it->second.executable;
    if (now.executable && !was_exec) {
      out.push_back({path, "new-executable", it == before.end() ? "added" : "modified",
                     "executable bit set"});
    }
  }
  for (const auto& [path, was] : before) {
    if (!was.kind.empty() && !after.count(path)) out.push_back({path, was.kind, "removed", ""});
  }
  std::sort(out.begin(), out.end(), [](const Finding& a, const Finding& b) {
    return std::tie(a.path, a.kind) < std::tie(b.path, b.kind);
  });
  return out;
}

std::string SerializeSnapshot(const Snapshot& s) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [path, e] : s) j[path] = {e.kind, e.digest, e.executable};
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

absl::StatusOr<Snapshot> ParseSnapshot(absl::string_view json) {
  auto j = nlohmann::json::parse(json, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return absl::DataLossError("stored baseline is corrupt");
  Snapshot s;
  for (auto it = j.begin(); it != j.end(); ++it) {
    s[it.key()] = Entry{it.value()[0], it.value()[1], it.value()[2]};
  }
  return s;
}

}  // namespace airlock::gitd
