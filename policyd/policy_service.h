// policyd's gRPC surface (airlock.policy.v1.Policy): rules, presets and
// check, and the compiled snapshots proxyd follows. Kits answer
// UNIMPLEMENTED until built.
#ifndef AIRLOCK_POLICYD_POLICY_SERVICE_H_
#define AIRLOCK_POLICYD_POLICY_SERVICE_H_

#include "policyd/rule_store.h"
#include "protos/policy/v1/policy.grpc.pb.h"

namespace airlock::policyd {

class PolicyService final : public airlock::policy::v1::Policy::Service {
 public:
  explicit PolicyService(RuleStore* store) : store_(store) {}

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

 private:
  RuleStore* store_;
};

}  // namespace airlock::policyd

#endif  // AIRLOCK_POLICYD_POLICY_SERVICE_H_
