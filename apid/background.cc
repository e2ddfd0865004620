#include "apid/background.h"

namespace airlock::apid {

void Background::Run(std::function<void()> fn) {
  std::list<Task> finished;
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    auto next = std::next(it);
    if (it->done) finished.splice(finished.end(), tasks_, it);
    it = next;
  }
  tasks_.emplace_back();
  Task* task = &tasks_.back();
  task->thread = std::thread([this, task, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(mu_);
    task->done = true;
  });
  // Threads that set done have returned from fn; joining them is quick.
  for (auto& t : finished) t.thread.join();
}

bool Background::BeginDelete(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  return deleting_.insert(uid).second;
}

void Background::EndDelete(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  deleting_.erase(uid);
}

bool Background::Deleting(const std::string& uid) {
  std::lock_guard<std::mutex> lock(mu_);
  return deleting_.count(uid) > 0;
}

void Background::Join() {
  std::list<Task> all;
  {
    std::lock_guard<std::mutex> lock(mu_);
    all.swap(tasks_);
  }
  for (auto& t : all) {
    if (t.thread.joinable()) t.thread.join();
  }
}

}  // namespace airlock::apid
