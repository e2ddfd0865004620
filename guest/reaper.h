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

  // Fork runs `child` in a new process (which must exec or _exit) and
  // registers it before any wait can see it. `notify_fd`, when >= 0, gets
  // one byte written when the process exits. Returns the pid or -1.
  pid_t Fork(const std::function<void()>& child, int notify_fd);

  // Wait blocks until `pid` (from Fork) exits and returns its wait status.
  int Wait(pid_t pid);

  // TryWait returns true and the status when `pid` has exited.
  bool TryWait(pid_t pid, int* status);

  // Forget says nobody will wait for `pid` (a detached exec): its status is
  // dropped when it exits.
  void Forget(pid_t pid);

  // SignalGroup sends `sig` to the process group of `pid` (from Fork) while
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
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_REAPER_H_
