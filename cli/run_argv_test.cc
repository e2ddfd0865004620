#include "cli/run_argv.h"

#include "gtest/gtest.h"

namespace airlock::cli {
namespace {

using Argv = std::vector<std::string>;

airlock::vmm::v1::Sandbox AgentSandbox(const Argv& command) {
  airlock::vmm::v1::Sandbox sb;
  for (const auto& c : command) sb.mutable_kit_plan()->add_command(c);
  return sb;
}

TEST(RunArgv, NoArgumentsRunsTheAgentsCommand) {
  EXPECT_EQ(RunArgv(AgentSandbox({"claude", "--dangerously-skip-permissions"}), {}),
            (Argv{"claude", "--dangerously-skip-permissions"}));
}

TEST(RunArgv, ShellWithoutAKitCommandIsALoginBash) {
  EXPECT_EQ(RunArgv(airlock::vmm::v1::Sandbox(), {}), (Argv{"bash", "-l"}));
}

TEST(RunArgv, OptionsAreAppendedToTheAgentsCommand) {
  EXPECT_EQ(RunArgv(AgentSandbox({"claude", "--dangerously-skip-permissions"}), {"--version"}),
            (Argv{"claude", "--dangerously-skip-permissions", "--version"}));
  EXPECT_EQ(RunArgv(AgentSandbox({"gemini", "--yolo"}), {"-p", "hi there"}),
            (Argv{"gemini", "--yolo", "-p", "hi there"}));
}

TEST(RunArgv, ACommandReplacesTheAgentsCommand) {
  EXPECT_EQ(RunArgv(AgentSandbox({"claude"}), {"uname", "-a"}), (Argv{"uname", "-a"}));
  EXPECT_EQ(RunArgv(airlock::vmm::v1::Sandbox(), {"true"}), (Argv{"true"}));
}

TEST(RunArgv, ALoneDashIsACommandWord) {
  // "-" is not an option (it is stdin to most tools): it replaces.
  EXPECT_EQ(RunArgv(AgentSandbox({"claude"}), {"-"}), (Argv{"-"}));
}

}  // namespace
}  // namespace airlock::cli
