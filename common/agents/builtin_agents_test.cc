#include "common/agents/builtin_agents.h"

#include <string>
#include <variant>
#include <vector>

#include "gtest/gtest.h"
#include "common/kit/capabilities.h"
#include "common/kit/descriptor.h"
#include "common/kit/resolve.h"
#include "common/kit/validate.h"

namespace airlock::agents {
namespace {

template <typename T>
const T* Typed(const kit::Descriptor& d, absl::string_view type) {
  for (const kit::CapabilityItem& item : d.capabilities) {
    const auto* e = std::get_if<kit::CapabilityEntry>(&item);
    if (e != nullptr && e->type == type) return e->As<T>();
  }
  return nullptr;
}

TEST(BuiltinAgentsTest, NamesAreTheAgentKitsSorted) {
  EXPECT_EQ(BuiltinAgentNames(),
            (std::vector<std::string>{"claude", "codex", "copilot", "gemini", "opencode", "qwen"}));
  EXPECT_EQ(BuiltinAgentRef("claude"), "builtin:claude");
  EXPECT_EQ(kBuiltinRefPrefix, "builtin:");
}

TEST(BuiltinAgentsTest, DescriptorsAreTheFilesAsAuthored) {
  for (const std::string& name : BuiltinAgentNames()) {
    std::optional<absl::string_view> text = BuiltinAgentDescriptor(name);
    ASSERT_TRUE(text.has_value()) << name;
    EXPECT_EQ(text->rfind("# syntax=docker/sandbox-kit:3\n", 0), 0u) << name;
    EXPECT_NE(text->find("Built-in agent \"" + name + "\""), absl::string_view::npos) << name;
  }
  EXPECT_FALSE(BuiltinAgentDescriptor("shell").has_value());  // vmmd's own
  EXPECT_FALSE(BuiltinAgentDescriptor("").has_value());
  EXPECT_FALSE(BuiltinAgentDescriptor("Claude").has_value());
  EXPECT_FALSE(BuiltinAgentDescriptor("builtin:claude").has_value());
}

// Every built-in agent is a valid workload as authored, and resolves with
// its default args to an agent with a command and an install hook.
TEST(BuiltinAgentsTest, EveryAgentValidatesAndResolves) {
  for (const std::string& name : BuiltinAgentNames()) {
    SCOPED_TRACE(name);
    const std::string ref = BuiltinAgentRef(name);
    absl::StatusOr<kit::Descriptor> authored = kit::ParseDescriptor(*BuiltinAgentDescriptor(name));
    ASSERT_TRUE(authored.ok()) << authored.status();
    EXPECT_EQ(authored->kind, kit::KitKind::kWorkload);

    absl::StatusOr<kit::Validation> valid = kit::ValidateKits({ref}, {});
    ASSERT_TRUE(valid.ok()) << valid.status();
    EXPECT_TRUE(valid->warnings.empty()) << ::testing::PrintToString(valid->warnings);

    absl::StatusOr<kit::ResolvedKits> resolved = kit::ResolveKits({ref}, {});
    ASSERT_TRUE(resolved.ok()) << resolved.status();
    EXPECT_EQ(resolved->composition.order, std::vector<std::string>{ref});
    EXPECT_TRUE(resolved->not_enforced.empty()) << ::testing::PrintToString(resolved->not_enforced);
    const kit::Descriptor& merged = resolved->composition.merged;
    const auto* agent = Typed<kit::AgentConfig>(merged, kit::kAirlockAgent);
    ASSERT_NE(agent, nullptr);
    ASSERT_FALSE(agent->command.empty());
    EXPECT_EQ(agent->command[0], name);
    const auto* lifecycle = Typed<kit::LifecycleConfig>(merged, kit::kLifecycle);
    ASSERT_NE(lifecycle, nullptr);
    ASSERT_FALSE(lifecycle->install.empty());
    // The default version is in the provides and in the install hook.
    ASSERT_EQ(merged.provides.size(), 1u);
    const std::string& version = *authored->args.at("version").default_value;
    EXPECT_EQ(merged.provides[0].text, name + "@" + version);
    EXPECT_NE(lifecycle->install[0].command.back().find("v='" + version + "'"), std::string::npos);
    // The install phase reaches the npm registry; nothing else does then.
    EXPECT_EQ(resolved->surface.install.allow_hosts,
              std::vector<std::string>{"registry.npmjs.org:443"});
  }
}

TEST(BuiltinAgentsTest, AVersionArgPinsTheInstall) {
  absl::StatusOr<kit::ResolvedKits> resolved =
      kit::ResolveKits({"builtin:claude"}, {{"version", "2.0.0"}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  ASSERT_EQ(resolved->composition.merged.provides.size(), 1u);
  EXPECT_EQ(resolved->composition.merged.provides[0].text, "claude@2.0.0");
  EXPECT_FALSE(kit::ResolveKits({"builtin:claude"}, {{"version", "2.0 beta"}}).ok());
}

}  // namespace
}  // namespace airlock::agents
