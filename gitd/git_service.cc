#include "gitd/git_service.h"

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "gitd/review.h"
#include "nlohmann/json.hpp"

namespace airlock::gitd {

namespace git = airlock::git::v1;

absl::Status GitService::Init() {
  return db_->Migrate({
      "CREATE TABLE baselines (sandbox TEXT PRIMARY KEY, roots TEXT NOT NULL, "
      "snapshot BLOB NOT NULL)",
  });
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
