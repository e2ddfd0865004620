// A sandbox's lifecycle as a table: which state may follow which. Every
// state change vmmd records goes through it (SandboxManager::Update), so a
// path that would move a sandbox in a way no operation means (RUNNING back
// to CREATING, STOPPED to RUNNING without a boot) fails loudly instead of
// being stored.
//
//   (new)     -> CREATING                        create accepted
//   CREATING  -> STARTING | STOPPED | FAILED     boot / created stopped / disk failed,
//                                                or vmmd died mid-create
//   STARTING  -> RUNNING | STOPPED | FAILED      agent answered / cancelled or
//                                                powered off / boot failed
//   RUNNING   -> STOPPING | STOPPED | FAILED     stop / powered off / VM died
//   STOPPING  -> STOPPED | FAILED | STARTING     stopped / the VM died / start after a
//                                                stop whose last write failed
//   STOPPED   -> STARTING                        start
//   FAILED    -> STARTING                        start retries
// and every state may stay as it is (progress, a new pid, a deadline).
#ifndef AIRLOCK_VMMD_SANDBOX_STATES_H_
#define AIRLOCK_VMMD_SANDBOX_STATES_H_

#include <string>

#include "absl/status/status.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::vmmd {

// MayFollow says whether `to` may be recorded after `from`
// (SANDBOX_STATE_UNSPECIFIED: a sandbox not recorded yet).
bool MayFollow(airlock::vmm::v1::SandboxState from, airlock::vmm::v1::SandboxState to);

// CheckTransition is OK when MayFollow, else INTERNAL naming the sandbox
// and both states (it is vmmd's bug, never the caller's).
absl::Status CheckTransition(const std::string& name, airlock::vmm::v1::SandboxState from,
                             airlock::vmm::v1::SandboxState to);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SANDBOX_STATES_H_
