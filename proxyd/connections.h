// What keeps proxyd's guest connections accountable: how many may be open
// (per sandbox and in all, a slot taken before any work is done for a
// connection), the threads that serve them (every one joined, none
// detached), and the sockets they block on (all shut down at once when an
// attachment stops, so its threads end promptly).
#ifndef AIRLOCK_PROXYD_CONNECTIONS_H_
#define AIRLOCK_PROXYD_CONNECTIONS_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

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

// HandlerThreads runs each connection's handler on a thread of its own:
// a worker that finished one handler waits a while for the next (a thread
// start costs more than a small request), and JoinAll ends and joins them
// all. Nothing is detached.
class HandlerThreads {
 public:
  // Workers idle longer than `idle` end.
  explicit HandlerThreads(std::chrono::milliseconds idle = std::chrono::seconds(10))
      : idle_(idle) {}
  ~HandlerThreads() { JoinAll(); }
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;

  // Spawn runs `fn` on an idle worker or a new one; false when no thread
  // can be started (or JoinAll has begun).
  bool Spawn(std::function<void()> fn);
  // JoinAll waits for every handler started so far, then for every worker
  // to end; Spawn refuses from then on.
  void JoinAll();
  // Handlers running now.
  size_t running() const;
  // Worker threads alive now (running or idle).
  size_t threads() const;

 private:
  void Work(std::function<void()> first);

  const std::chrono::milliseconds idle_;
  mutable std::mutex mu_;
  // Idle workers wait on `work_` for a handler (or the stop); JoinAll waits
  // on `drained_` for the last running handler. Two, so that a handler
  // ending wakes no idle worker: on a host where a wake-up is a context
  // switch through the hypervisor, waking every idle worker per request
  // was most of what a request cost.
  std::condition_variable work_;
  std::condition_variable drained_;
  std::deque<std::function<void()>> queue_;
  size_t idle_workers_ = 0;
  size_t running_ = 0;
  bool stopping_ = false;
  std::list<std::thread> workers_;
  // Workers that ended on their own, joined by the next Spawn or JoinAll.
  std::vector<std::thread::id> ended_;
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
