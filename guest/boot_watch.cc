#include "guest/boot_watch.h"

#include <sys/klog.h>

#include <cstdlib>
#include <fstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "guest/boot.h"

namespace airlock::guest {

std::string SlowBootLine(const std::vector<RunningStep>& steps, double uptime_s,
                         absl::string_view kernel_tail) {
  std::vector<std::string> parts;
  for (const RunningStep& s : steps) {
    parts.push_back(absl::StrCat(s.what, " (", absl::ToInt64Seconds(s.running), " s)"));
  }
  std::string line = absl::StrCat("airlock-init: boot slow, ", static_cast<int64_t>(uptime_s),
                                  " s since the kernel started; still running: ",
                                  parts.empty() ? "nothing (between steps)"
                                                : absl::StrJoin(parts, ", "));
  if (!kernel_tail.empty()) absl::StrAppend(&line, "; kernel: ", kernel_tail);
  return line;
}

std::string KernelTail(int lines) {
  int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, nullptr, 0);
  if (size <= 0) return "";
  std::string buf(static_cast<size_t>(size), '\0');
  int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, buf.data(), size);
  if (n <= 0) return "";
  buf.resize(static_cast<size_t>(n));
  std::vector<absl::string_view> all = absl::StrSplit(buf, '\n', absl::SkipWhitespace());
  size_t from = all.size() > static_cast<size_t>(lines) ? all.size() - lines : 0;
  std::vector<absl::string_view> tail(all.begin() + static_cast<ptrdiff_t>(from), all.end());
  return absl::StrJoin(tail, " | ");
}

namespace {

double Uptime() {
  std::ifstream in("/proc/uptime");
  double s = 0;
  in >> s;
  return s;
}

}  // namespace

BootWatch::BootWatch(absl::Duration first, absl::Duration every)
    : BootWatch(first, every, [](absl::string_view line) { Console(line); },
                [] { return KernelTail(5); }) {}

BootWatch::BootWatch(absl::Duration first, absl::Duration every, Sink sink,
                     std::function<std::string()> kernel_tail)
    : first_(first), every_(every), sink_(std::move(sink)), kernel_tail_(std::move(kernel_tail)) {
  thread_ = std::thread([this] { Run(); });
}

BootWatch::~BootWatch() { Done(); }

void BootWatch::Done() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

BootWatch::Step BootWatch::Begin(std::string what) {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t id = next_id_++;
  running_[id] = {std::move(what), absl::Now()};
  return Step(this, id);
}

void BootWatch::Step::Finish() {
  if (watch_ == nullptr) return;
  watch_->End(id_);
  watch_ = nullptr;
}

void BootWatch::End(uint64_t id) {
  std::lock_guard<std::mutex> lock(mu_);
  running_.erase(id);
}

void BootWatch::Run() {
  absl::Duration wait = first_;
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    if (cv_.wait_for(lock, absl::ToChronoNanoseconds(wait), [this] { return done_; })) return;
    wait = every_;
    std::vector<RunningStep> steps;
    absl::Time now = absl::Now();
    for (const auto& [id, step] : running_) steps.push_back({step.first, now - step.second});
    // The kernel's log and the console are read and written unlocked:
    // either can be slow in a boot that is in trouble, and a step ending
    // meanwhile must not wait for them. Done waits for the thread, so no
    // line follows it.
    lock.unlock();
    std::string line = SlowBootLine(steps, Uptime(), kernel_tail_());
    sink_(line);
    lock.lock();
    if (done_) return;
  }
}

}  // namespace airlock::guest
