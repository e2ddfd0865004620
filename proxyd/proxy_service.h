// proxyd's gRPC surface (airlock.proxy.v1.Proxy): attach and detach a
// sandbox's egress port, list attachments, stream the decision log.
// Attachments are kept in proxyd's SQLite file, so a restarted proxyd
// picks every sandbox's egress up again by itself.
#ifndef AIRLOCK_PROXYD_PROXY_SERVICE_H_
#define AIRLOCK_PROXYD_PROXY_SERVICE_H_

#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "common/state_db.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"
#include "proxyd/attachment.h"

namespace airlock::proxyd {

class ProxyService final : public airlock::proxy::v1::Proxy::Service {
 public:
  ProxyService(StateDb* db, ProxyContext* px) : db_(db), px_(px) {}

  // Init restarts the stored attachments (table "attachments").
  absl::Status Init();
  // Shutdown detaches everything in memory (the stored list stays).
  void Shutdown();

  grpc::Status Attach(grpc::ServerContext*, const airlock::proxy::v1::AttachRequest*,
                      airlock::proxy::v1::AttachResponse*) override;
  grpc::Status Detach(grpc::ServerContext*, const airlock::proxy::v1::DetachRequest*,
                      airlock::proxy::v1::DetachResponse*) override;
  grpc::Status Attachments(grpc::ServerContext*, const airlock::proxy::v1::AttachmentsRequest*,
                           airlock::proxy::v1::AttachmentsResponse*) override;
  grpc::Status DecisionLog(grpc::ServerContext*, const airlock::proxy::v1::DecisionLogRequest*,
                           grpc::ServerWriter<airlock::proxy::v1::Decision>*) override;
  grpc::Status Diagnose(grpc::ServerContext*, const airlock::proxy::v1::DiagnoseRequest*,
                        airlock::proxy::v1::DiagnoseResponse*) override;

 private:
  StateDb* db_;
  ProxyContext* px_;
  std::mutex mu_;
  // shared_ptr: Attach waits on one without the lock while a Detach (or a
  // second Attach) may drop it from the map.
  std::map<std::string, std::shared_ptr<Attachment>> attached_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_PROXY_SERVICE_H_
