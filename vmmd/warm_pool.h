// The warm pool: VMs restored from a snapshot ahead of need, greeted and
// idle, each waiting to become the next new sandbox of the snapshot's
// shape. Claiming one skips what a restore costs a new sandbox (copying
// the snapshot's memory, starting QEMU, loading the device state, and,
// under TCG, translating again the guest code its agent's first calls
// run); the sandbox then gets its own identity exactly as a restored one
// does (snapshots.h).
//
// A warm VM is nobody's until claimed: its files and jail carry a slot
// name ("_warm-" and 8 hex digits, never a sandbox's), its egress port is
// attached to nothing, and it holds no secret, share, kit or rule. A claim
// renames its files and jail to the sandbox's; the slot name stays in its
// QEMU's command line, which is how vmmd keeps finding that process.
//
// WarmPool is the bookkeeping only (which slots exist, for which snapshot,
// which are ready); SandboxManager starts, claims and ends the VMs
// (sandbox_warm.cc). Not thread-safe: the manager's lock guards it.
//
// Where it stops: the pool holds VMs of one shape, the one whose sandbox
// started from a snapshot last; a sandbox of another shape restores (or
// boots) as before, and moves the pool to its shape.
#ifndef AIRLOCK_VMMD_WARM_POOL_H_
#define AIRLOCK_VMMD_WARM_POOL_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/agent_link.h"

namespace airlock::vmmd {

inline constexpr char kWarmSlotPrefix[] = "_warm-";

struct WarmVm {
  // The snapshot it was restored from.
  std::string key;
  // Its name until claimed (files, sockets, jail, cgroup).
  std::string slot;
  uint32_t jail_uid = 0;
  // Its QEMU once launched; 0 before.
  pid_t pid = 0;
  // The greeted connection to its agent, handed to the sandbox.
  std::shared_ptr<AgentLink> link;

  enum State {
    kStarting,  // being restored and greeted
    kReady,     // idle, waiting for a claim
    kLeaving,   // taken by a claim, or no longer wanted and being ended
  };
  State state = kStarting;
  // Starting, but no longer wanted (the pool moved to another snapshot,
  // or vmmd is stopping): its starter ends it instead of readying it.
  bool retired = false;
};

// A VM stays in the pool, and its jail ids taken, until Drop: whoever took
// it (a claim, or the caller of Want or TakeAll) drops it once the ids are
// the sandbox's on record, or its process is gone.
class WarmPool {
 public:
  // `size`: how many warm VMs to keep; 0 keeps none.
  explicit WarmPool(size_t size) : size_(size) {}

  size_t size() const { return size_; }

  struct Plan {
    // Ready VMs of another snapshot, now leaving: the caller ends them,
    // then drops them. (Ones still starting are retired.)
    std::vector<WarmVm> retire;
    // How many VMs of the snapshot to start.
    size_t start = 0;
  };
  // Want says that a sandbox of snapshot `key` just started from it: the
  // pool moves to that snapshot and is filled up to its size.
  Plan Want(const std::string& key);

  // Retire says which snapshots are gone (`exists` false for their key):
  // their ready VMs leave and are returned (the caller ends, then drops
  // them), their starting ones are retired. A warm VM of a snapshot that
  // is gone would never be claimed and would hold its memory until vmmd
  // stopped.
  std::vector<WarmVm> Retire(const std::function<bool(const std::string& key)>& exists);

  // Reserve adds a VM about to be started.
  void Reserve(WarmVm vm);
  // Launched records a starting VM's process (so that vmmd stopping can
  // end it before its start is done).
  void Launched(const std::string& slot, pid_t pid);
  // Ready records the started VM's agent connection. False when it was
  // retired meanwhile: the caller ends it, then drops it.
  bool Ready(const std::string& slot, std::shared_ptr<AgentLink> link);
  // Drop forgets a slot.
  void Drop(const std::string& slot);

  // Take returns the oldest ready VM of `key`, now leaving.
  std::optional<WarmVm> Take(const std::string& key);
  // TakeAll (vmmd stopping) returns the VMs to kill: the ready ones, now
  // leaving (the caller ends and drops them), and the starting ones with a
  // process, retired (state still kStarting: their starters end and drop
  // them). A VM a claim took is the claim's.
  std::vector<WarmVm> TakeAll();

  // JailUids lists the jail id blocks the pool's VMs hold, whatever their
  // state.
  std::vector<uint32_t> JailUids() const;
  // Count is how many VMs of `key` the pool holds for use (ready, or also
  // starting unless `ready_only`).
  size_t Count(const std::string& key, bool ready_only) const;

 private:
  size_t size_;
  // Oldest first.
  std::vector<WarmVm> vms_;
};

// IsWarmSlot says whether `name` is a warm VM's slot name.
bool IsWarmSlot(const std::string& name);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_WARM_POOL_H_
