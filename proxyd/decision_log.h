// Every decision proxyd makes, kept for `airlock policy log`: the newest in
// memory for followers, all of them in proxyd's SQLite file (written in
// batches by a background thread, so a decision never waits for a disk
// flush; the newest 100k rows are kept).
#ifndef AIRLOCK_PROXYD_DECISION_LOG_H_
#define AIRLOCK_PROXYD_DECISION_LOG_H_

#include <chrono>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/state_db.h"
#include "protos/proxy/v1/proxy.pb.h"

namespace airlock::proxyd {

class DecisionLog {
 public:
  explicit DecisionLog(StateDb* db) : db_(db) {}
  ~DecisionLog();

  // Init loads the newest decisions (table "decisions", see kSchema in
  // main.cc) and starts the writer.
  absl::Status Init();

  void Record(airlock::proxy::v1::Decision d);

  // Since returns decisions with a sequence number > `after` (for
  // `sandbox`, or all when empty), oldest first, and the newest sequence
  // number seen. Waits up to `wait` when there are none.
  std::vector<airlock::proxy::v1::Decision> Since(uint64_t after, const std::string& sandbox,
                                                  std::chrono::milliseconds wait,
                                                  uint64_t* newest);
  // Recent returns the newest `limit` decisions (for `sandbox`, or all),
  // oldest first, and the sequence number to follow from.
  std::vector<airlock::proxy::v1::Decision> Recent(size_t limit, const std::string& sandbox,
                                                   uint64_t* newest);

 private:
  void Writer();

  static constexpr size_t kInMemory = 20000;
  // How many nice levels the writer thread runs below proxyd (see Writer).
  static constexpr int kWriterNice = 10;
  StateDb* db_;
  std::mutex mu_;
  // Followers (Since) wait on `added_`, woken by a decision only while one
  // waits; the writer waits on `stop_` (it wakes on its period, or to
  // stop): a decision wakes no thread that has nothing to do with it.
  std::condition_variable added_;
  std::condition_variable stop_;
  size_t followers_ = 0;
  bool stopping_ = false;
  uint64_t seq_ = 0;
  // One copy of each decision, shared by the newest in memory and the
  // writer's queue (a decision is recorded per request: a second copy was
  // a malloc per field, and the queue's growth from empty each batch a
  // large move).
  using Shared = std::shared_ptr<const airlock::proxy::v1::Decision>;
  std::deque<std::pair<uint64_t, Shared>> recent_;
  std::vector<Shared> unwritten_;
  std::thread writer_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_DECISION_LOG_H_
