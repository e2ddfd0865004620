#include "proxyd/connections.h"

#include <sys/socket.h>

#include <algorithm>
#include <system_error>

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

bool HandlerThreads::Spawn(std::function<void()> fn) {
  std::list<std::thread> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    // Join workers that ended idle (their threads have returned).
    for (auto it = workers_.begin(); it != workers_.end() && !ended_.empty();) {
      auto e = std::find(ended_.begin(), ended_.end(), it->get_id());
      if (e == ended_.end()) {
        ++it;
        continue;
      }
      ended_.erase(e);
      auto next = std::next(it);
      done.splice(done.end(), workers_, it);
      it = next;
    }
    // Counted as running from here: a JoinAll that starts now waits for
    // this handler too.
    running_++;
    if (idle_workers_ > queue_.size()) {
      queue_.push_back(std::move(fn));
      work_.notify_one();
      fn = nullptr;
    }
  }
  for (std::thread& t : done) t.join();
  if (fn == nullptr) return true;
  std::lock_guard<std::mutex> lock(mu_);
  try {
    workers_.emplace_back([this, fn = std::move(fn)]() mutable { Work(std::move(fn)); });
  } catch (const std::system_error&) {
    if (--running_ == 0) drained_.notify_all();
    return false;
  }
  return true;
}

void HandlerThreads::Work(std::function<void()> first) {
  std::function<void()> fn = std::move(first);
  while (true) {
    fn();
    fn = nullptr;
    std::unique_lock<std::mutex> lock(mu_);
    if (--running_ == 0) drained_.notify_all();  // JoinAll may wait for it
    idle_workers_++;
    bool woke = work_.wait_for(lock, idle_, [&] { return stopping_ || !queue_.empty(); });
    idle_workers_--;
    if (!woke || queue_.empty()) {
      // Idle too long, or stopping: this worker ends.
      if (!stopping_) ended_.push_back(std::this_thread::get_id());
      return;
    }
    fn = std::move(queue_.front());
    queue_.pop_front();
  }
}

void HandlerThreads::JoinAll() {
  std::list<std::thread> all;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Queued handlers still run (a worker was promised to each).
    drained_.wait(lock, [&] { return running_ == 0; });
    stopping_ = true;
    work_.notify_all();
    all.swap(workers_);
    ended_.clear();
  }
  for (std::thread& t : all) t.join();
}

size_t HandlerThreads::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

size_t HandlerThreads::threads() const {
  std::lock_guard<std::mutex> lock(mu_);
  return workers_.size() - ended_.size();
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
