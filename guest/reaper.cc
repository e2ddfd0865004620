#include "guest/reaper.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace airlock::guest {

ChildReaper& ChildReaper::Global() {
  static ChildReaper* reaper = [] {
    auto* r = new ChildReaper();
    std::thread([r] { r->Loop(); }).detach();
    return r;
  }();
  return *reaper;
}

namespace {

int RunChild(void* arg) {
  (*static_cast<const std::function<void()>*>(arg))();
  _exit(127);
}

}  // namespace

pid_t ChildReaper::Spawn(const std::function<void()>& child, int notify_fd) {
  // The child's stack, with a guard page below it: an overflow faults
  // instead of writing over the agent's memory.
  constexpr size_t kGuard = 4096;
  constexpr size_t kStack = 256 << 10;
  void* stack = mmap(nullptr, kGuard + kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  if (mprotect(stack, kGuard, PROT_NONE) != 0) {
    munmap(stack, kGuard + kStack);
    return -1;
  }
  // Blocked until the child has set its handlers back to the defaults: a
  // signal before that would run one of the agent's handlers on the
  // agent's memory in the child.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  // Not under the lock: the clone returns when the child has exec'd, and
  // its chdir and exec may wait on a slow filesystem. The reaper keeps the
  // status of a pid it does not know while a spawn is in flight, which is
  // how a child that failed and was reaped before it was registered is
  // still found.
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++spawning_;
  }
  pid_t pid = clone(RunChild, static_cast<char*>(stack) + kGuard + kStack,
                    CLONE_VM | CLONE_VFORK | SIGCHLD,
                    const_cast<std::function<void()>*>(&child));
  int clone_errno = errno;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pid > 0) {
      Entry& e = children_[pid];
      e.notify_fd = notify_fd;
      auto early = early_exits_.find(pid);
      if (early != early_exits_.end()) {
        e.done = true;
        e.status = early->second;
        early_exits_.erase(early);
        if (notify_fd >= 0) {
          char c = 'x';
          ssize_t unused = write(notify_fd, &c, 1);
          (void)unused;
        }
      }
    }
    if (--spawning_ == 0) early_exits_.clear();  // orphans' statuses
    cv_.notify_all();
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  // The child has exec'd or exited: its stack is free.
  munmap(stack, kGuard + kStack);
  errno = clone_errno;
  return pid;
}

void ChildReaper::Loop() {
  while (true) {
    int status = 0;
    pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == ECHILD) {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait_for(lock, std::chrono::milliseconds(200));
      }
      continue;
    }
    std::lock_guard<std::mutex> lock(mu_);
    auto it = children_.find(pid);
    if (it == children_.end()) {
      // An orphan (reaped, nobody waits), or a child whose Spawn has not
      // registered it yet.
      if (spawning_ > 0) early_exits_[pid] = status;
      continue;
    }
    if (it->second.forgotten) {
      children_.erase(it);
      continue;
    }
    it->second.done = true;
    it->second.status = status;
    if (it->second.notify_fd >= 0) {
      char c = 'x';
      ssize_t unused = write(it->second.notify_fd, &c, 1);
      (void)unused;
    }
    cv_.notify_all();
  }
}

int ChildReaper::Wait(pid_t pid) {
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [&] { return children_[pid].done; });
  int status = children_[pid].status;
  children_.erase(pid);
  return status;
}

bool ChildReaper::TryWait(pid_t pid, int* status) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(pid);
  if (it == children_.end() || !it->second.done) return false;
  *status = it->second.status;
  children_.erase(it);
  return true;
}

}  // namespace airlock::guest

namespace airlock::guest {

void ChildReaper::Forget(pid_t pid) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(pid);
  if (it == children_.end()) return;
  if (it->second.done) {
    children_.erase(it);
  } else {
    it->second.forgotten = true;
  }
}

}  // namespace airlock::guest

namespace airlock::guest {

void ChildReaper::SignalGroup(pid_t pid, int sig) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = children_.find(pid);
  if (pid <= 0 || it == children_.end() || it->second.done) return;
  kill(-pid, sig);
}

}  // namespace airlock::guest
