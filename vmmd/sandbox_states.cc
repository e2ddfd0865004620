#include "vmmd/sandbox_states.h"

#include "absl/strings/str_cat.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

bool MayFollow(vmm::SandboxState from, vmm::SandboxState to) {
  if (to == vmm::SANDBOX_STATE_UNSPECIFIED) return false;
  if (from == to) return true;
  switch (from) {
    case vmm::SANDBOX_STATE_UNSPECIFIED:
      return to == vmm::CREATING;
    case vmm::CREATING:
      return to == vmm::STARTING || to == vmm::STOPPED || to == vmm::FAILED;
    case vmm::STARTING:
      return to == vmm::RUNNING || to == vmm::STOPPED || to == vmm::FAILED;
    case vmm::RUNNING:
      return to == vmm::STOPPING || to == vmm::STOPPED || to == vmm::FAILED;
    case vmm::STOPPING:
      // STARTING: a stop whose last write failed (disk full) left the
      // record STOPPING with the VM gone; start boots it again.
      return to == vmm::STOPPED || to == vmm::FAILED || to == vmm::STARTING;
    case vmm::STOPPED:
    case vmm::FAILED:
      return to == vmm::STARTING;
    default:
      return false;
  }
}

absl::Status CheckTransition(const std::string& name, vmm::SandboxState from,
                             vmm::SandboxState to) {
  if (MayFollow(from, to)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("sandbox ", name, " cannot go from ",
                                          vmm::SandboxState_Name(from), " to ",
                                          vmm::SandboxState_Name(to), " (a vmmd bug)"));
}

}  // namespace airlock::vmmd
