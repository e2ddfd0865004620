#include "apid/secrets_client.h"

#include "apid/peer_status.h"
#include "common/client.h"

namespace airlock::apid {

namespace pb = airlock::secrets::v1;

SecretsClient::SecretsClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(pb::Secrets::NewStub(std::move(channel))) {}

absl::StatusOr<std::vector<pb::SecretInfo>> SecretsClient::List() {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::ListResponse resp;
  if (auto s = PeerStatus("secretsd", stub_->List(&ctx, pb::ListRequest(), &resp)); !s.ok()) {
    return s;
  }
  return std::vector<pb::SecretInfo>(resp.secrets().begin(), resp.secrets().end());
}

absl::StatusOr<pb::SecretInfo> SecretsClient::Set(const pb::SetRequest& req) {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::SecretInfo resp;
  if (auto s = PeerStatus("secretsd", stub_->Set(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status SecretsClient::Delete(const std::string& id) {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::DeleteRequest req;
  req.set_id(id);
  pb::DeleteResponse resp;
  return PeerStatus("secretsd", stub_->Delete(&ctx, req, &resp));
}

absl::StatusOr<std::vector<std::string>> SecretsClient::Services() {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::ServicesResponse resp;
  if (auto s = PeerStatus("secretsd", stub_->Services(&ctx, pb::ServicesRequest(), &resp));
      !s.ok()) {
    return s;
  }
  std::vector<std::string> out;
  for (const auto& svc : resp.services()) out.push_back(svc.name());
  return out;
}

}  // namespace airlock::apid
