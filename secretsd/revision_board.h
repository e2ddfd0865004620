// RevisionBoard: how a change to the secrets reaches the proxyds that
// cache what Resolve answered, before the change's caller is told it is
// done ("removing a secret takes effect on the next request").
//
// A watcher (proxyd's stream, WatchRevisions) pings; each answer carries
// the store's revision as of the ping's arrival, and the watcher trusts its
// cache for `lease` after it sent that ping. A change pushes its revision
// to every watcher and, in Changed, waits until each has acknowledged it
// or `lease` has passed: an answer read before the change came from a ping
// sent before it, so by then no watcher trusts an older revision. A
// watcher whose stream ended is waited for the same way, from its last
// answer. Where it stops: the clocks of secretsd and proxyd must advance
// at the same rate over a lease (`margin` covers drift), and a watcher
// trusts only answers to its own pings, never a push, for its lease.
//
// Pure of gRPC: a watcher is a function that queues a push for its
// stream's writer (it must not block).
#ifndef AIRLOCK_SECRETSD_REVISION_BOARD_H_
#define AIRLOCK_SECRETSD_REVISION_BOARD_H_

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace airlock::secretsd {

class RevisionBoard {
 public:
  using Clock = std::chrono::steady_clock;
  using Push = std::function<void(uint64_t revision)>;

  // A new board waits out a lease before its first changes return: a
  // proxyd may still trust what the previous secretsd process answered
  // it (its stream's end not noticed yet).
  RevisionBoard(std::chrono::milliseconds lease, std::chrono::milliseconds margin)
      : lease_(lease), margin_(margin), lingering_until_(Clock::now() + lease + margin) {}

  std::chrono::milliseconds lease() const { return lease_; }

  // Add registers a watcher; `push` is called with each changed revision.
  uint64_t Add(Push push);
  // Answered records that the watcher is about to be given the revision
  // for a ping that has arrived: it must be called before that revision
  // is read, so that a Changed that did not see this answer sees a
  // revision read after its change. The watcher's lease runs from before
  // now.
  void Answered(uint64_t id);
  // Acked records that the watcher applied `revision` (and every one
  // before it).
  void Acked(uint64_t id, uint64_t revision);
  // Remove forgets the watcher (its stream ended); Changed still waits
  // out its lease from its last answer.
  void Remove(uint64_t id);

  // Changed pushes `revision` to every watcher and returns when each has
  // acknowledged it, or its lease from before this call has run out. It
  // returns how many watchers did not acknowledge in time.
  int Changed(uint64_t revision);

  size_t watchers();

 private:
  struct Watcher {
    Push push;
    uint64_t acked = 0;
    bool answered = false;
    // When the last answer was given; the watcher trusts it until
    // before this + lease.
    Clock::time_point last_answer{};
  };
  const std::chrono::milliseconds lease_;
  const std::chrono::milliseconds margin_;
  std::mutex mu_;
  std::condition_variable acked_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Watcher> watchers_;
  // The latest a removed watcher (or one of the previous process) may
  // still trust its cache.
  Clock::time_point lingering_until_;
};

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_REVISION_BOARD_H_
