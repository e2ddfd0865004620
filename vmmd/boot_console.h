// What a booting guest's console says so far: the agent is ready, it
// failed (and why), the kernel never started it, or the boot goes on.
// A pure reading of the console's text, so that the rules are tested
// without a VM; vmmd's boot loop acts on it.
#ifndef AIRLOCK_VMMD_BOOT_CONSOLE_H_
#define AIRLOCK_VMMD_BOOT_CONSOLE_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::vmmd {

struct BootConsole {
  enum class State {
    // Nothing decided yet: wait and read again.
    kBooting,
    // The agent's port is open.
    kReady,
    // The agent said the boot failed; `failure` is its line.
    kFailed,
    // The kernel ran for `agent_start_limit` and never started the agent.
    // Seen rarely under TCG on a loaded host: the guest hangs before
    // init with nothing on the console. Booting again is the cure.
    kKernelSilent,
  };
  State state = State::kBooting;
  std::string failure;
};

// ReadBootConsole reads `console` (the whole file) of a guest booted
// `since_launch` ago. Where it stops: it judges only the agent's start; a
// slow agent is the boot deadline's (its own watch says on the console
// which step is slow).
BootConsole ReadBootConsole(absl::string_view console, absl::Duration since_launch,
                            absl::Duration agent_start_limit);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_BOOT_CONSOLE_H_
