#include "proxyd/fibers.h"

#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

struct Pair {
  int fd[2];
  Pair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fd), 0); }
  ~Pair() {
    close(fd[0]);
    close(fd[1]);
  }
};

// WaitUntil polls `done` for up to 10 s.
template <typename F>
bool WaitUntil(F done) {
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(1));
  }
  return true;
}

// Gate holds helper jobs until opened. It must outlive the loops whose
// jobs wait on it; OpenAtEnd's object, made after the loops, opens it
// before their Stop, so a failed check leaves no job waiting forever.
class Gate {
 public:
  struct Opener {
    Gate* gate;
    ~Opener() { gate->Open(); }
  };
  Opener OpenAtEnd() { return Opener{this}; }
  void Wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return open_; });
  }
  void Open() {
    std::lock_guard<std::mutex> lock(mu_);
    open_ = true;
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

TEST(FibersTest, EachFiberWakesForItsOwnDescriptor) {
  constexpr int kFibers = 200;
  // Before the loops: they stop (waiting for every fiber) first.
  std::vector<std::unique_ptr<Pair>> pairs;
  for (int i = 0; i < kFibers; ++i) pairs.push_back(std::make_unique<Pair>());
  FiberLoops loops(2, 1);
  std::atomic<int> woke{0};
  std::atomic<int> waiting{0};
  std::vector<char> got(kFibers, 0);
  // On a failed check, every fiber is woken so the loops can stop.
  struct WakeAll {
    std::vector<std::unique_ptr<Pair>>* pairs;
    ~WakeAll() {
      for (auto& p : *pairs) (void)!write(p->fd[1], "!", 1);
    }
  };
  for (int i = 0; i < kFibers; ++i) {
    ASSERT_TRUE(loops.Spawn([&, i] {
      int fd = pairs[i]->fd[0];
      char c = 0;
      bool counted = false;
      while (true) {
        ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT);
        if (n == 1) break;
        if (!counted) waiting++;
        counted = true;
        pollfd p = {fd, POLLIN, 0};
        Poll(&p, 1, -1);
      }
      got[i] = c;
      woke++;
    }));
  }
  WakeAll wake_all{&pairs};
  // All of them found nothing and wait.
  ASSERT_TRUE(WaitUntil([&] { return waiting.load() == kFibers; }));
  // Every other one first: the rest stay parked.
  for (int i = 0; i < kFibers; i += 2) ASSERT_EQ(write(pairs[i]->fd[1], "a", 1), 1);
  ASSERT_TRUE(WaitUntil([&] { return woke.load() == kFibers / 2; }));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(woke.load(), kFibers / 2);
  for (int i = 1; i < kFibers; i += 2) ASSERT_EQ(write(pairs[i]->fd[1], "b", 1), 1);
  loops.Stop();
  EXPECT_EQ(woke.load(), kFibers);
  for (int i = 0; i < kFibers; ++i) EXPECT_EQ(got[i], i % 2 == 0 ? 'a' : 'b') << i;
}

TEST(FibersTest, AWaitEndsAtItsTimeLimitWithoutHoldingUpTheLoop) {
  FiberLoops loops(1, 1);
  Pair silent;
  std::atomic<int> result{-1};
  std::atomic<int64_t> waited_ms{0};
  std::atomic<int> ticks{0};
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd p = {silent.fd[0], POLLIN, 0};
    auto start = Clock::now();
    result = Poll(&p, 1, 300);
    waited_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  }));
  // Another fiber on the same (only) loop runs meanwhile.
  ASSERT_TRUE(loops.Spawn([&] {
    for (int i = 0; i < 10; ++i) {
      SleepFor(milliseconds(5));
      ticks++;
    }
  }));
  ASSERT_TRUE(WaitUntil([&] { return ticks.load() == 10; }));
  EXPECT_EQ(result.load(), -1);  // still waiting
  loops.Stop();
  EXPECT_EQ(result.load(), 0);
  EXPECT_GE(waited_ms.load(), 300);
}

TEST(FibersTest, AWaitOnTwoDescriptorsReportsTheOneReady) {
  FiberLoops loops(1, 1);
  Pair a, b;
  std::atomic<int> n{-1};
  short revents[2] = {-1, -1};
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd p[2] = {{a.fd[0], POLLIN, 0}, {b.fd[0], POLLIN, 0}};
    n = Poll(p, 2, 10000);
    revents[0] = p[0].revents;
    revents[1] = p[1].revents;
  }));
  ASSERT_TRUE(WaitUntil([&] { return loops.fibers() == 1; }));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(write(b.fd[1], "x", 1), 1);
  loops.Stop();
  EXPECT_EQ(n.load(), 1);
  EXPECT_EQ(revents[0], 0);
  EXPECT_EQ(revents[1], POLLIN);
}

TEST(FibersTest, AFullSocketParksItsWriterAndAnEndWakesItsReader) {
  // Both ends on fibers of one loop: the writer fills the socket and must
  // park for the reader to run; the reader parks until data or the end.
  FiberLoops loops(1, 1);
  Pair p;
  constexpr size_t kTotal = 4 * 1024 * 1024;
  std::atomic<size_t> written{0}, read_bytes{0};
  std::atomic<bool> reader_saw_end{false};
  std::atomic<int> writer_parks{0};
  ASSERT_TRUE(loops.Spawn([&] {
    std::vector<char> buf(65536, 'z');
    size_t total = 0;
    while (total < kTotal) {
      size_t want = std::min(buf.size(), kTotal - total);
      ssize_t n = send(p.fd[0], buf.data(), want, MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        total += n;
        continue;
      }
      ASSERT_TRUE(errno == EAGAIN || errno == EWOULDBLOCK) << strerror(errno);
      writer_parks++;
      pollfd w = {p.fd[0], POLLOUT, 0};
      ASSERT_EQ(Poll(&w, 1, 10000), 1);
    }
    written = total;
    shutdown(p.fd[0], SHUT_WR);
  }));
  ASSERT_TRUE(loops.Spawn([&] {
    std::vector<char> buf(65536);
    size_t total = 0;
    while (true) {
      ssize_t n = recv(p.fd[1], buf.data(), buf.size(), MSG_DONTWAIT);
      if (n == 0) break;
      if (n > 0) {
        total += n;
        continue;
      }
      pollfd r = {p.fd[1], POLLIN, 0};
      ASSERT_EQ(Poll(&r, 1, 10000), 1);
    }
    read_bytes = total;
    reader_saw_end = true;
  }));
  loops.Stop();
  EXPECT_EQ(written.load(), kTotal);
  EXPECT_EQ(read_bytes.load(), kTotal);
  EXPECT_TRUE(reader_saw_end.load());
  EXPECT_GT(writer_parks.load(), 0);  // 4 MiB does not fit in the socket
}

TEST(FibersTest, AReaderAndAWriterWaitOnOneDescriptorEachForItsOwnEvent) {
  // The egress tunnel's shape: one fiber reads a descriptor while another
  // of the same loop waits to write it.
  FiberLoops loops(1, 1);
  Pair p;
  // The writer's side full first, so its fiber must wait.
  std::vector<char> fill(65536, 'f');
  while (send(p.fd[0], fill.data(), fill.size(), MSG_DONTWAIT) > 0) {
  }
  std::atomic<int> reader_result{-1}, writer_result{-1};
  std::atomic<short> reader_revents{0}, writer_revents{0};
  std::atomic<int> parked{0};
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd r = {p.fd[0], POLLIN, 0};
    parked++;
    reader_result = Poll(&r, 1, 10000);
    reader_revents = r.revents;
  }));
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd w = {p.fd[0], POLLOUT, 0};
    parked++;
    writer_result = Poll(&w, 1, 10000);
    writer_revents = w.revents;
  }));
  ASSERT_TRUE(WaitUntil([&] { return parked.load() == 2; }));
  std::this_thread::sleep_for(milliseconds(20));
  // Data for the reader: only the reader wakes.
  ASSERT_EQ(write(p.fd[1], "x", 1), 1);
  ASSERT_TRUE(WaitUntil([&] { return reader_result.load() != -1; }));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(reader_result.load(), 1);
  EXPECT_EQ(reader_revents.load(), POLLIN);
  EXPECT_EQ(writer_result.load(), -1);  // still waiting: its socket is full
  // Room for the writer (the peer reads): now it wakes.
  std::vector<char> sink(1 << 20);
  while (recv(p.fd[1], sink.data(), sink.size(), MSG_DONTWAIT) > 0) {
  }
  loops.Stop();
  EXPECT_EQ(writer_result.load(), 1);
  EXPECT_EQ(writer_revents.load(), POLLOUT);
}

TEST(FibersTest, EveryFiberWaitingToReadADescriptorWakes) {
  // A shutdown's wake-up: one descriptor several fibers watch.
  FiberLoops loops(1, 1);
  Pair p;
  constexpr int kFibers = 3;
  std::atomic<int> parked{0}, woke{0};
  for (int i = 0; i < kFibers; ++i) {
    ASSERT_TRUE(loops.Spawn([&] {
      pollfd r = {p.fd[0], POLLIN, 0};
      parked++;
      if (Poll(&r, 1, 10000) == 1 && r.revents == POLLIN) woke++;
    }));
  }
  ASSERT_TRUE(WaitUntil([&] { return parked.load() == kFibers; }));
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_EQ(woke.load(), 0);
  ASSERT_EQ(write(p.fd[1], "x", 1), 1);
  loops.Stop();
  EXPECT_EQ(woke.load(), kFibers);
}

TEST(FibersTest, OneWaiterTimingOutLeavesTheOtherWatched) {
  FiberLoops loops(1, 1);
  Pair p;
  std::atomic<int> short_result{-1}, long_result{-1};
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd r = {p.fd[0], POLLIN, 0};
    short_result = Poll(&r, 1, 30);
  }));
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd r = {p.fd[0], POLLIN, 0};
    long_result = Poll(&r, 1, 10000);
  }));
  ASSERT_TRUE(WaitUntil([&] { return short_result.load() != -1; }));
  EXPECT_EQ(short_result.load(), 0);
  EXPECT_EQ(long_result.load(), -1);
  ASSERT_EQ(write(p.fd[1], "x", 1), 1);
  loops.Stop();
  EXPECT_EQ(long_result.load(), 1);
}

TEST(FibersTest, YieldLetsAFiberWhoseDescriptorBecameReadyRunFirst) {
  FiberLoops loops(1, 1);
  Pair p;
  std::atomic<bool> reader_parked{false}, reader_ran{false};
  std::atomic<int> seen_by_busy{-1};
  ASSERT_TRUE(loops.Spawn([&] {
    char c;
    reader_parked = true;
    while (recv(p.fd[0], &c, 1, MSG_DONTWAIT) != 1) {
      pollfd r = {p.fd[0], POLLIN, 0};
      Poll(&r, 1, 10000);
    }
    reader_ran = true;
  }));
  ASSERT_TRUE(WaitUntil([&] { return reader_parked.load(); }));
  std::this_thread::sleep_for(milliseconds(20));
  // A fiber that never waits: without Yield the reader would run only
  // after it ends.
  ASSERT_TRUE(loops.Spawn([&] {
    ASSERT_EQ(write(p.fd[1], "x", 1), 1);
    Yield();
    seen_by_busy = reader_ran.load() ? 1 : 0;
  }));
  loops.Stop();
  EXPECT_EQ(seen_by_busy.load(), 1);
  Yield();  // off a fiber: nothing
}

TEST(FibersTest, AWakerEndsAWaitFromAFiberOfItsLoopOnly) {
  FiberLoops loops(1, 1);
  Pair silent;
  Waker waker;
  EXPECT_FALSE(waker.Wake());  // nothing waited yet
  std::atomic<bool> parked{false}, returned{false};
  ASSERT_TRUE(loops.Spawn([&] {
    parked = true;
    waker.Wait(silent.fd[0], 10000);
    returned = true;
  }));
  ASSERT_TRUE(WaitUntil([&] { return parked.load(); }));
  std::this_thread::sleep_for(milliseconds(20));
  // Another thread cannot: its caller would use the descriptor.
  EXPECT_FALSE(waker.Wake());
  std::this_thread::sleep_for(milliseconds(20));
  EXPECT_FALSE(returned.load());
  std::atomic<int> woke{-1};
  ASSERT_TRUE(loops.Spawn([&] { woke = waker.Wake() ? 1 : 0; }));
  ASSERT_TRUE(WaitUntil([&] { return returned.load(); }));
  EXPECT_EQ(woke.load(), 1);
  loops.Stop();
}

TEST(FibersTest, AWakeWhileNothingWaitsEndsTheNextWaitAtOnce) {
  FiberLoops loops(1, 1);
  Pair silent;
  Waker waker;
  std::atomic<int64_t> second_wait_ms{-1};
  ASSERT_TRUE(loops.Spawn([&] {
    waker.Wait(silent.fd[0], 1);  // the waker is this loop's from here
    EXPECT_TRUE(waker.Wake());    // nothing waits now
    auto start = Clock::now();
    waker.Wait(silent.fd[0], 10000);
    second_wait_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  }));
  loops.Stop();
  EXPECT_GE(second_wait_ms.load(), 0);
  EXPECT_LT(second_wait_ms.load(), 1000);
}

TEST(FibersTest, AWakersWaitStillEndsWhenItsDescriptorIsReady) {
  FiberLoops loops(1, 1);
  Pair p;
  Waker waker;
  std::atomic<bool> returned{false};
  ASSERT_TRUE(loops.Spawn([&] {
    waker.Wait(p.fd[0], 10000);
    returned = true;
  }));
  std::this_thread::sleep_for(milliseconds(20));
  ASSERT_EQ(write(p.fd[1], "x", 1), 1);
  ASSERT_TRUE(WaitUntil([&] { return returned.load(); }));
  loops.Stop();
}

TEST(FibersTest, ABlockingShareBoundsItsOwnJobsAndNoOneElses) {
  // One sandbox's slow lookups (share A) hold at most its limit of the
  // helpers; another sandbox's (share B) run meanwhile.
  Gate gate;
  FiberLoops loops(1, 1);
  auto open_at_end = gate.OpenAtEnd();  // a failed check still lets the loops stop
  BlockingShare a(2), b(2);
  std::atomic<int> now_a{0}, most_a{0}, done_a{0};
  std::atomic<bool> b_done{false};
  constexpr int kJobs = 6;
  for (int i = 0; i < kJobs; ++i) {
    ASSERT_TRUE(loops.SpawnOn(0, [&] {
      RunBlocking([&] {
        int n = ++now_a;
        int m = most_a.load();
        while (n > m && !most_a.compare_exchange_weak(m, n)) {
        }
        gate.Wait();
        --now_a;
      });
      done_a++;
    }, &a));
  }
  ASSERT_TRUE(WaitUntil([&] { return now_a.load() == 2; }));
  std::this_thread::sleep_for(milliseconds(50));
  EXPECT_EQ(now_a.load(), 2);  // the other four wait for a slot
  ASSERT_TRUE(loops.SpawnOn(0, [&] {
    RunBlocking([] {});
    b_done = true;
  }, &b));
  EXPECT_TRUE(WaitUntil([&] { return b_done.load(); }));
  EXPECT_EQ(done_a.load(), 0);
  gate.Open();
  ASSERT_TRUE(WaitUntil([&] { return done_a.load() == kJobs; }));
  loops.Stop();
  EXPECT_EQ(most_a.load(), 2);
}

TEST(FibersTest, RunOnOwnThreadDoesNotWaitBehindBusyHelpers) {
  // Every helper busy (other sandboxes' slow lookups) and one more job
  // queued: a tunnel's hello still runs at once.
  Gate gate;
  FiberLoops loops(1, 1);
  auto open_at_end = gate.OpenAtEnd();  // a failed check still lets the loops stop
  std::atomic<int> running{0};
  constexpr int kHelpers = 64;  // FiberLoops' most
  for (int i = 0; i < kHelpers + 1; ++i) {
    ASSERT_TRUE(loops.SpawnOn(0, [&] {
      RunBlocking([&] {
        running++;
        gate.Wait();
      });
    }));
  }
  ASSERT_TRUE(WaitUntil([&] { return running.load() == kHelpers; }));
  std::atomic<bool> own_done{false};
  ASSERT_TRUE(loops.SpawnOn(0, [&] {
    RunOnOwnThread([&] { own_done = true; });
  }));
  EXPECT_TRUE(WaitUntil([&] { return own_done.load(); }));
  EXPECT_EQ(running.load(), kHelpers);  // the queued job still waits
  gate.Open();
  loops.Stop();
  EXPECT_EQ(running.load(), kHelpers + 1);
}

TEST(FibersTest, BlockingWorkRunsAsideWhileTheLoopGoesOn) {
  FiberLoops loops(1, 1);
  std::atomic<bool> blocking_done{false};
  std::atomic<bool> other_ran_meanwhile{false};
  std::thread::id helper_thread, fiber_thread;
  ASSERT_TRUE(loops.Spawn([&] {
    fiber_thread = std::this_thread::get_id();
    RunBlocking([&] {
      helper_thread = std::this_thread::get_id();
      std::this_thread::sleep_for(milliseconds(300));
    });
    blocking_done = true;
  }));
  ASSERT_TRUE(loops.Spawn([&] {
    SleepFor(milliseconds(20));
    other_ran_meanwhile = !blocking_done.load();
  }));
  loops.Stop();
  EXPECT_TRUE(blocking_done.load());
  EXPECT_TRUE(other_ran_meanwhile.load());
  EXPECT_NE(helper_thread, fiber_thread);
}

TEST(FibersTest, ADescriptorEpollWillNotWatchIsAskedOfPollInstead) {
  // epoll refuses /dev/null (EPERM); poll(2) says it is ready at once.
  FiberLoops loops(1, 1);
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(devnull, 0);
  Pair silent;
  std::atomic<int> ready{-1}, timed_out{-1};
  std::atomic<int64_t> waited_ms{-1};
  ASSERT_TRUE(loops.Spawn([&] {
    pollfd p = {devnull, POLLIN, 0};
    ready = Poll(&p, 1, 10000);
    // A descriptor with no events asked is left alone, as poll(2) does
    // (it is not armed), and a silent socket's limit holds.
    pollfd both[2] = {{silent.fd[0], POLLIN, 0}, {devnull, 0, 0}};
    auto start = Clock::now();
    timed_out = Poll(both, 2, 100);
    waited_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - start).count();
  }));
  loops.Stop();
  close(devnull);
  EXPECT_EQ(ready.load(), 1);
  EXPECT_EQ(timed_out.load(), 0);
  EXPECT_GE(waited_ms.load(), 100);
}

TEST(FibersTest, OffAFiberPollIsPollAndRunBlockingRunsInPlace) {
  EXPECT_FALSE(OnFiber());
  Pair p;
  pollfd r = {p.fd[0], POLLIN, 0};
  EXPECT_EQ(Poll(&r, 1, 10), 0);
  ASSERT_EQ(write(p.fd[1], "x", 1), 1);
  EXPECT_EQ(Poll(&r, 1, 1000), 1);
  std::thread::id ran_on;
  RunBlocking([&] { ran_on = std::this_thread::get_id(); });
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST(FibersTest, StacksAreReusedAndDeepFramesFit) {
  FiberLoops loops(2, 1);
  std::atomic<int> done{0};
  for (int i = 0; i < 2000; ++i) {
    ASSERT_TRUE(loops.Spawn([&] {
      // As much as a handler keeps on its stack (two copy buffers).
      volatile char big[2 * 65536];
      big[0] = 1;
      big[sizeof(big) - 1] = 2;
      EXPECT_TRUE(OnFiber());
      done++;
    }));
  }
  loops.Stop();
  EXPECT_EQ(done.load(), 2000);
  EXPECT_FALSE(loops.Spawn([] {}));
}

}  // namespace
}  // namespace airlock::proxyd
