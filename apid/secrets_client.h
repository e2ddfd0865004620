// apid's one client of secretsd: secret metadata, storing and deleting.
// Values go in, never out.
#ifndef AIRLOCK_APID_SECRETS_CLIENT_H_
#define AIRLOCK_APID_SECRETS_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::apid {

class SecretsClient {
 public:
  explicit SecretsClient(std::shared_ptr<grpc::Channel> channel);
  absl::StatusOr<std::vector<airlock::secrets::v1::SecretInfo>> List();
  absl::StatusOr<airlock::secrets::v1::SecretInfo> Set(const airlock::secrets::v1::SetRequest& req);
  absl::Status Delete(const std::string& id);
  // Services lists the built-in services (valid serviceType values).
  absl::StatusOr<std::vector<std::string>> Services();

 private:
  std::unique_ptr<airlock::secrets::v1::Secrets::Stub> stub_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_SECRETS_CLIENT_H_
