#include "apid/policy_client.h"

#include "absl/strings/str_cat.h"
#include "apid/peer_status.h"
#include "common/client.h"

namespace airlock::apid {

namespace pb = airlock::policy::v1;

namespace {
absl::Status Map(const grpc::Status& s) { return PeerStatus("policyd", s); }
}  // namespace

PolicyClient::PolicyClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(pb::Policy::NewStub(std::move(channel))) {}

absl::Status PolicyClient::AddSandboxRules(const std::string& sandbox,
                                           const std::vector<std::string>& allow,
                                           const std::vector<std::string>& deny) {
  if (allow.empty() && deny.empty()) return absl::OkStatus();
  pb::AddRulesRequest req;
  for (const auto* list : {&allow, &deny}) {
    for (const auto& network : *list) {
      pb::Rule* r = req.add_rules();
      r->set_action(list == &allow ? pb::ALLOW : pb::DENY);
      r->set_resource(network);
      r->set_sandbox(sandbox);
    }
  }
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::AddRulesResponse resp;
  return Map(stub_->AddRules(&ctx, req, &resp));
}

absl::Status PolicyClient::ClearSandboxRules(const std::string& sandbox) {
  auto rules = Rules(sandbox);
  if (!rules.ok()) return rules.status();
  for (const auto& r : rules->rules()) {
    if (r.sandbox() != sandbox) continue;
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, std::chrono::seconds(30));
    pb::RemoveRulesRequest req;
    req.set_id(r.id());
    pb::RemoveRulesResponse resp;
    if (absl::Status s = Map(stub_->RemoveRules(&ctx, req, &resp)); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<pb::ListRulesResponse> PolicyClient::Rules(const std::string& sandbox) {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(30));
  pb::ListRulesRequest req;
  req.set_sandbox(sandbox);
  pb::ListRulesResponse resp;
  if (absl::Status s = Map(stub_->ListRules(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

}  // namespace airlock::apid
