#include "vmmd/sandbox_states.h"

#include <set>
#include <utility>

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

namespace vmm = airlock::vmm::v1;

TEST(SandboxStatesTest, TheTableIsExactlyTheLifecycle) {
  const std::set<std::pair<vmm::SandboxState, vmm::SandboxState>> allowed = {
      {vmm::SANDBOX_STATE_UNSPECIFIED, vmm::CREATING},
      {vmm::CREATING, vmm::STARTING}, {vmm::CREATING, vmm::STOPPED},
      {vmm::CREATING, vmm::FAILED},   {vmm::STARTING, vmm::RUNNING},
      {vmm::STARTING, vmm::STOPPED},  {vmm::STARTING, vmm::FAILED},
      {vmm::RUNNING, vmm::STOPPING},  {vmm::RUNNING, vmm::STOPPED},
      {vmm::RUNNING, vmm::FAILED},    {vmm::STOPPING, vmm::STOPPED},
      {vmm::STOPPING, vmm::FAILED},   {vmm::STOPPING, vmm::STARTING},
      {vmm::STOPPED, vmm::STARTING},
      {vmm::FAILED, vmm::STARTING},
  };
  for (int f = vmm::SandboxState_MIN; f <= vmm::SandboxState_MAX; ++f) {
    for (int t = vmm::SandboxState_MIN; t <= vmm::SandboxState_MAX; ++t) {
      auto from = static_cast<vmm::SandboxState>(f);
      auto to = static_cast<vmm::SandboxState>(t);
      bool want = allowed.count({from, to}) > 0 ||
                  (from == to && to != vmm::SANDBOX_STATE_UNSPECIFIED);
      EXPECT_EQ(MayFollow(from, to), want)
          << vmm::SandboxState_Name(from) << " -> " << vmm::SandboxState_Name(to);
    }
  }
}

TEST(SandboxStatesTest, ARefusedTransitionIsVmmdsBugAndNamesBothStates) {
  absl::Status s = CheckTransition("web", vmm::RUNNING, vmm::CREATING);
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_EQ(s.message(), "sandbox web cannot go from RUNNING to CREATING (a vmmd bug)");
  EXPECT_TRUE(CheckTransition("web", vmm::STOPPED, vmm::STARTING).ok());
  // A boot that never happened cannot be skipped.
  EXPECT_FALSE(CheckTransition("web", vmm::STOPPED, vmm::RUNNING).ok());
  EXPECT_FALSE(CheckTransition("web", vmm::FAILED, vmm::RUNNING).ok());
}

}  // namespace
}  // namespace airlock::vmmd
