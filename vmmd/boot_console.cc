#include "vmmd/boot_console.h"

#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/console_markers.h"
#include "common/fd_io.h"

namespace airlock::vmmd {

void BootActivity::Add(absl::Duration at, absl::Duration cpu, size_t console_bytes) {
  samples_.push_back({at, cpu, console_bytes});
  // One sample at least `keep_` older than the newest stays.
  while (samples_.size() > 2 && samples_[1].at <= at - keep_) samples_.pop_front();
}

bool BootActivity::StillFor(absl::Duration window, absl::Duration cpu) const {
  if (samples_.empty()) return false;
  const Sample& last = samples_.back();
  // The newest sample at least `window` older than the last.
  const Sample* from = nullptr;
  for (const Sample& s : samples_) {
    if (s.at <= last.at - window) from = &s;
  }
  if (from == nullptr) return false;
  absl::Duration used = last.cpu - from->cpu;
  return used >= absl::ZeroDuration() && used < cpu && last.console_bytes == from->console_bytes;
}

BootConsole ReadBootConsole(absl::string_view console, const BootActivity& activity,
                            const HangLimits* limits) {
  BootConsole out;
  size_t failed = console.find(kAgentFailedMarker);
  if (failed != absl::string_view::npos) {
    // The serial console ends its lines with "\r\n".
    size_t end = console.find('\n', failed);
    out.state = BootConsole::State::kFailed;
    out.failure = std::string(absl::StripTrailingAsciiWhitespace(
        console.substr(failed, end == absl::string_view::npos ? end : end - failed)));
    return out;
  }
  if (console.find(kAgentReadyMarker) != absl::string_view::npos) {
    out.state = BootConsole::State::kReady;
  } else if (limits != nullptr && activity.StillFor(limits->idle_window, limits->idle_cpu)) {
    out.state = BootConsole::State::kHalted;
    out.why = absl::StrCat("the VM used less than ", absl::FormatDuration(limits->idle_cpu),
                           " of CPU and its console stayed still for ",
                           absl::FormatDuration(limits->idle_window),
                           " before the guest agent was ready (the guest sits halted)");
  }
  return out;
}

std::optional<absl::Duration> ProcessCpuTime(pid_t pid) {
  std::string stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  // The name, in parentheses, may hold spaces: the fields after it are
  // state, ppid, ..., utime (14th of the line) and stime (15th).
  size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return std::nullopt;
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

BootWatcher::BootWatcher(pid_t pid, std::string console_path, const HangLimits* limits)
    : pid_(pid),
      console_path_(std::move(console_path)),
      limits_(limits),
      launched_(std::chrono::steady_clock::now()),
      activity_(limits != nullptr ? limits->idle_window : absl::ZeroDuration()) {}

BootConsole BootWatcher::Read() {
  std::string console = ReadFileToString(console_path_);
  if (limits_ != nullptr) {
    absl::Duration since = absl::FromChrono(std::chrono::steady_clock::now() - launched_);
    if (since >= next_sample_) {
      // A VM that is gone says nothing of its activity (its exit is the
      // caller's to see).
      if (std::optional<absl::Duration> cpu = ProcessCpuTime(pid_)) {
        activity_.Add(since, *cpu, console.size());
      }
      next_sample_ = since + absl::Seconds(1);
    }
  }
  return ReadBootConsole(console, activity_, limits_);
}

}  // namespace airlock::vmmd
