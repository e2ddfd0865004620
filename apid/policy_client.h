// apid's one client of policyd: a sandbox's own network rules (the REST
// API's inline networkPolicies) and reading the rules that apply to it.
#ifndef AIRLOCK_APID_POLICY_CLIENT_H_
#define AIRLOCK_APID_POLICY_CLIENT_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/policy/v1/policy.grpc.pb.h"

namespace airlock::apid {

class PolicyClient {
 public:
  explicit PolicyClient(std::shared_ptr<grpc::Channel> channel);

  // AddSandboxRules adds allow and deny rules scoped to `sandbox`, all or
  // nothing (INVALID_ARGUMENT naming a malformed network).
  absl::Status AddSandboxRules(const std::string& sandbox, const std::vector<std::string>& allow,
                               const std::vector<std::string>& deny);
  // ClearSandboxRules removes every rule scoped to `sandbox` alone.
  absl::Status ClearSandboxRules(const std::string& sandbox);
  // Rules lists the rules that apply to `sandbox` (global and its own) and
  // the preset the global ones came from.
  absl::StatusOr<airlock::policy::v1::ListRulesResponse> Rules(const std::string& sandbox);

 private:
  std::unique_ptr<airlock::policy::v1::Policy::Stub> stub_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_POLICY_CLIENT_H_
