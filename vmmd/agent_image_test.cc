#include "vmmd/agent_image.h"

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

namespace vmm = airlock::vmm::v1;

TEST(AddAgentKit, ShellHasNoKit) {
  vmm::SandboxSpec spec;
  ASSERT_TRUE(AddAgentKit(&spec).ok());
  EXPECT_EQ(spec.agent(), "shell");
  EXPECT_EQ(spec.kits_size(), 0);
}

TEST(AddAgentKit, ABuiltinAgentsKitIsTheWorkloadBeforeTheUsersMixins) {
  vmm::SandboxSpec spec;
  spec.set_agent("claude");
  spec.add_kits("/home/u/notes.yaml");
  ASSERT_TRUE(AddAgentKit(&spec).ok());
  ASSERT_EQ(spec.kits_size(), 2);
  EXPECT_EQ(spec.kits(0), "builtin:claude");
  EXPECT_EQ(spec.kits(1), "/home/u/notes.yaml");
  // Applied twice (or named by the user too), it is still there once.
  ASSERT_TRUE(AddAgentKit(&spec).ok());
  EXPECT_EQ(spec.kits_size(), 2);
}

TEST(AddAgentKit, AnUnknownAgentNamesTheOnesThereAre) {
  vmm::SandboxSpec spec;
  spec.set_agent("clawd");
  absl::Status s = AddAgentKit(&spec);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "unknown agent \"clawd\"; this release has: shell, claude, codex, copilot, gemini, "
            "opencode, qwen");
  EXPECT_EQ(spec.kits_size(), 0);
}

TEST(AgentImageTag, ComesFromTheAgentsProvidesEntry) {
  auto tag = AgentImageTag(
      "claude", R"({"kind":"workload","provides":["notes@1","claude@2.1.332"]})");
  ASSERT_TRUE(tag.ok()) << tag.status();
  EXPECT_EQ(*tag, "agents/claude:2.1.332");
  EXPECT_EQ(AgentVersionOf(*tag), "2.1.332");
  auto object = AgentImageTag("codex", R"({"provides":[{"name":"codex","version":"0.1+b"}]})");
  ASSERT_TRUE(object.ok());
  EXPECT_EQ(*object, "agents/codex:0.1_b");
}

TEST(AgentImageTag, WithoutAVersionTheInstallCannotBeCached) {
  EXPECT_FALSE(AgentImageTag("claude", R"({"provides":["claudette@1"]})").ok());
  EXPECT_FALSE(AgentImageTag("claude", "not json").ok());
}

}  // namespace
}  // namespace airlock::vmmd
