// Connection handlers as fibers: a few loop threads, each running many
// handlers, each handler a fiber (a stack of its own, Boost.Context) that
// blocks only itself. A handler written as straight-line blocking code
// (read the head, decide, write upstream, read the answer) runs as it is:
// its waits go through Poll, which on a fiber parks the fiber and lets the
// loop run the others until a descriptor is ready or the time is up
// (epoll), and on a plain thread is poll(2). What blocks a thread inside a
// library (getaddrinfo, a gRPC call) goes through RunBlocking, which runs
// it on a helper thread while the fiber waits.
//
// Why: on a host where a thread switch is a trip through the hypervisor,
// a thread per connection paid several switches per request (the mux
// waking the handler, the handler sleeping on the upstream and waking
// again); a loop that serves many connections sleeps less often, and each
// of its wake-ups serves whatever is ready.
//
// Where it stops: a fiber stays on the loop it started on, and nothing
// preempts it, so a fiber that computes for long (a key made for a host
// seen the first time) holds up the other fibers of its loop meanwhile.
// Descriptors a fiber waits on must be non-blocking: a read that blocks
// blocks the whole loop.
#ifndef AIRLOCK_PROXYD_FIBERS_H_
#define AIRLOCK_PROXYD_FIBERS_H_

#include <poll.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace airlock::proxyd {

// A fiber's stack: the handlers keep 64 KiB copy buffers on theirs, and
// OpenSSL needs a few KiB more. Pages are committed as they are touched.
inline constexpr size_t kFiberStackBytes = 256 * 1024;

class BlockingShare;

class FiberLoops {
 public:
  // `loops` threads run the fibers; `helpers` threads (more as work
  // waits, up to 64) run RunBlocking's work.
  explicit FiberLoops(size_t loops = DefaultLoops(), size_t helpers = 8);
  // Stops (see Stop).
  ~FiberLoops();
  FiberLoops(const FiberLoops&) = delete;
  FiberLoops& operator=(const FiberLoops&) = delete;

  // Spawn runs `fn` as a fiber on one of the loops, in turn. False, with
  // `fn` not run, once Stop has begun or when no stack can be had.
  bool Spawn(std::function<void()> fn);
  // PickLoop names a loop, in turn; SpawnOn runs `fn` on that one (as
  // Spawn): fibers that hand each other bytes (one sandbox's mux and its
  // connections' handlers) then share a thread.
  size_t PickLoop();
  // With `share`, the fiber's RunBlocking work counts against it (see
  // BlockingShare); every fiber of a share must run on the same loop.
  bool SpawnOn(size_t loop, std::function<void()> fn, BlockingShare* share = nullptr);
  // Stop refuses new fibers, waits for every fiber to end, then ends the
  // loops and the helpers. Idempotent.
  void Stop();

  // Fibers alive now.
  size_t fibers() const;
  // One loop per CPU, at least 1 and at most 4.
  static size_t DefaultLoops();

  class Loop;
  struct Fiber;
  class Helpers;
  class Stacks;

 private:
  void Ended();

  const size_t loop_count_;
  std::unique_ptr<Stacks> stacks_;
  std::unique_ptr<Helpers> helpers_;
  std::vector<std::unique_ptr<Loop>> loops_;
  std::atomic<size_t> next_{0};

  std::mutex stop_mu_;  // one Stop at a time
  mutable std::mutex mu_;
  std::condition_variable ended_;
  size_t alive_ = 0;
  bool stopping_ = false;
  bool stopped_ = false;
};

// BlockingShare bounds how many of RunBlocking's helpers the fibers
// started with it (one sandbox's) hold at once: past `limit` jobs in
// progress, its next fiber's job waits for one of them to end, while
// fibers of other shares go on. A sandbox that floods slow name lookups
// then delays its own, not other sandboxes' lookups and credential calls.
// All of a share's fibers run on one loop (its state is that loop's), and
// the share outlives them.
inline constexpr size_t kBlockingPerShare = 8;

class BlockingShare {
 public:
  explicit BlockingShare(size_t limit = kBlockingPerShare) : limit_(limit < 1 ? 1 : limit) {}
  BlockingShare(const BlockingShare&) = delete;
  BlockingShare& operator=(const BlockingShare&) = delete;

 private:
  friend class FiberLoops;
  const size_t limit_;
  // The loop's thread only: jobs on a helper now, fibers waiting for one.
  size_t in_use_ = 0;
  std::deque<FiberLoops::Fiber*> waiting_;
};

// Poll is poll(2) for the caller: on a fiber it parks the fiber until one
// of `fds` is ready or `timeout_ms` (-1: no limit) has passed, and returns
// how many have revents (0 at the time limit). A descriptor may be
// reported ready when it is not (the caller's read then finds nothing and
// waits again), never the other way round. Any number of fibers may wait
// on a descriptor at once (one reading, another writing); each lists it
// once in its `fds`.
int Poll(pollfd* fds, nfds_t n, int timeout_ms);

// Yield lets the loop's other fibers run, those whose descriptors became
// ready meanwhile included, before the caller goes on: a fiber that finds
// work waiting each time it looks (a busy reader) would otherwise hold its
// loop. Nothing off a fiber.
void Yield();

// SleepFor waits `d` without holding up a loop.
void SleepFor(std::chrono::milliseconds d);

// RunBlocking runs `fn`, which may block its thread for long: on a fiber,
// on a helper thread while the fiber waits for it; on a plain thread,
// right there.
void RunBlocking(const std::function<void()>& fn);

// Waker lets a fiber of a loop end another's wait without a descriptor:
// the fiber that waits through Wait is readied by a Wake from any fiber of
// the same loop, at no system call (the sandbox's tunnel reader waking
// its mux, once per guest message). From anywhere else Wake says no, and
// the caller wakes the waiter through the descriptor it waits on.
//
// Where it stops: one fiber waits through a Waker at a time; another's
// Wait meanwhile is a plain wait for its descriptor, which Wake does not
// end. A Wake while nothing waits makes the next Wait return at once.
class Waker {
 public:
  // Wait is Poll for `fd` readable, up to `timeout_ms`, ending early at a
  // Wake (also one made since the last Wait).
  void Wait(int fd, int timeout_ms);
  // Poll is Poll (above) for `fds` (none: only the Wake or the time
  // limit), ending early at a Wake as Wait does: what it returns counts
  // the descriptors ready (0 after a Wake).
  int Poll(pollfd* fds, nfds_t n, int timeout_ms);
  // Wake ends the wait from a fiber of the waiter's loop; false (nothing
  // done) from elsewhere, or before anything waited.
  bool Wake();

 private:
  std::atomic<FiberLoops::Loop*> loop_{nullptr};  // the waiter's, once set
  // The waiter's loop's thread only.
  FiberLoops::Fiber* waiting_ = nullptr;
  bool woken_ = false;
};

// RunOnOwnThread is RunBlocking on a thread started for `fn` alone: for
// work whose length someone else decides (a guest's answer to the egress
// port's hello, up to its time limit) and that must not wait behind the
// shared helpers' queue.
void RunOnOwnThread(const std::function<void()>& fn);

// OnFiber says whether the caller runs on a fiber.
bool OnFiber();

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_FIBERS_H_
