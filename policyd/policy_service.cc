#include "policyd/policy_service.h"

#include "absl/strings/str_join.h"
#include "common/status.h"
#include "common/policy/rule_wire.h"

namespace airlock::policyd {

namespace pb = airlock::policy::v1;


grpc::Status PolicyService::AddRules(grpc::ServerContext*, const pb::AddRulesRequest* req,
                                     pb::AddRulesResponse* resp) {
  if (req->rules().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no rules given");
  }
  std::vector<RuleSpec> specs;
  for (const auto& r : req->rules()) {
    if (r.action() != pb::ALLOW && r.action() != pb::DENY) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          "every rule needs an action (ALLOW or DENY)");
    }
    RuleSpec s = policy::SpecFromProto(r);
    s.origin = "user";
    specs.push_back(s);
  }
  auto added = store_->Add(specs);
  if (!added.ok()) return ToGrpc(added.status());
  for (const auto& r : *added) policy::RuleToProto(r, resp->add_rules());
  return grpc::Status::OK;
}

grpc::Status PolicyService::RemoveRules(grpc::ServerContext*, const pb::RemoveRulesRequest* req,
                                        pb::RemoveRulesResponse* resp) {
  if (req->id().empty() == req->resource().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "give exactly one of a rule id or a resource");
  }
  auto removed = store_->Remove(req->id(), req->resource(), req->sandbox());
  if (!removed.ok()) return ToGrpc(removed.status());
  resp->set_removed(*removed);
  return grpc::Status::OK;
}

grpc::Status PolicyService::ListRules(grpc::ServerContext*, const pb::ListRulesRequest* req,
                                      pb::ListRulesResponse* resp) {
  for (const auto& r : store_->List(req->sandbox())) policy::RuleToProto(r, resp->add_rules());
  resp->set_preset(store_->Preset());
  return grpc::Status::OK;
}

grpc::Status PolicyService::Check(grpc::ServerContext*, const pb::CheckRequest* req,
                                  pb::CheckResponse* resp) {
  auto q = ParseTarget(req->target(), req->method());
  if (!q.ok()) return ToGrpc(q.status());
  q->sandbox = req->sandbox();
  std::shared_ptr<const RuleSet> rules = store_->Compiled();
  Decision d = rules->Decide(*q);
  resp->set_action(d.action == Action::kAllow ? pb::ALLOW : pb::DENY);
  if (d.rule != nullptr) policy::RuleToProto(*d.rule, resp->mutable_rule());
  resp->set_reason(d.reason);
  return grpc::Status::OK;
}

grpc::Status PolicyService::InitPreset(grpc::ServerContext*, const pb::InitPresetRequest* req,
                                       pb::InitPresetResponse* resp) {
  auto rules = store_->InitPreset(req->preset());
  if (!rules.ok()) return ToGrpc(rules.status());
  for (const auto& r : *rules) policy::RuleToProto(r, resp->add_rules());
  return grpc::Status::OK;
}

grpc::Status PolicyService::Snapshot(grpc::ServerContext* ctx, const pb::SnapshotRequest* req,
                                     grpc::ServerWriter<pb::CompiledPolicy>* writer) {
  uint64_t sent = 0;
  while (!ctx->IsCancelled()) {
    uint64_t revision = store_->Revision();
    if (revision != sent) {
      pb::CompiledPolicy policy;
      policy.set_sandbox(req->sandbox());
      policy.set_revision(revision);
      for (const auto& r : store_->List(req->sandbox())) policy::RuleToProto(r, policy.add_rules());
      if (!writer->Write(policy)) return grpc::Status::OK;
      sent = revision;
      if (!req->follow()) return grpc::Status::OK;
    }
    // Wake at least once a second to notice a caller that went away.
    store_->WaitForChange(sent, std::chrono::seconds(1));
  }
  return grpc::Status::OK;
}

grpc::Status PolicyService::Resolve(grpc::ServerContext*, const pb::ResolveRequest* req,
                                    pb::ResolveResponse* resp) {
  auto r = kits_->Resolve(*req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status PolicyService::Diff(grpc::ServerContext*, const pb::DiffRequest* req,
                                 pb::DiffResponse* resp) {
  if (req->old().ref().empty() || req->new_().ref().empty()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "both old and new kit refs are required");
  }
  kit::ArgValues args(req->args().begin(), req->args().end());
  auto diff = kit::DiffKits({req->old().ref()}, {req->new_().ref()}, args);
  if (!diff.ok()) return ToGrpc(diff.status());
  for (const auto& w : diff->widenings) resp->add_widenings(w);
  for (const auto& n : diff->narrowings) resp->add_narrowings(n);
  return grpc::Status::OK;
}

grpc::Status PolicyService::Approve(grpc::ServerContext*, const pb::ApproveRequest* req,
                                    pb::ApproveResponse* resp) {
  auto r = kits_->Approve(req->hold_id());
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status PolicyService::ListHolds(grpc::ServerContext*, const pb::ListHoldsRequest* req,
                                      pb::ListHoldsResponse* resp) {
  auto holds = kits_->Holds(req->sandbox());
  if (!holds.ok()) return ToGrpc(holds.status());
  for (auto& h : *holds) *resp->add_holds() = std::move(h);
  return grpc::Status::OK;
}

grpc::Status PolicyService::SetKitPhase(grpc::ServerContext*, const pb::SetKitPhaseRequest* req,
                                        pb::SetKitPhaseResponse* resp) {
  if (absl::Status s = kits_->SetPhase(req->sandbox(), req->phase()); !s.ok()) return ToGrpc(s);
  resp->set_phase(req->phase());
  return grpc::Status::OK;
}

grpc::Status PolicyService::ForgetKits(grpc::ServerContext*, const pb::ForgetKitsRequest* req,
                                       pb::ForgetKitsResponse*) {
  return ToGrpc(kits_->Forget(req->sandbox()));
}

}  // namespace airlock::policyd
