// Lifecycle work apid answers 202 for and finishes behind the response
// (stop, delete): each on a thread of its own, joined when apid stops, and
// the set of sandboxes whose deletion is under way (shown as "deleting").
#ifndef AIRLOCK_APID_BACKGROUND_H_
#define AIRLOCK_APID_BACKGROUND_H_

#include <functional>
#include <list>
#include <mutex>
#include <set>
#include <string>
#include <thread>

namespace airlock::apid {

class Background {
 public:
  Background() = default;
  ~Background() { Join(); }
  Background(const Background&) = delete;
  Background& operator=(const Background&) = delete;

  // Run starts `fn` on its own thread; finished threads are reaped here.
  void Run(std::function<void()> fn);
  // BeginDelete marks `uid` deleting; false when it already was.
  bool BeginDelete(const std::string& uid);
  void EndDelete(const std::string& uid);
  bool Deleting(const std::string& uid);
  // Join waits for every task.
  void Join();

 private:
  struct Task {
    std::thread thread;
    bool done = false;
  };
  std::mutex mu_;
  std::list<Task> tasks_;
  std::set<std::string> deleting_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_BACKGROUND_H_
