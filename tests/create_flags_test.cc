// `airlock create`'s repeatable options (-e, -p, --kit, --kit-arg) take one
// value per use, whatever positionals follow: the real CLI against the
// real daemons, stopped by a check that comes after parsing (a shared path
// that does not exist), so no guest boots. `-p 8000 shell DIR` used to read
// "shell" as a second port.
#include <map>

#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

TEST(CreateFlagsTest, RepeatableOptionsLeaveTheAgentAndPathsAlone) {
  testing::ShortTempDir dir;
  std::map<std::string, std::string> env = testing::AirlockEnv(dir.path());
  env["AIRLOCK_LIBEXEC_DIR"] = "";
  const std::string absent = dir.path() + "/absent";
  const std::string refused = "airlock: shared path " + absent + " does not exist\n";
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"-p", "8000"},
                                             {"--publish=8000"},
                                             {"-e", "A=b"},
                                             {"-e", "A=b", "-p", "8000", "-p", "9000:90"}}) {
    std::vector<std::string> args = {"create", "--name", "flags"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.insert(args.end(), {"shell", absent});
    CommandResult r = testing::RunAirlock(env, args);
    EXPECT_EQ(r.exit_code, 2) << flags[0];
    EXPECT_EQ(r.err, refused) << flags[0];
  }
  // --kit takes the kit, not the agent after it.
  CommandResult kit = testing::RunAirlock(
      env, {"create", "--name", "flags", "--kit", absent + ".yaml", "shell", dir.path()});
  EXPECT_EQ(kit.exit_code, 2);
  EXPECT_EQ(kit.err.rfind("airlock: kit " + absent + ".yaml: no such file or directory", 0), 0u)
      << kit.err;
  EXPECT_EQ(testing::RunAirlock(env, {"ls", "-q"}).out, "") << "nothing was created";
  EXPECT_EQ(testing::RunAirlock(env, {"daemon", "stop"}).exit_code, 0);
  EXPECT_TRUE(testing::ProcessesOf(dir.path()).empty());
}

}  // namespace
}  // namespace airlock
