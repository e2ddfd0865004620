// Built-in agents as vmmd sees them: which kit a sandbox of an agent runs,
// and which stored image holds an agent's install. Pure functions; the
// install itself (a sandbox of its own, saved as an image) is
// SandboxManager's, in sandbox_agents.cc.
#ifndef AIRLOCK_VMMD_AGENT_IMAGE_H_
#define AIRLOCK_VMMD_AGENT_IMAGE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

// kShellAgent is the agent without a kit: `bash -l` in the base template.
inline constexpr char kShellAgent[] = "shell";

// IsBuiltinAgent says whether `agent` names one of the built-in agent kits
// (not shell).
bool IsBuiltinAgent(const std::string& agent);

// AddAgentKit checks spec->agent() ("" is shell) and, for a built-in
// agent, puts its kit ("builtin:NAME") first among the spec's kits, where
// the workload goes; the user's --kit entries then compose with it as
// mixins. An unknown agent is INVALID_ARGUMENT naming the ones there are.
absl::Status AddAgentKit(airlock::vmm::v1::SandboxSpec* spec);

// AgentImageTag is the name of the image that holds `agent` installed at
// the version its kit resolved to, "agents/claude:2.1.332", read from the
// effective descriptor's `provides` ("claude@2.1.332").
absl::StatusOr<std::string> AgentImageTag(const std::string& agent,
                                          const std::string& effective_descriptor_json);

// AgentVersionOf is the version part of an agent image tag.
std::string AgentVersionOf(const std::string& tag);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_AGENT_IMAGE_H_
