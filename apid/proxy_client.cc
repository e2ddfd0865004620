#include "apid/proxy_client.h"

#include "apid/peer_status.h"
#include "common/client.h"

namespace airlock::apid {

namespace pb = airlock::proxy::v1;

ProxyClient::ProxyClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(pb::Proxy::NewStub(std::move(channel))) {}

absl::StatusOr<std::vector<pb::Decision>> ProxyClient::Decisions(const std::string& sandbox,
                                                               uint32_t limit) {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::DecisionLogRequest req;
  req.set_sandbox(sandbox);
  req.set_limit(limit);
  auto reader = stub_->DecisionLog(&ctx, req);
  std::vector<pb::Decision> out;
  pb::Decision d;
  while (reader->Read(&d)) out.push_back(d);
  if (absl::Status s = PeerStatus("proxyd", reader->Finish()); !s.ok()) return s;
  return out;
}

}  // namespace airlock::apid
