// What keeps proxyd's guest connections accountable: how many may be open
// (per sandbox and in all, a slot taken before any work is done for a
// connection), the threads that serve them (every one joined, none
// detached), and the sockets they block on (all shut down at once when an
// attachment stops, so its threads end promptly).
#ifndef AIRLOCK_PROXYD_CONNECTIONS_H_
#define AIRLOCK_PROXYD_CONNECTIONS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

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

// HandlerThreads runs each connection's handler on a thread of its own and
// joins them all: finished ones as new ones start, the rest in JoinAll.
class HandlerThreads {
 public:
  HandlerThreads() = default;
  ~HandlerThreads() { JoinAll(); }
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;

  // Spawn starts `fn`; false when no thread can be started.
  bool Spawn(std::function<void()> fn);
  // JoinAll waits for every handler started so far.
  void JoinAll();
  // Running handlers (started, not yet joined or finished).
  size_t running() const;

 private:
  struct Entry {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> done;
  };
  mutable std::mutex mu_;
  std::list<Entry> threads_;
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
