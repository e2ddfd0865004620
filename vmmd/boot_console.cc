#include "vmmd/boot_console.h"

#include "absl/strings/ascii.h"
#include "common/console_markers.h"

namespace airlock::vmmd {

BootConsole ReadBootConsole(absl::string_view console, absl::Duration since_launch,
                            absl::Duration agent_start_limit) {
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
  } else if (since_launch >= agent_start_limit &&
             console.find(kAgentStartedMarker) == absl::string_view::npos) {
    out.state = BootConsole::State::kKernelSilent;
  }
  return out;
}

}  // namespace airlock::vmmd
