#include "proxyd/connections.h"

#include <sys/socket.h>

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
  auto done = std::make_shared<std::atomic<bool>>(false);
  std::thread t;
  try {
    t = std::thread([fn = std::move(fn), done] {
      fn();
      done->store(true);
    });
  } catch (const std::system_error&) {
    return false;
  }
  std::list<Entry> finished;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto it = threads_.begin(); it != threads_.end();) {
      auto next = std::next(it);
      if (it->done->load()) finished.splice(finished.end(), threads_, it);
      it = next;
    }
    threads_.push_back(Entry{std::move(t), done});
  }
  for (Entry& e : finished) e.thread.join();
  return true;
}

void HandlerThreads::JoinAll() {
  while (true) {
    std::list<Entry> all;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (threads_.empty()) return;
      all.swap(threads_);
    }
    for (Entry& e : all) e.thread.join();
  }
}

size_t HandlerThreads::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t n = 0;
  for (const Entry& e : threads_) n += e.done->load() ? 0 : 1;
  return n;
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
