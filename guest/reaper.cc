#include "guest/reaper.h"

#include <errno.h>
#include <signal.h>
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

pid_t ChildReaper::Fork(const std::function<void()>& child, int notify_fd) {
  // Holding the lock across fork means the reaper cannot record this pid's
  // exit before the entry below exists.
  std::lock_guard<std::mutex> lock(mu_);
  pid_t pid = fork();
  if (pid == 0) {
    child();
    _exit(127);
  }
  if (pid > 0) children_[pid].notify_fd = notify_fd;
  cv_.notify_all();
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
