#include "common/health_service.h"

#include <chrono>

namespace airlock {

namespace health = grpc::health::v1;

void HealthService::SetServing(bool serving) {
  std::lock_guard<std::mutex> lock(mu_);
  serving_ = serving;
  changed_.notify_all();
}

void HealthService::Shutdown() {
  std::lock_guard<std::mutex> lock(mu_);
  shutdown_ = true;
  serving_ = false;
  changed_.notify_all();
}

grpc::Status HealthService::Check(grpc::ServerContext*, const health::HealthCheckRequest* req,
                                  health::HealthCheckResponse* resp) {
  if (!req->service().empty()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        "this daemon serves no service named \"" + req->service() + "\"");
  }
  std::lock_guard<std::mutex> lock(mu_);
  resp->set_status(serving_ ? health::HealthCheckResponse::SERVING
                            : health::HealthCheckResponse::NOT_SERVING);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(grpc::ServerContext* ctx, const health::HealthCheckRequest* req,
                                  grpc::ServerWriter<health::HealthCheckResponse>* writer) {
  bool known = req->service().empty();
  std::unique_lock<std::mutex> lock(mu_);
  // Each watch holds a server thread while it lasts.
  if (watchers_ >= kMaxWatchers) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                        "too many health watches on this daemon; use Check");
  }
  ++watchers_;
  int sent = -1;
  while (true) {
    int now = !known ? health::HealthCheckResponse::SERVICE_UNKNOWN
                     : serving_ ? health::HealthCheckResponse::SERVING
                                : health::HealthCheckResponse::NOT_SERVING;
    if (now != sent) {
      health::HealthCheckResponse resp;
      resp.set_status(static_cast<health::HealthCheckResponse::ServingStatus>(now));
      lock.unlock();
      bool ok = writer->Write(resp);
      lock.lock();
      if (!ok) break;
      sent = now;
      // Looked at again: the state may have changed during the write.
      continue;
    }
    // Only once the latest state went out: Shutdown set NOT_SERVING first,
    // so a watcher always sends it before ending (a Shutdown during the
    // write above used to end the watch without it).
    if (shutdown_ || ctx->IsCancelled()) break;
    // A cancelled call is noticed within this wait (the sync API has no
    // cancellation callback).
    changed_.wait_for(lock, std::chrono::milliseconds(500));
  }
  --watchers_;
  return grpc::Status::OK;
}

}  // namespace airlock
