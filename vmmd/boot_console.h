// What a booting guest shows so far: its console (the agent is ready, it
// failed and why, the kernel never started it) and how much CPU its VM
// has used lately (a guest that sits halted with no interrupt coming).
// Pure readings, so that the rules are tested without a VM; vmmd's boot
// loops act on them.
#ifndef AIRLOCK_VMMD_BOOT_CONSOLE_H_
#define AIRLOCK_VMMD_BOOT_CONSOLE_H_

#include <sys/types.h>

#include <deque>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::vmmd {

// CpuHistory is the CPU time a VM's process had used, sampled along its
// boot.
class CpuHistory {
 public:
  // Add records that the process had used `cpu` at `at` (time since the
  // launch; samples come in order). Samples older than needed go.
  void Add(absl::Duration at, absl::Duration cpu);
  // IdleFor: over the last `window` (the samples span it), the process
  // used less than `cpu`.
  bool IdleFor(absl::Duration window, absl::Duration cpu) const;

 private:
  struct Sample {
    absl::Duration at;
    absl::Duration cpu;
  };
  std::deque<Sample> samples_;
};

// ProcessCpuTime is the CPU time `pid` has used (user and system, from
// /proc), zero when it cannot be read.
absl::Duration ProcessCpuTime(pid_t pid);

// When a boot is given up as hung before its deadline.
struct HangLimits {
  // The kernel must start the agent (its first console line) within this.
  absl::Duration agent_start = absl::Seconds(30);
  // A VM that used less than `idle_cpu` over `idle_window` before its
  // agent is ready sits halted: a booting guest under TCG keeps its vCPUs
  // busy, and even an idle one wakes for its timers many times a second.
  absl::Duration idle_window = absl::Seconds(20);
  absl::Duration idle_cpu = absl::Seconds(1);
};

struct BootConsole {
  enum class State {
    // Nothing decided yet: wait and read again.
    kBooting,
    // The agent's port is open.
    kReady,
    // The agent said the boot failed; `failure` is its line.
    kFailed,
    // The kernel ran for HangLimits::agent_start and never started the
    // agent.
    kKernelSilent,
    // The VM has been idle for HangLimits::idle_window before its agent
    // was ready. Seen under TCG on a loaded host, about one boot in 70:
    // both vCPUs halted, no timer interrupt ever coming, the console
    // still.
    kHalted,
  };
  State state = State::kBooting;
  std::string failure;
  // Why a hung state was decided, for the log and the error.
  std::string why;
};

// ReadBootConsole reads `console` (the whole file) of a guest launched
// `since_launch` ago whose VM's CPU time is `cpu`. `limits` null: only
// ready and failed are read (a VM reattached to, whose boot vmmd did not
// watch from its start). Where it stops: an agent that started and keeps
// its VM busy is the boot deadline's, however slow (its own watch says on
// the console which step is slow).
BootConsole ReadBootConsole(absl::string_view console, absl::Duration since_launch,
                            const CpuHistory& cpu, const HangLimits* limits);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_BOOT_CONSOLE_H_
