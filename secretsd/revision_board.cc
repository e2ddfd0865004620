#include "secretsd/revision_board.h"

#include <algorithm>
#include <utility>

namespace airlock::secretsd {

uint64_t RevisionBoard::Add(Push push) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  watchers_[id].push = std::move(push);
  return id;
}

void RevisionBoard::Answered(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  it->second.answered = true;
  it->second.last_answer = Clock::now();
}

void RevisionBoard::Acked(uint64_t id, uint64_t revision) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    it->second.acked = std::max(it->second.acked, revision);
  }
  acked_.notify_all();
}

void RevisionBoard::Remove(uint64_t id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = watchers_.find(id);
    if (it == watchers_.end()) return;
    if (it->second.answered) {
      lingering_until_ = std::max(lingering_until_, it->second.last_answer + lease_ + margin_);
    }
    watchers_.erase(it);
  }
  acked_.notify_all();
}

int RevisionBoard::Changed(uint64_t revision) {
  std::unique_lock<std::mutex> lock(mu_);
  // Whom to wait for, and until when: a watcher trusts what it cached
  // only until a lease after its last answer before the change (answers
  // after it carry this revision or a later one).
  std::map<uint64_t, Clock::time_point> waiting;
  for (auto& [id, w] : watchers_) {
    if (w.acked >= revision) continue;
    if (w.answered) waiting[id] = w.last_answer + lease_ + margin_;
    w.push(revision);
  }
  const Clock::time_point linger = lingering_until_;
  int late = 0;
  while (true) {
    Clock::time_point now = Clock::now();
    Clock::time_point soonest = Clock::time_point::max();
    for (auto it = waiting.begin(); it != waiting.end();) {
      auto w = watchers_.find(it->first);
      if (w != watchers_.end() && w->second.acked >= revision) {
        it = waiting.erase(it);
      } else if (now >= it->second) {
        // Gone or silent: its lease has run out.
        if (w != watchers_.end()) ++late;
        it = waiting.erase(it);
      } else {
        soonest = std::min(soonest, it->second);
        ++it;
      }
    }
    if (waiting.empty()) {
      if (now >= linger) return late;
      soonest = linger;
    }
    // An acknowledgement or a removal wakes it sooner.
    acked_.wait_until(lock, soonest);
  }
}

size_t RevisionBoard::watchers() {
  std::lock_guard<std::mutex> lock(mu_);
  return watchers_.size();
}

}  // namespace airlock::secretsd
