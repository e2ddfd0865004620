// grpc.health.v1.Health for the daemons, on the synchronous server API
// like every Airlock service (gRPC's built-in one runs on the callback
// API). Check answers at once; Watch streams the status and each change.
#ifndef AIRLOCK_COMMON_HEALTH_SERVICE_H_
#define AIRLOCK_COMMON_HEALTH_SERVICE_H_

#include <condition_variable>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "protos/grpc/health/v1/health.grpc.pb.h"

namespace airlock {

// HealthService reports one status for the whole server, under the empty
// service name; any other name is NOT_FOUND (Check) or SERVICE_UNKNOWN
// (Watch), as gRPC's own does for names nobody set.
class HealthService final : public grpc::health::v1::Health::Service {
 public:
  // SetServing changes the status every caller sees and wakes watchers.
  void SetServing(bool serving);
  // Shutdown reports NOT_SERVING and ends every Watch (the server is going
  // away).
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::health::v1::HealthCheckResponse* resp) override;
  grpc::Status Watch(grpc::ServerContext* ctx, const grpc::health::v1::HealthCheckRequest* req,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>* writer) override;

 private:
  // Watches at once (each holds one of the server's threads).
  static constexpr int kMaxWatchers = 32;

  std::mutex mu_;
  std::condition_variable changed_;
  int watchers_ = 0;
  bool serving_ = false;
  bool shutdown_ = false;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_HEALTH_SERVICE_H_
