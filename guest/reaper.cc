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
  constexpr size_t kStack = 256 << 10;
  void* stack = mmap(nullptr, kStack, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (stack == MAP_FAILED) return -1;
  // Blocked until the child has set its handlers back to the defaults: a
  // signal before that would run one of the agent's handlers on the
  // agent's memory in the child.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pid_t pid;
  int clone_errno;
  {
    // Holding the lock across the clone means the reaper cannot record
    // this pid's exit before the entry below exists.
    std::lock_guard<std::mutex> lock(mu_);
    pid = clone(RunChild, static_cast<char*>(stack) + kStack, CLONE_VM | CLONE_VFORK | SIGCHLD,
                const_cast<std::function<void()>*>(&child));
    clone_errno = errno;
    if (pid > 0) children_[pid].notify_fd = notify_fd;
    cv_.notify_all();
  }
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  // The child has exec'd or exited: its stack is free.
  munmap(stack, kStack);
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
    if (it == children_.end()) continue;  // an orphan: reaped, nobody waits
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
