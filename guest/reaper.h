// The agent runs as PID 1, so every orphan in the guest becomes its child.
// ChildReaper is the only caller of wait() once the guest runs (before
// switch root the boot's own Spawn/Await, boot.h, wait for nft): it reaps
// everything and hands the exit status of the processes the agent started
// to whoever waits for them.
#ifndef AIRLOCK_GUEST_REAPER_H_
#define AIRLOCK_GUEST_REAPER_H_

#include <sys/types.h>

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

namespace airlock::guest {

class ChildReaper {
 public:
  // Global returns the process-wide reaper, starting its thread on first use.
  static ChildReaper& Global();

  // Spawn runs `child` in a new process (which must exec or _exit) and
  // registers it before any wait can see it. `notify_fd`, when >= 0, gets
  // one byte written when the process exits. Returns the pid or -1.
  //
  // The new process shares the agent's memory until it execs (clone with
  // CLONE_VM | CLONE_VFORK, as posix_spawn does) and the calling thread
  // waits until then: the agent's page tables are not copied, and its
  // threads take no copy-on-write faults after, which under TCG cost more
  // than the exec itself. So `child` runs on a stack of its own with every
  // signal blocked, and may only make system calls: no allocation, no
  // lock, and no glibc call that acts on the whole process (setuid and the
  // like synchronize the agent's threads: use the raw system calls), and
  // no change to the agent's globals (environ: use execvpe). It must not
  // return.
  pid_t Spawn(const std::function<void()>& child, int notify_fd);

  // Wait blocks until `pid` (from Spawn) exits and returns its wait status.
  int Wait(pid_t pid);

  // TryWait returns true and the status when `pid` has exited.
  bool TryWait(pid_t pid, int* status);

  // Forget says nobody will wait for `pid` (a detached exec): its status is
  // dropped when it exits.
  void Forget(pid_t pid);

  // SignalGroup sends `sig` to the process group of `pid` (from Spawn) while
  // `pid` has not been seen to exit; once it has (waited for or not), it
  // does nothing, so a late signal never reaches what remains of the group
  // or a group that took the number later. Where it stops: between the
  // kernel reaping `pid` and this reaper recording it (microseconds), a
  // signal still goes to the group's remaining members.
  void SignalGroup(pid_t pid, int sig);

 private:
  ChildReaper() = default;
  void Loop();

  struct Entry {
    bool done = false;
    int status = 0;
    int notify_fd = -1;
    bool forgotten = false;
  };
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<pid_t, Entry> children_;
  // Spawns between their clone and registering the pid, and the statuses
  // of unknown pids reaped meanwhile.
  int spawning_ = 0;
  std::map<pid_t, int> early_exits_;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_REAPER_H_
