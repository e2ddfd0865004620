#include "proxyd/credential_cache.h"

#include <algorithm>
#include <utility>

namespace airlock::proxyd {

std::optional<std::vector<Placement>> CredentialCache::Lookup(const std::string& sandbox,
                                                              const std::string& host,
                                                              uint16_t port) {
  std::lock_guard<std::mutex> lock(mu_);
  if (instance_ == 0) return std::nullopt;
  if (now_() >= lease_until_) {
    // Values are not held past the time they may be used.
    entries_.clear();
    return std::nullopt;
  }
  auto it = entries_.find(Key(sandbox, host, port));
  if (it == entries_.end() || it->second.revision != revision_) return std::nullopt;
  return it->second.placements;
}

void CredentialCache::Store(const std::string& sandbox, const std::string& host, uint16_t port,
                            uint64_t instance, uint64_t revision, uint64_t generation,
                            std::vector<Placement> placements) {
  std::lock_guard<std::mutex> lock(mu_);
  if (instance_ == 0 || instance != instance_ || revision != revision_ ||
      generation != generation_ || now_() >= lease_until_) {
    return;
  }
  if (entries_.size() >= max_entries_) entries_.clear();
  entries_[Key(sandbox, host, port)] = Entry{revision, std::move(placements)};
}

void CredentialCache::Known(uint64_t instance, uint64_t revision,
                            std::optional<Clock::time_point> lease_until) {
  std::lock_guard<std::mutex> lock(mu_);
  if (instance != instance_) {
    entries_.clear();
    instance_ = instance;
    revision_ = revision;
    lease_until_ = Clock::time_point{};
  } else if (revision > revision_) {
    entries_.clear();  // all of an older revision: never used again
    revision_ = revision;
  }
  if (lease_until) lease_until_ = std::max(lease_until_, *lease_until);
}

uint64_t CredentialCache::Generation() {
  std::lock_guard<std::mutex> lock(mu_);
  return generation_;
}

void CredentialCache::Lost() {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  entries_.clear();
  instance_ = 0;
  revision_ = 0;
  lease_until_ = Clock::time_point{};
}

void CredentialCache::Forget(const std::string& sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  ++generation_;
  for (auto it = entries_.begin(); it != entries_.end();) {
    it = std::get<0>(it->first) == sandbox ? entries_.erase(it) : std::next(it);
  }
}

size_t CredentialCache::size() {
  std::lock_guard<std::mutex> lock(mu_);
  return entries_.size();
}

}  // namespace airlock::proxyd
