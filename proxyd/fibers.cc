#include "proxyd/fibers.h"

#include <errno.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>
#include <boost/context/protected_fixedsize_stack.hpp>
#include <algorithm>
#include <deque>
#include <map>
#include <new>
#include <system_error>
#include <unordered_map>

#include "absl/container/inlined_vector.h"

namespace airlock::proxyd {

namespace bctx = boost::context;
using Clock = std::chrono::steady_clock;

// Stacks keeps the stacks of ended fibers for the next ones (a new stack
// is an mmap, an mprotect for its guard page and page faults as it is
// touched; a connection per request would pay them all each time).
class FiberLoops::Stacks {
 public:
  ~Stacks() {
    for (bctx::stack_context& s : free_) alloc_.deallocate(s);
  }
  // Take throws std::bad_alloc when no stack can be mapped.
  bctx::stack_context Take() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        bctx::stack_context s = free_.back();
        free_.pop_back();
        return s;
      }
    }
    return alloc_.allocate();
  }
  void Give(bctx::stack_context s) noexcept {
    std::lock_guard<std::mutex> lock(mu_);
    if (free_.size() < kKept) {
      free_.push_back(s);
      return;
    }
    alloc_.deallocate(s);
  }

 private:
  static constexpr size_t kKept = 256;
  bctx::protected_fixedsize_stack alloc_{kFiberStackBytes};
  std::mutex mu_;
  std::vector<bctx::stack_context> free_;
};

namespace {

// GivenStack hands a fiber the stack Spawn took for it, and gives it back
// when the fiber ends.
struct GivenStack {
  bctx::stack_context stack;
  FiberLoops::Stacks* stacks;
  bctx::stack_context allocate() { return stack; }
  void deallocate(bctx::stack_context& s) noexcept { stacks->Give(s); }
};

}  // namespace

struct FiberLoops::Fiber {
  std::function<void()> fn;
  BlockingShare* share = nullptr;  // RunBlocking's, or none
  bctx::stack_context stack;
  bctx::fiber self;  // the fiber while it is parked
  bctx::fiber back;  // the loop, while the fiber runs
  bool done = false;
  // Its wait was ended by Interrupt (a Waker), not by its descriptors.
  bool interrupted = false;
  // A wait in progress: the descriptors, and when it ends at the latest.
  bool waiting = false;
  pollfd* fds = nullptr;
  nfds_t nfds = 0;
  bool timed = false;
  std::multimap<Clock::time_point, Fiber*>::iterator timer;
};

// Helpers runs RunBlocking's work on threads of their own: as many as
// there are jobs waiting, up to kMaxHelpers (a job may block for seconds,
// a name lookup that times out), kept once started.
class FiberLoops::Helpers {
 public:
  static constexpr size_t kMaxHelpers = 64;
  explicit Helpers(size_t n) {
    std::lock_guard<std::mutex> lock(mu_);
    threads_.reserve(kMaxHelpers);  // adding one never allocates
    for (size_t i = 0; i < std::min(n, kMaxHelpers); ++i) AddLocked();
  }
  ~Helpers() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  void Submit(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
      if (idle_ < jobs_.size() && threads_.size() < kMaxHelpers) AddLocked();
    }
    cv_.notify_one();
  }

 private:
  void AddLocked() {
    try {
      threads_.emplace_back([this] { Work(); });
    } catch (...) {
      // No thread now: the job waits for a running helper.
    }
  }
  void Work() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      ++idle_;
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      --idle_;
      if (jobs_.empty()) return;
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  size_t idle_ = 0;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

namespace {
thread_local FiberLoops::Loop* t_loop = nullptr;
thread_local FiberLoops::Fiber* t_fiber = nullptr;
}  // namespace

// Loop is one thread: its fibers, the descriptors they wait on (one epoll
// set, each descriptor armed once per wait), their time limits.
class FiberLoops::Loop {
 public:
  Loop(Stacks* stacks, Helpers* helpers, std::function<void()> on_end)
      : stacks_(stacks), helpers_(helpers), on_end_(std::move(on_end)) {
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = wake_fd_;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
    thread_ = std::thread([this] { Run(); });
  }
  ~Loop() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
      Nudge();
    }
    thread_.join();
    close(wake_fd_);
    close(epoll_fd_);
  }

  // From any thread: a new fiber, or a parked one whose RunBlocking work
  // is done.
  // The wake-up is written under the lock: once ~Loop holds it, no caller
  // is still using the loop.
  void Start(Fiber* f) {
    std::lock_guard<std::mutex> lock(mu_);
    started_.push_back(f);
    // A fiber of this loop starting another (a connection's handler):
    // the loop looks again before it waits, no wake-up needed.
    if (t_loop == this) {
      started_here_ = true;
    } else {
      Nudge();
    }
  }
  void Wake(Fiber* f) {
    std::lock_guard<std::mutex> lock(mu_);
    woken_.push_back(f);
    Nudge();
  }

  // On this loop's fibers only.
  int Wait(Fiber* f, pollfd* fds, nfds_t n, int timeout_ms);
  void Blocking(Fiber* f, const std::function<void()>& fn);
  // Interrupt ends `f`'s wait now (its Poll returns what is reported so
  // far); on the loop's thread.
  void Interrupt(Fiber* f) {
    f->interrupted = true;
    Ready(f);
  }
  void Yield(Fiber* f) {
    yielded_.push_back(f);
    Park(f);
  }

 private:
  void Nudge() {
    uint64_t one = 1;
    ssize_t ignored = write(wake_fd_, &one, sizeof(one));
    (void)ignored;
  }
  void Run();
  // Park switches from fiber `f` back to the loop until it is resumed.
  void Park(Fiber* f) { f->back = std::move(f->back).resume(); }
  // Forget ends `f`'s wait: its descriptors and time limit are no longer
  // watched for it.
  void Forget(Fiber* f);
  // Ready ends `f`'s wait and queues it to run.
  void Ready(Fiber* f);
  // Arm watches `fd` for `events` until it fires once: 0, or the errno.
  int Arm(int fd, short events);
  // The fibers waiting on one descriptor: most often one, two when one
  // reads and another writes.
  using Waiters = absl::InlinedVector<Fiber*, 2>;
  // Wanted is what the waiters on `fd` wait for, together.
  static short Wanted(const Waiters& w, int fd);
  // Fired hands `fd`'s event `got` to the fibers waiting for it and
  // watches the descriptor again for those still waiting.
  void Fired(int fd, short got);
  void Resume(Fiber* f);

  Stacks* stacks_;
  Helpers* helpers_;
  std::function<void()> on_end_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  std::thread thread_;

  std::mutex mu_;
  std::vector<Fiber*> started_;
  std::vector<Fiber*> woken_;
  bool stop_ = false;

  // The loop's thread only.
  std::deque<Fiber*> runnable_;
  std::vector<Fiber*> yielded_;  // run again after the next look at epoll
  bool started_here_ = false;  // a fiber started one since the turn began
  std::unordered_map<int, Waiters> waiters_;
  std::multimap<Clock::time_point, Fiber*> timers_;
  size_t alive_ = 0;
};

int FiberLoops::Loop::Arm(int fd, short events) {
  epoll_event ev{};
  ev.events = EPOLLONESHOT | ((events & POLLIN) ? EPOLLIN : 0) | ((events & POLLOUT) ? EPOLLOUT : 0);
  ev.data.fd = fd;
  // One registration per descriptor, re-armed for each wait: a closed
  // descriptor leaves the set by itself, and its number, reused, is
  // registered afresh.
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, fd, &ev) == 0) return 0;
  if (errno == ENOENT && epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) return 0;
  return errno;
}

namespace {

// EventsOf is what fiber wait `fds` asks of `fd`.
short EventsOf(const pollfd* fds, nfds_t n, int fd) {
  for (nfds_t i = 0; i < n; ++i) {
    if (fds[i].fd == fd) return fds[i].events;
  }
  return 0;
}

}  // namespace

short FiberLoops::Loop::Wanted(const Waiters& w, int fd) {
  short events = 0;
  for (const Fiber* f : w) events |= EventsOf(f->fds, f->nfds, fd);
  return events;
}

int FiberLoops::Loop::Wait(Fiber* f, pollfd* fds, nfds_t n, int timeout_ms) {
  bool unwatched = false;
  f->interrupted = false;
  f->fds = fds;
  f->nfds = n;
  for (nfds_t i = 0; i < n; ++i) {
    fds[i].revents = 0;
    if (fds[i].fd < 0 || fds[i].events == 0) continue;
    Waiters& w = waiters_[fds[i].fd];
    w.push_back(f);
    if (Arm(fds[i].fd, Wanted(w, fds[i].fd)) != 0) {
      w.pop_back();
      if (w.empty()) waiters_.erase(fds[i].fd);
      unwatched = true;
    }
  }
  f->waiting = true;
  if (unwatched) {
    // epoll will not watch one of them (closed, not a socket, or the set
    // is full): poll(2) is asked every 10 ms instead, up to the caller's
    // time limit. Slower, but no fiber spins or waits past its limit.
    Forget(f);
    auto deadline = timeout_ms < 0 ? Clock::time_point::max()
                                   : Clock::now() + std::chrono::milliseconds(timeout_ms);
    while (true) {
      int ready = poll(fds, n, 0);
      if (ready != 0) return ready;
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      Wait(f, nullptr, 0, static_cast<int>(std::min<int64_t>(10, left.count())));
      // A Waker's wake ends this wait too (its caller wrote no
      // descriptor for poll(2) to see).
      if (f->interrupted) return 0;
    }
  }
  f->timed = timeout_ms >= 0;
  if (f->timed) {
    f->timer = timers_.emplace(Clock::now() + std::chrono::milliseconds(timeout_ms), f);
  }
  Park(f);
  int ready = 0;
  for (nfds_t i = 0; i < n; ++i) ready += fds[i].revents != 0;
  return ready;
}

void FiberLoops::Loop::Blocking(Fiber* f, const std::function<void()>& fn) {
  auto park = [&] {
    f->fds = nullptr;
    f->nfds = 0;
    f->timed = false;
    f->waiting = true;
    Park(f);
  };
  BlockingShare* share = f->share;
  if (share != nullptr) {
    if (share->in_use_ < share->limit_) {
      ++share->in_use_;
    } else {
      // Readied by a job of the share that ended, its slot passed on.
      share->waiting_.push_back(f);
      park();
    }
  }
  // The fiber stays parked until Wake, so `fn` (on its stack) outlives
  // the job.
  helpers_->Submit([this, f, &fn] {
    fn();
    Wake(f);
  });
  park();
  if (share != nullptr) {
    if (share->waiting_.empty()) {
      --share->in_use_;
    } else {
      Fiber* next = share->waiting_.front();
      share->waiting_.pop_front();
      Ready(next);
    }
  }
}

void FiberLoops::Loop::Ready(Fiber* f) {
  if (!f->waiting) return;
  Forget(f);
  runnable_.push_back(f);
}

void FiberLoops::Loop::Forget(Fiber* f) {
  f->waiting = false;
  if (f->timed) timers_.erase(f->timer);
  f->timed = false;
  for (nfds_t i = 0; i < f->nfds; ++i) {
    auto it = waiters_.find(f->fds[i].fd);
    if (it == waiters_.end()) continue;
    Waiters& w = it->second;
    // Those left stay armed for at least what they wait for: an event
    // none of them wants comes to Fired, which arms it again for them.
    w.erase(std::remove(w.begin(), w.end(), f), w.end());
    if (w.empty()) waiters_.erase(it);
  }
}

void FiberLoops::Loop::Fired(int fd, short got) {
  auto it = waiters_.find(fd);
  if (it == waiters_.end()) return;  // its waits ended another way
  Waiters woken;
  for (Fiber* f : it->second) {
    short mine = 0;
    for (nfds_t k = 0; k < f->nfds; ++k) {
      if (f->fds[k].fd != fd) continue;
      f->fds[k].revents |= got & (f->fds[k].events | POLLERR | POLLHUP);
      mine |= f->fds[k].revents;
    }
    if (mine != 0) woken.push_back(f);
  }
  for (Fiber* f : woken) Ready(f);  // each leaves waiters_[fd]
  // One-shot: the descriptor is watched no more until armed again.
  it = waiters_.find(fd);
  if (it != waiters_.end() && Arm(fd, Wanted(it->second, fd)) != 0) {
    // Closed meanwhile: as poll(2) says of a descriptor that is not open.
    Waiters left = it->second;
    for (Fiber* f : left) {
      for (nfds_t k = 0; k < f->nfds; ++k) {
        if (f->fds[k].fd == fd) f->fds[k].revents |= POLLNVAL;
      }
      Ready(f);
    }
  }
}

void FiberLoops::Loop::Resume(Fiber* f) {
  t_fiber = f;
  f->self = std::move(f->self).resume();
  t_fiber = nullptr;
  if (!f->done) return;
  delete f;
  --alive_;
  on_end_();
}

void FiberLoops::Loop::Run() {
  t_loop = this;
  epoll_event events[128];
  // What other threads handed over, taken each turn (kept, so a turn
  // allocates nothing).
  std::vector<Fiber*> started, woken;
  while (true) {
    bool stop;
    {
      std::lock_guard<std::mutex> lock(mu_);
      started.swap(started_);
      woken.swap(woken_);
      stop = stop_;
      started_here_ = false;
    }
    for (Fiber* f : started) {
      ++alive_;
      f->self = bctx::fiber(std::allocator_arg, GivenStack{f->stack, stacks_},
                            [f](bctx::fiber&& back) {
                              f->back = std::move(back);
                              f->fn();
                              f->fn = nullptr;
                              f->done = true;
                              return std::move(f->back);
                            });
      runnable_.push_back(f);
    }
    for (Fiber* f : woken) Ready(f);
    started.clear();
    woken.clear();
    while (!runnable_.empty()) {
      Fiber* f = runnable_.front();
      runnable_.pop_front();
      Resume(f);
    }
    // FiberLoops::Stop ends the loops once no fiber is alive.
    if (stop && alive_ == 0) return;
    int timeout = -1;
    if (!yielded_.empty() || started_here_) {
      timeout = 0;
    } else if (!timers_.empty()) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(timers_.begin()->first - Clock::now());
      timeout = static_cast<int>(std::max<int64_t>(0, left.count()));
    }
    int n = epoll_wait(epoll_fd_, events, 128, timeout);
    for (int i = 0; i < n; ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) {
        uint64_t count;
        ssize_t ignored = read(wake_fd_, &count, sizeof(count));
        (void)ignored;
        continue;
      }
      Fired(fd, ((events[i].events & EPOLLIN) ? POLLIN : 0) |
                    ((events[i].events & EPOLLOUT) ? POLLOUT : 0) |
                    ((events[i].events & EPOLLERR) ? POLLERR : 0) |
                    ((events[i].events & EPOLLHUP) ? POLLHUP : 0));
    }
    auto now = Clock::now();
    while (!timers_.empty() && timers_.begin()->first <= now) Ready(timers_.begin()->second);
    // After what became ready meanwhile.
    for (Fiber* f : yielded_) runnable_.push_back(f);
    yielded_.clear();
  }
}

size_t FiberLoops::DefaultLoops() {
  unsigned cpus = std::thread::hardware_concurrency();
  return std::max<size_t>(1, std::min<size_t>(4, cpus));
}

FiberLoops::FiberLoops(size_t loops, size_t helpers)
    : loop_count_(std::max<size_t>(1, loops)),
      stacks_(std::make_unique<Stacks>()),
      helpers_(std::make_unique<Helpers>(helpers)) {
  for (size_t i = 0; i < loop_count_; ++i) {
    loops_.push_back(std::make_unique<Loop>(stacks_.get(), helpers_.get(), [this] { Ended(); }));
  }
}

FiberLoops::~FiberLoops() { Stop(); }

bool FiberLoops::Spawn(std::function<void()> fn) { return SpawnOn(PickLoop(), std::move(fn)); }

size_t FiberLoops::PickLoop() { return next_.fetch_add(1) % loop_count_; }

bool FiberLoops::SpawnOn(size_t loop, std::function<void()> fn, BlockingShare* share) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    ++alive_;
  }
  auto f = std::make_unique<Fiber>();
  try {
    f->stack = stacks_->Take();
  } catch (const std::bad_alloc&) {
    Ended();
    return false;
  }
  f->fn = std::move(fn);
  f->share = share;
  loops_[loop % loop_count_]->Start(f.release());
  return true;
}

void FiberLoops::Ended() {
  std::lock_guard<std::mutex> lock(mu_);
  if (--alive_ == 0) ended_.notify_all();
}

void FiberLoops::Stop() {
  std::lock_guard<std::mutex> once(stop_mu_);
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (stopped_) return;
    stopping_ = true;
    ended_.wait(lock, [&] { return alive_ == 0; });
    stopped_ = true;
  }
  // The helpers first: one that woke the last fiber may still be on its
  // way out of Loop::Wake.
  helpers_.reset();
  loops_.clear();
}

size_t FiberLoops::fibers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return alive_;
}

int Poll(pollfd* fds, nfds_t n, int timeout_ms) {
  if (t_fiber == nullptr || timeout_ms == 0) return poll(fds, n, timeout_ms);
  return t_loop->Wait(t_fiber, fds, n, timeout_ms);
}

void SleepFor(std::chrono::milliseconds d) {
  if (d.count() <= 0) return;
  if (t_fiber == nullptr) {
    std::this_thread::sleep_for(d);
    return;
  }
  t_loop->Wait(t_fiber, nullptr, 0, static_cast<int>(d.count()));
}

void RunBlocking(const std::function<void()>& fn) {
  if (t_fiber == nullptr) {
    fn();
    return;
  }
  t_loop->Blocking(t_fiber, fn);
}

void Yield() {
  if (t_fiber == nullptr) return;
  t_loop->Yield(t_fiber);
}

void Waker::Wait(int fd, int timeout_ms) {
  pollfd p = {fd, POLLIN, 0};
  Poll(&p, 1, timeout_ms);
}

int Waker::Poll(pollfd* fds, nfds_t n, int timeout_ms) {
  FiberLoops::Loop* mine = loop_.load();
  // One loop's: a fiber of another loop (or a plain thread) only waits
  // for the descriptors.
  if (t_fiber == nullptr || waiting_ != nullptr || (mine != nullptr && mine != t_loop)) {
    return proxyd::Poll(fds, n, timeout_ms);
  }
  loop_.store(t_loop);
  if (woken_) {
    woken_ = false;
    for (nfds_t i = 0; i < n; ++i) fds[i].revents = 0;
    return 0;
  }
  waiting_ = t_fiber;
  int ready = t_loop->Wait(t_fiber, fds, n, timeout_ms);
  waiting_ = nullptr;
  woken_ = false;
  return ready;
}

bool Waker::Wake() {
  if (t_loop == nullptr || loop_.load() != t_loop) return false;
  if (waiting_ != nullptr) {
    t_loop->Interrupt(waiting_);
  } else {
    woken_ = true;
  }
  return true;
}

void RunOnOwnThread(const std::function<void()>& fn) {
  if (t_fiber == nullptr) {
    fn();
    return;
  }
  int done = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  std::thread t;
  try {
    if (done < 0) throw std::system_error(errno, std::generic_category());
    t = std::thread([&] {
      fn();
      uint64_t one = 1;
      (void)!write(done, &one, sizeof(one));
    });
  } catch (const std::system_error&) {
    // No thread or descriptor to be had: the shared helpers, then.
    if (done >= 0) close(done);
    RunBlocking(fn);
    return;
  }
  pollfd p = {done, POLLIN, 0};
  while (Poll(&p, 1, -1) <= 0) {
  }
  t.join();  // it has written: only its end is left
  close(done);
}

bool OnFiber() { return t_fiber != nullptr; }

}  // namespace airlock::proxyd
