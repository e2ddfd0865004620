// policyd's gRPC surface (airlock.policy.v1.Policy): rules, presets and
// check, the compiled snapshots proxyd follows, and kits (resolution, the
// widening gate, phases) through KitGate.
#ifndef AIRLOCK_POLICYD_POLICY_SERVICE_H_
#define AIRLOCK_POLICYD_POLICY_SERVICE_H_

#include "policyd/kit_grant.h"
#include "policyd/rule_store.h"
#include "protos/policy/v1/policy.grpc.pb.h"

namespace airlock::policyd {

class PolicyService final : public airlock::policy::v1::Policy::Service {
 public:
  PolicyService(RuleStore* store, KitGate* kits) : store_(store), kits_(kits) {}

  grpc::Status AddRules(grpc::ServerContext*, const airlock::policy::v1::AddRulesRequest*,
                        airlock::policy::v1::AddRulesResponse*) override;
  grpc::Status RemoveRules(grpc::ServerContext*, const airlock::policy::v1::RemoveRulesRequest*,
                           airlock::policy::v1::RemoveRulesResponse*) override;
  grpc::Status ListRules(grpc::ServerContext*, const airlock::policy::v1::ListRulesRequest*,
                         airlock::policy::v1::ListRulesResponse*) override;
  grpc::Status Check(grpc::ServerContext*, const airlock::policy::v1::CheckRequest*,
                     airlock::policy::v1::CheckResponse*) override;
  grpc::Status InitPreset(grpc::ServerContext*, const airlock::policy::v1::InitPresetRequest*,
                          airlock::policy::v1::InitPresetResponse*) override;
  grpc::Status Snapshot(grpc::ServerContext*, const airlock::policy::v1::SnapshotRequest*,
                        grpc::ServerWriter<airlock::policy::v1::CompiledPolicy>*) override;
  grpc::Status Resolve(grpc::ServerContext*, const airlock::policy::v1::ResolveRequest*,
                       airlock::policy::v1::ResolveResponse*) override;
  grpc::Status Diff(grpc::ServerContext*, const airlock::policy::v1::DiffRequest*,
                    airlock::policy::v1::DiffResponse*) override;
  grpc::Status Approve(grpc::ServerContext*, const airlock::policy::v1::ApproveRequest*,
                       airlock::policy::v1::ApproveResponse*) override;
  grpc::Status ListHolds(grpc::ServerContext*, const airlock::policy::v1::ListHoldsRequest*,
                         airlock::policy::v1::ListHoldsResponse*) override;
  grpc::Status SetKitPhase(grpc::ServerContext*, const airlock::policy::v1::SetKitPhaseRequest*,
                           airlock::policy::v1::SetKitPhaseResponse*) override;
  grpc::Status ForgetKits(grpc::ServerContext*, const airlock::policy::v1::ForgetKitsRequest*,
                          airlock::policy::v1::ForgetKitsResponse*) override;

 private:
  RuleStore* store_;
  KitGate* kits_;
};

}  // namespace airlock::policyd

#endif  // AIRLOCK_POLICYD_POLICY_SERVICE_H_
