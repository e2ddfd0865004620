// What keeps proxyd's guest connections accountable: how many may be open
// (per sandbox and in all, a slot taken before any work is done for a
// connection), the handlers that serve them (every one waited for, none
// detached), and the sockets they wait on (all shut down at once when an
// attachment stops, so its handlers end promptly).
#ifndef AIRLOCK_PROXYD_CONNECTIONS_H_
#define AIRLOCK_PROXYD_CONNECTIONS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <vector>

#include "proxyd/fibers.h"

namespace airlock::proxyd {

// Open connections one sandbox may hold, and proxyd in all: one flooding
// sandbox reaches its own cap long before proxyd's, so the others keep
// room (16 sandboxes would have to flood at once to fill proxyd).
inline constexpr uint64_t kMaxConnectionsPerSandbox = 256;
inline constexpr uint64_t kMaxConnections = 4096;

class ConnectionCaps {
 public:
  explicit ConnectionCaps(uint64_t total = kMaxConnections) : total_(total) {}

  // Reserve takes a slot against `sandbox_open` (one sandbox's counter)
  // and the total: false, with nothing taken, when either is at its cap.
  // Safe under any burst: the counters move before the check.
  bool Reserve(std::atomic<uint64_t>* sandbox_open,
               uint64_t per_sandbox = kMaxConnectionsPerSandbox);
  // Release gives a reserved slot back.
  void Release(std::atomic<uint64_t>* sandbox_open);

  uint64_t open() const { return open_.load(); }

 private:
  const uint64_t total_;
  std::atomic<uint64_t> open_{0};
};

// Handlers runs one attachment's connection handlers as fibers on
// proxyd's loops (fibers.h) and keeps count of them, so that JoinAll can
// wait for every one. Nothing is detached. Their work on helper threads
// is bounded together (a BlockingShare).
class Handlers {
 public:
  // On loop `loop` of `loops` (FiberLoops::PickLoop).
  Handlers(std::shared_ptr<FiberLoops> loops, size_t loop)
      : loops_(std::move(loops)), loop_(loop) {}
  ~Handlers() { JoinAll(); }
  Handlers(const Handlers&) = delete;
  Handlers& operator=(const Handlers&) = delete;

  // Spawn runs `fn` as a fiber; false, with `fn` not run, when it cannot
  // (or JoinAll has begun).
  bool Spawn(std::function<void()> fn);
  // JoinAll waits for every handler started so far; Spawn refuses from
  // then on.
  void JoinAll();
  // Handlers running now.
  size_t running() const;

 private:
  std::shared_ptr<FiberLoops> loops_;
  const size_t loop_;
  // The handlers' RunBlocking work together (name lookups, secretsd
  // calls): one sandbox cannot hold every helper.
  BlockingShare share_;
  mutable std::mutex mu_;
  std::condition_variable drained_;
  size_t running_ = 0;
  bool stopping_ = false;
};

// SocketSet tracks the sockets handlers may block on.
class SocketSet {
 public:
  // Add tracks `fd`; once ShutdownAll ran, `fd` is shut down at once.
  void Add(int fd);
  // Remove stops tracking `fd`: call it before closing `fd`, so a later
  // ShutdownAll never touches a descriptor number reused elsewhere.
  void Remove(int fd);
  // ShutdownAll shuts down every tracked socket both ways (blocked reads
  // and writes on them end) and every socket added from now on.
  void ShutdownAll();

 private:
  std::mutex mu_;
  std::set<int> fds_;
  bool shut_ = false;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_CONNECTIONS_H_
