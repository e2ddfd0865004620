#include "gitd/git_service.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gitd/host_repo.h"
#include "gitd/review.h"
#include "nlohmann/json.hpp"

namespace airlock::gitd {

namespace git = airlock::git::v1;

absl::Status GitService::Init() {
  return db_->Migrate({
      "CREATE TABLE baselines (sandbox TEXT PRIMARY KEY, roots TEXT NOT NULL, "
      "snapshot BLOB NOT NULL)",
      "CREATE TABLE clones (sandbox TEXT PRIMARY KEY, root TEXT NOT NULL)",
  });
}

grpc::Status GitService::PrepareClone(grpc::ServerContext*, const git::PrepareCloneRequest* req,
                                      git::PrepareCloneResponse* resp) {
  if (req->sandbox().empty() || req->path().empty() || req->path()[0] != '/') {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "clone mode needs a sandbox name and an absolute path");
  }
  auto facts = InspectRepo(req->path(), req->branch());
  if (!facts.ok()) return ToGrpc(facts.status());
  absl::Status s = db_->Exec("INSERT OR REPLACE INTO clones (sandbox, root) VALUES (?, ?)",
                             {req->sandbox(), facts->root});
  if (!s.ok()) return ToGrpc(s);
  resp->set_source_root(facts->root);
  resp->set_branch(facts->branch);
  resp->set_shallow(facts->shallow);
  for (const auto& [name, url] : facts->remotes) (*resp->mutable_remotes())[name] = url;
  return grpc::Status::OK;
}

grpc::Status GitService::Publish(grpc::ServerContext*, const git::PublishRequest* req,
                                 git::PublishResponse* resp) {
  auto rows = db_->Query("SELECT root FROM clones WHERE sandbox = ?", {req->sandbox()});
  if (!rows.ok()) return ToGrpc(rows.status());
  if (rows->empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("sandbox ", req->sandbox(), " is not in clone mode"));
  }
  std::string remote = absl::StrCat("sandbox-", req->sandbox());
  // The one write gitd makes to a host repo: this remote in .git/config.
  if (absl::Status s = SetRemote((*rows)[0][0], remote, req->url()); !s.ok()) return ToGrpc(s);
  resp->set_remote(remote);
  return grpc::Status::OK;
}

grpc::Status GitService::Unpublish(grpc::ServerContext*, const git::UnpublishRequest* req,
                                   git::UnpublishResponse*) {
  auto rows = db_->Query("SELECT root FROM clones WHERE sandbox = ?", {req->sandbox()});
  if (!rows.ok()) return ToGrpc(rows.status());
  if (!rows->empty()) {
    absl::Status s = DeleteRemote((*rows)[0][0], absl::StrCat("sandbox-", req->sandbox()));
    // A host repo that was moved or deleted has no remote left to remove.
    if (!s.ok() && s.code() != absl::StatusCode::kNotFound) return ToGrpc(s);
  }
  for (const char* sql : {"DELETE FROM clones WHERE sandbox = ?",
                          "DELETE FROM baselines WHERE sandbox = ?"}) {
    if (absl::Status s = db_->Exec(sql, {req->sandbox()}); !s.ok()) return ToGrpc(s);
  }
  return grpc::Status::OK;
}

grpc::Status GitService::Baseline(grpc::ServerContext*, const git::BaselineRequest* req,
                                  git::BaselineResponse* resp) {
  if (req->sandbox().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "baseline needs a sandbox name");
  }
  std::vector<std::string> roots(req->paths().begin(), req->paths().end());
  for (const auto& r : roots) {
    if (r.empty() || r[0] != '/') {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("path \"", r, "\" must be absolute"));
    }
  }
  auto snap = TakeSnapshot(roots);
  if (!snap.ok()) return ToGrpc(snap.status());
  nlohmann::json j = roots;
  absl::Status s = db_->Exec(
      "INSERT OR REPLACE INTO baselines (sandbox, roots, snapshot) VALUES (?, ?, ?)",
      {req->sandbox(), j.dump(), SerializeSnapshot(*snap)});
  if (!s.ok()) return ToGrpc(s);
  resp->set_files(snap->size());
  return grpc::Status::OK;
}

grpc::Status GitService::Review(grpc::ServerContext*, const git::ReviewRequest* req,
                                git::ReviewResponse* resp) {
  auto rows = db_->Query("SELECT roots, snapshot FROM baselines WHERE sandbox = ?",
                         {req->sandbox()});
  if (!rows.ok()) return ToGrpc(rows.status());
  if (rows->empty()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        absl::StrCat("no baseline for sandbox ", req->sandbox(),
                                     ": review covers sandboxes created with shared paths"));
  }
  auto before = ParseSnapshot((*rows)[0][1]);
  if (!before.ok()) return ToGrpc(before.status());
  std::vector<std::string> roots = nlohmann::json::parse((*rows)[0][0]);
  auto after = TakeSnapshot(roots);
  if (!after.ok()) return ToGrpc(after.status());
  for (const Finding& f : Compare(*before, *after)) {
    git::Finding* out = resp->add_findings();
    out->set_path(f.path);
    out->set_kind(f.kind);
    out->set_change(f.change);
    out->set_detail(f.detail);
  }
  return grpc::Status::OK;
}

}  // namespace airlock::gitd
