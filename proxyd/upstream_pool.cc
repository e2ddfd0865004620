#include "proxyd/upstream_pool.h"

#include <errno.h>
#include <sys/socket.h>

#include <vector>

namespace airlock::proxyd {

bool NothingBuffered(Stream& upstream) {
  return upstream.unread().empty() && !upstream.TlsLeftovers() && upstream.fd() >= 0;
}

bool Quiet(Stream& upstream) {
  if (!NothingBuffered(upstream)) return false;
  char c;
  ssize_t n = recv(upstream.fd(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
  return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

void UpstreamPool::TakeExpired(std::chrono::steady_clock::time_point now,
                               std::vector<std::unique_ptr<Stream>>* into) {
  for (auto it = kept_.begin(); it != kept_.end();) {
    std::deque<Kept>& q = it->second;
    while (!q.empty() && now - q.front().since >= limits_.idle) {
      into->push_back(std::move(q.front().stream));
      q.pop_front();
      --count_;
    }
    it = q.empty() ? kept_.erase(it) : std::next(it);
  }
}

std::unique_ptr<Stream> UpstreamPool::Take(const std::string& destination) {
  // Closed outside the lock (a TLS connection's close is an SSL free).
  std::vector<std::unique_ptr<Stream>> dropped;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    TakeExpired(now, &dropped);
  }
  while (true) {
    Kept got;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = kept_.find(destination);
      if (it == kept_.end()) return nullptr;
      got = std::move(it->second.back());
      it->second.pop_back();
      if (it->second.empty()) kept_.erase(it);
      --count_;
    }
    if (Quiet(*got.stream)) return std::move(got.stream);
    dropped.push_back(std::move(got.stream));
  }
}

void UpstreamPool::Keep(const std::string& destination, std::unique_ptr<Stream> upstream) {
  // The socket is asked at Take (a request's one look at it): bytes or an
  // end that arrive now or later are found there all the same.
  if (upstream == nullptr || !NothingBuffered(*upstream)) return;  // closes it
  // Closed outside the lock.
  std::vector<std::unique_ptr<Stream>> dropped;
  std::unique_ptr<Stream> oldest;
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return;  // `upstream` closes on return
  TakeExpired(std::chrono::steady_clock::now(), &dropped);
  std::deque<Kept>& q = kept_[destination];
  if (q.size() >= limits_.per_destination) {
    oldest = std::move(q.front().stream);
    q.pop_front();
    --count_;
  }
  if (count_ >= limits_.total) {
    if (q.empty()) kept_.erase(destination);
    return;  // full: the newest is not worth more than what is kept
  }
  q.push_back(Kept{std::move(upstream), std::chrono::steady_clock::now()});
  ++count_;
}

void UpstreamPool::Close() {
  std::map<std::string, std::deque<Kept>> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    all.swap(kept_);
    count_ = 0;
  }
}

size_t UpstreamPool::idle() const {
  std::lock_guard<std::mutex> lock(mu_);
  return count_;
}

}  // namespace airlock::proxyd
