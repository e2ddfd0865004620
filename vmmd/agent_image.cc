#include "vmmd/agent_image.h"

#include <algorithm>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/agents/builtin_agents.h"
#include "nlohmann/json.hpp"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

bool IsBuiltinAgent(const std::string& agent) {
  return airlock::agents::BuiltinAgentDescriptor(agent).has_value();
}

absl::Status AddAgentKit(vmm::SandboxSpec* spec) {
  if (spec->agent().empty()) spec->set_agent(kShellAgent);
  if (spec->agent() == kShellAgent) return absl::OkStatus();
  if (!IsBuiltinAgent(spec->agent())) {
    std::vector<std::string> names = {kShellAgent};
    for (const auto& n : airlock::agents::BuiltinAgentNames()) names.push_back(n);
    return absl::InvalidArgumentError(absl::StrCat("unknown agent \"", spec->agent(),
                                                   "\"; this release has: ",
                                                   absl::StrJoin(names, ", ")));
  }
  std::string ref = airlock::agents::BuiltinAgentRef(spec->agent());
  std::vector<std::string> kits = {ref};
  for (const auto& k : spec->kits()) {
    if (k != ref) kits.push_back(k);
  }
  spec->clear_kits();
  for (const auto& k : kits) spec->add_kits(k);
  return absl::OkStatus();
}

absl::StatusOr<std::string> AgentImageTag(const std::string& agent,
                                          const std::string& effective_descriptor_json) {
  auto doc = nlohmann::json::parse(effective_descriptor_json, nullptr, false);
  std::string prefix = agent + "@";
  if (doc.is_object() && doc.contains("provides") && doc["provides"].is_array()) {
    for (const auto& p : doc["provides"]) {
      std::string version;
      if (p.is_string() && absl::StartsWith(p.get<std::string>(), prefix)) {
        version = p.get<std::string>().substr(prefix.size());
      } else if (p.is_object() && p.value("name", "") == agent && p.contains("version") &&
                 p["version"].is_string()) {
        version = p["version"].get<std::string>();
      }
      // Image tags allow [A-Za-z0-9_.-]; a semver build suffix's '+' is not.
      std::replace(version.begin(), version.end(), '+', '_');
      if (!version.empty()) return absl::StrCat("agents/", agent, ":", version);
    }
  }
  return absl::InternalError(absl::StrCat("the ", agent, " kit provides no \"", agent,
                                          "@VERSION\"; its install cannot be cached"));
}

std::string AgentVersionOf(const std::string& tag) {
  size_t colon = tag.rfind(':');
  return colon == std::string::npos ? "" : tag.substr(colon + 1);
}

}  // namespace airlock::vmmd
