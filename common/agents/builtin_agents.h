// The agent kits built into Airlock: one Kit v3 workload descriptor per
// agent (claude, codex, copilot, gemini, opencode, qwen), authored in
// kits/agents/NAME.yaml and compiled into the binaries, so `airlock run
// claude` and `airlock kit inspect claude` read no file on the host. A
// built-in kit is named by the ref "builtin:NAME", which common/kit's
// LoadKitRef resolves here. The shell workload is not one of them: vmmd
// keeps it special.
#ifndef AIRLOCK_COMMON_AGENTS_BUILTIN_AGENTS_H_
#define AIRLOCK_COMMON_AGENTS_BUILTIN_AGENTS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace airlock::agents {

// kBuiltinRefPrefix starts the kit ref of a built-in agent.
inline constexpr absl::string_view kBuiltinRefPrefix = "builtin:";

// BuiltinAgentNames lists the built-in agents, sorted byte-wise.
const std::vector<std::string>& BuiltinAgentNames();

// BuiltinAgentDescriptor returns the descriptor of agent `name` exactly as
// authored (YAML), or nullopt when no built-in agent has that name. The
// text lives as long as the program.
std::optional<absl::string_view> BuiltinAgentDescriptor(absl::string_view name);

// BuiltinAgentRef returns the kit ref of agent `name`: "builtin:NAME". It
// does not check that the agent exists.
std::string BuiltinAgentRef(absl::string_view name);

}  // namespace airlock::agents

#endif  // AIRLOCK_COMMON_AGENTS_BUILTIN_AGENTS_H_
