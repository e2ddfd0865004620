#include "vmmd/boot_console.h"

#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/console_markers.h"
#include "common/fd_io.h"

namespace airlock::vmmd {

void CpuHistory::Add(absl::Duration at, absl::Duration cpu) {
  samples_.push_back({at, cpu});
  // One sample at least a window old is kept (the longest window asked
  // for is a minute).
  while (samples_.size() > 2 && samples_[1].at <= at - absl::Minutes(1)) samples_.pop_front();
}

bool CpuHistory::IdleFor(absl::Duration window, absl::Duration cpu) const {
  if (samples_.empty()) return false;
  const Sample& last = samples_.back();
  // The newest sample at least `window` older than the last.
  const Sample* from = nullptr;
  for (const Sample& s : samples_) {
    if (s.at <= last.at - window) from = &s;
  }
  return from != nullptr && last.cpu - from->cpu < cpu;
}

absl::Duration ProcessCpuTime(pid_t pid) {
  std::string stat = ReadFileToString(absl::StrCat("/proc/", pid, "/stat"));
  // The name, in parentheses, may hold spaces: the fields after it are
  // state, ppid, ..., utime (14th of the line) and stime (15th).
  size_t name_end = stat.rfind(')');
  if (name_end == std::string::npos) return absl::ZeroDuration();
  std::vector<absl::string_view> fields =
      absl::StrSplit(absl::string_view(stat).substr(name_end + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return absl::ZeroDuration();
  }
  return absl::Seconds(static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK));
}

BootConsole ReadBootConsole(absl::string_view console, absl::Duration since_launch,
                            const CpuHistory& cpu, const HangLimits* limits) {
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
    return out;
  }
  if (limits == nullptr) return out;
  if (since_launch >= limits->agent_start &&
      console.find(kAgentStartedMarker) == absl::string_view::npos) {
    out.state = BootConsole::State::kKernelSilent;
    out.why = absl::StrCat("the guest kernel did not start the agent within ",
                           absl::FormatDuration(limits->agent_start));
  } else if (cpu.IdleFor(limits->idle_window, limits->idle_cpu)) {
    out.state = BootConsole::State::kHalted;
    out.why = absl::StrCat("the VM used less than ", absl::FormatDuration(limits->idle_cpu),
                           " of CPU in ", absl::FormatDuration(limits->idle_window),
                           " before its agent was ready (the guest sits halted)");
  }
  return out;
}

}  // namespace airlock::vmmd
