#include "proxyd/connections.h"

#include <sys/socket.h>


namespace airlock::proxyd {

bool ConnectionCaps::Reserve(std::atomic<uint64_t>* sandbox_open, uint64_t per_sandbox) {
  if (sandbox_open->fetch_add(1) >= per_sandbox) {
    sandbox_open->fetch_sub(1);
    return false;
  }
  if (open_.fetch_add(1) >= total_) {
    open_.fetch_sub(1);
    sandbox_open->fetch_sub(1);
    return false;
  }
  return true;
}

void ConnectionCaps::Release(std::atomic<uint64_t>* sandbox_open) {
  sandbox_open->fetch_sub(1);
  open_.fetch_sub(1);
}

bool Handlers::Spawn(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    // Counted from here: a JoinAll that starts now waits for it too.
    running_++;
  }
  bool spawned = loops_->SpawnOn(loop_, [this, fn = std::move(fn)]() mutable {
    fn();
    // What the handler held goes before it counts as ended: JoinAll's
    // caller may then destroy what that refers to.
    fn = nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    if (--running_ == 0) drained_.notify_all();
  }, &share_);
  if (!spawned) {
    std::lock_guard<std::mutex> lock(mu_);
    if (--running_ == 0) drained_.notify_all();
  }
  return spawned;
}

void Handlers::JoinAll() {
  std::unique_lock<std::mutex> lock(mu_);
  stopping_ = true;
  drained_.wait(lock, [&] { return running_ == 0; });
}

size_t Handlers::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

void SocketSet::Add(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  if (shut_) {
    shutdown(fd, SHUT_RDWR);
    return;
  }
  fds_.insert(fd);
}

void SocketSet::Remove(int fd) {
  std::lock_guard<std::mutex> lock(mu_);
  fds_.erase(fd);
}

void SocketSet::ShutdownAll() {
  std::lock_guard<std::mutex> lock(mu_);
  shut_ = true;
  for (int fd : fds_) shutdown(fd, SHUT_RDWR);
}

}  // namespace airlock::proxyd
