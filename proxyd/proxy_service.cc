#include "proxyd/proxy_service.h"

#include "proxyd/diagnose.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace airlock::proxyd {

namespace pb = airlock::proxy::v1;

absl::Status ProxyService::Init() {
  auto rows = db_->Query("SELECT sandbox, channel_path FROM attachments");
  if (!rows.ok()) return rows.status();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& row : *rows) {
    auto a = std::make_shared<Attachment>(row[0], row[1], px_);
    a->Start();
    attached_[row[0]] = std::move(a);
    AIRLOCK_LOG_INFO("reattaching egress", {{"sandbox", row[0]}});
  }
  return absl::OkStatus();
}

void ProxyService::Shutdown() {
  std::map<std::string, std::shared_ptr<Attachment>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(attached_);
  }
  all.clear();
}

grpc::Status ProxyService::Attach(grpc::ServerContext*, const pb::AttachRequest* req,
                                  pb::AttachResponse* resp) {
  if (req->sandbox().empty() || !absl::StartsWith(req->channel_path(), "/")) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "Attach needs a sandbox name and the absolute path of its egress socket");
  }
  std::shared_ptr<Attachment> old;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attached_.find(req->sandbox());
    if (it != attached_.end()) {
      old = std::move(it->second);
      attached_.erase(it);
    }
  }
  old.reset();  // a new boot replaces the old attachment
  if (absl::Status s = db_->Exec(
          "INSERT OR REPLACE INTO attachments (sandbox, channel_path) VALUES (?, ?)",
          {req->sandbox(), req->channel_path()});
      !s.ok()) {
    return grpc::Status(grpc::StatusCode::INTERNAL, std::string(s.message()));
  }
  auto a = std::make_shared<Attachment>(req->sandbox(), req->channel_path(), px_);
  a->Start();
  std::shared_ptr<Attachment> raw = a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    attached_[req->sandbox()] = std::move(a);
  }
  if (absl::Status s = raw->WaitReady(std::chrono::seconds(30)); !s.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(s.message()));
  }
  resp->set_ca_certificate_pem(px_->ca->certificate_pem());
  AIRLOCK_LOG_INFO("egress attached", {{"sandbox", req->sandbox()}});
  return grpc::Status::OK;
}

grpc::Status ProxyService::Detach(grpc::ServerContext*, const pb::DetachRequest* req,
                                  pb::DetachResponse*) {
  std::shared_ptr<Attachment> a;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = attached_.find(req->sandbox());
    if (it != attached_.end()) {
      a = std::move(it->second);
      attached_.erase(it);
    }
  }
  (void)db_->Exec("DELETE FROM attachments WHERE sandbox = ?", {req->sandbox()});
  if (a == nullptr) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("sandbox ", req->sandbox(), " is not attached"));
  }
  a.reset();
  if (px_->secrets != nullptr) px_->secrets->Forget(req->sandbox());
  AIRLOCK_LOG_INFO("egress detached", {{"sandbox", req->sandbox()}});
  return grpc::Status::OK;
}

grpc::Status ProxyService::Attachments(grpc::ServerContext*, const pb::AttachmentsRequest*,
                                       pb::AttachmentsResponse* resp) {
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, a] : attached_) {
    pb::Attachment* out = resp->add_attachments();
    out->set_sandbox(name);
    out->set_policy_revision(a->policy_revision());
    out->set_open_connections(a->open_connections());
  }
  return grpc::Status::OK;
}

grpc::Status ProxyService::DecisionLog(grpc::ServerContext* ctx,
                                       const pb::DecisionLogRequest* req,
                                       grpc::ServerWriter<pb::Decision>* writer) {
  uint64_t newest = 0;
  size_t limit = req->limit() == 0 ? 100 : req->limit();
  for (const auto& d : px_->log->Recent(limit, req->sandbox(), &newest)) {
    if (!writer->Write(d)) return grpc::Status::OK;
  }
  while (req->follow() && !ctx->IsCancelled()) {
    for (const auto& d :
         px_->log->Since(newest, req->sandbox(), std::chrono::milliseconds(1000), &newest)) {
      if (!writer->Write(d)) return grpc::Status::OK;
    }
  }
  return grpc::Status::OK;
}

grpc::Status ProxyService::Diagnose(grpc::ServerContext*, const pb::DiagnoseRequest* req,
                                    pb::DiagnoseResponse* resp) {
  if (req->hosts_size() > 256) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "at most 256 hosts per Diagnose");
  }
  if (req->port() > 65535) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "port must be 0..65535");
  }
  std::vector<std::string> hosts(req->hosts().begin(), req->hosts().end());
  *resp = proxyd::Diagnose(*px_, hosts, req->port() == 0 ? 443 : req->port());
  return grpc::Status::OK;
}

}  // namespace airlock::proxyd
