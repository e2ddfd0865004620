// apid's one client of proxyd: the decision log, for policy-logs.
#ifndef AIRLOCK_APID_PROXY_CLIENT_H_
#define AIRLOCK_APID_PROXY_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

namespace airlock::apid {

class ProxyClient {
 public:
  explicit ProxyClient(std::shared_ptr<grpc::Channel> channel);
  // Decisions returns the newest `limit` decisions (of `sandbox`, or all
  // when empty), oldest first.
  absl::StatusOr<std::vector<airlock::proxy::v1::Decision>> Decisions(const std::string& sandbox,
                                                                     uint32_t limit);

 private:
  std::unique_ptr<airlock::proxy::v1::Proxy::Stub> stub_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_PROXY_CLIENT_H_
