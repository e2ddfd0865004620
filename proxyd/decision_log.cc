#include "proxyd/decision_log.h"

#include <errno.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "absl/strings/numbers.h"
#include "common/log.h"

namespace airlock::proxyd {

namespace pb = airlock::proxy::v1;

DecisionLog::~DecisionLog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  added_.notify_all();
  stop_.notify_all();
  if (writer_.joinable()) writer_.join();
}

absl::Status DecisionLog::Init() {
  auto rows = db_->Query("SELECT seq, data FROM (SELECT seq, data FROM decisions ORDER BY seq "
                         "DESC LIMIT ?) ORDER BY seq",
                         {static_cast<int64_t>(kInMemory)});
  if (!rows.ok()) return rows.status();
  for (const auto& row : *rows) {
    pb::Decision d;
    uint64_t seq = 0;
    if (!absl::SimpleAtoi(row[0], &seq) || !d.ParseFromString(row[1])) continue;
    recent_.emplace_back(seq, std::make_shared<const pb::Decision>(std::move(d)));
    seq_ = seq;
  }
  writer_ = std::thread([this] { Writer(); });
  return absl::OkStatus();
}

void DecisionLog::Record(pb::Decision d) {
  auto shared = std::make_shared<const pb::Decision>(std::move(d));
  bool followed;
  Shared dropped;  // the oldest, let go of outside the lock
  {
    std::lock_guard<std::mutex> lock(mu_);
    recent_.emplace_back(++seq_, shared);
    if (recent_.size() > kInMemory) {
      dropped = std::move(recent_.front().second);
      recent_.pop_front();
    }
    unwritten_.push_back(std::move(shared));
    followed = followers_ > 0;
  }
  if (followed) added_.notify_all();
}

void DecisionLog::Writer() {
  // The file is written behind the traffic: under load this thread yields
  // its CPU to the connections' loops (10 nice levels below them: about a
  // tenth of their share when every CPU is busy, all of a CPU when one is
  // idle), so its batches do not show in their latency. A batch holds the
  // state file's lock until its commit (ExecAll), so an attach or detach
  // meanwhile waits for it: a few milliseconds, on a gRPC thread.
  // Relative to proxyd's own: an operator who runs proxyd niced already
  // never has the writer raised above it.
  id_t tid = static_cast<id_t>(syscall(SYS_gettid));
  errno = 0;
  int nice_now = getpriority(PRIO_PROCESS, tid);
  if (errno == 0) (void)setpriority(PRIO_PROCESS, tid, std::min(19, nice_now + kWriterNice));
  std::optional<std::chrono::steady_clock::time_point> last_warning;
  while (true) {
    std::vector<Shared> batch;
    bool stop;
    {
      std::unique_lock<std::mutex> lock(mu_);
      stop_.wait_for(lock, std::chrono::milliseconds(200), [&] { return stopping_; });
      batch.swap(unwritten_);
      // The next batch likely as large: no growth on the recording path.
      unwritten_.reserve(batch.size());
      stop = stopping_;
    }
    if (!batch.empty()) {
      // One transaction, the insert prepared once: a batch of a second's
      // decisions under load was a thousand statements prepared apiece,
      // tens of milliseconds of CPU taken from the connections' loops
      // (what the bench's one-connection p99 showed).
      std::vector<SqlStatement> statements;
      statements.reserve(batch.size() + 1);
      for (const auto& d : batch) {
        statements.push_back({"INSERT INTO decisions (sandbox, data) VALUES (?, ?)",
                              {d->sandbox(), d->SerializeAsString()}});
      }
      statements.push_back(
          {"DELETE FROM decisions WHERE seq <= (SELECT MAX(seq) FROM decisions) - 100000", {}});
      // They stay in memory (Recent, Since); the state file misses them.
      // Said once a minute at most (a full disk fails every batch).
      if (absl::Status s = db_->ExecAll(statements); !s.ok()) {
        auto now = std::chrono::steady_clock::now();
        if (!last_warning || now - *last_warning >= std::chrono::minutes(1)) {
          last_warning = now;
          AIRLOCK_LOG_WARN("decisions were not written to the state file",
                           {{"decisions", std::to_string(batch.size())},
                            {"error", std::string(s.message())}});
        }
      }
    }
    if (stop) return;
  }
}

std::vector<pb::Decision> DecisionLog::Since(uint64_t after, const std::string& sandbox,
                                             std::chrono::milliseconds wait, uint64_t* newest) {
  std::unique_lock<std::mutex> lock(mu_);
  followers_++;
  added_.wait_for(lock, wait, [&] { return seq_ > after || stopping_; });
  followers_--;
  std::vector<pb::Decision> out;
  for (const auto& [seq, d] : recent_) {
    if (seq > after && (sandbox.empty() || d->sandbox() == sandbox)) out.push_back(*d);
  }
  *newest = seq_;
  return out;
}

std::vector<pb::Decision> DecisionLog::Recent(size_t limit, const std::string& sandbox,
                                              uint64_t* newest) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<pb::Decision> out;
  for (auto it = recent_.rbegin(); it != recent_.rend() && out.size() < limit; ++it) {
    if (sandbox.empty() || it->second->sandbox() == sandbox) out.push_back(*it->second);
  }
  std::reverse(out.begin(), out.end());
  *newest = seq_;
  return out;
}

}  // namespace airlock::proxyd
