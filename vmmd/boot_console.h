// Whether a booting guest is ready, failed, or hangs: its console (the
// agent's lines) and what its VM has done lately (CPU time, console
// output). ReadBootConsole and BootActivity are pure, so that the rules
// are tested without a VM; BootWatcher feeds them from /proc and the
// console's file for vmmd's boot loops.
#ifndef AIRLOCK_VMMD_BOOT_CONSOLE_H_
#define AIRLOCK_VMMD_BOOT_CONSOLE_H_

#include <sys/types.h>

#include <chrono>
#include <deque>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::vmmd {

// HangLimits says when a boot is given up as hung before its deadline: its
// VM used less than `idle_cpu` over `idle_window` and its console did not
// grow meanwhile, before the agent was ready. A booting guest under TCG
// keeps its vCPUs busy, an idle one still wakes for its timers many times
// a second, and a guest waiting on the host (a KVM guest's disk) has its
// agent say on the console which step is slow every 15 s.
struct HangLimits {
  absl::Duration idle_window = absl::Seconds(20);
  absl::Duration idle_cpu = absl::Seconds(1);
};

// BootActivity is what a VM had done at points of its boot: the CPU time
// its process had used and the bytes on its console.
class BootActivity {
 public:
  // Samples older than `keep` (before the newest) go; keep at least the
  // longest window asked about.
  explicit BootActivity(absl::Duration keep) : keep_(keep) {}
  // Add records a sample taken `at` (time since the launch; in order).
  void Add(absl::Duration at, absl::Duration cpu, size_t console_bytes);
  // StillFor: the samples span `window`, and over it the process used less
  // than `cpu` and the console did not grow.
  bool StillFor(absl::Duration window, absl::Duration cpu) const;

 private:
  struct Sample {
    absl::Duration at;
    absl::Duration cpu;
    size_t console_bytes;
  };
  absl::Duration keep_;
  std::deque<Sample> samples_;
};

// BootConsole is what a booting guest shows so far.
struct BootConsole {
  enum class State {
    // Nothing decided yet: wait and read again.
    kBooting,
    // The agent's port is open.
    kReady,
    // The agent said the boot failed; `failure` is its line.
    kFailed,
    // The VM has been still (HangLimits) before its agent was ready. Seen
    // under TCG, about one restart in 70 of a sandbox with shared paths
    // while another VM booted: both vCPUs halted, no timer interrupt ever
    // coming, the console still.
    kHalted,
  };
  State state = State::kBooting;
  std::string failure;
  // Why kHalted was decided, for the log and the error.
  std::string why;
};

// ReadBootConsole reads `console` (the whole file) of a booting guest
// whose VM did `activity`. `limits` null: only ready and failed are read
// (a VM reattached to, whose boot vmmd did not watch from its start).
// Where it stops: a VM that keeps busy or keeps writing its console is the
// boot deadline's, however slow.
BootConsole ReadBootConsole(absl::string_view console, const BootActivity& activity,
                            const HangLimits* limits);

// ProcessCpuTime is the CPU time `pid` has used (user and system, all its
// threads, from /proc); nullopt when it cannot be read (the process is
// gone).
std::optional<absl::Duration> ProcessCpuTime(pid_t pid);

// BootWatcher watches one boot from its launch: Read samples the VM's CPU
// time and console size once a second and reads the console.
class BootWatcher {
 public:
  // `limits` null: hangs are not looked for.
  BootWatcher(pid_t pid, std::string console_path, const HangLimits* limits);
  BootConsole Read();

 private:
  pid_t pid_;
  std::string console_path_;
  const HangLimits* limits_;
  std::chrono::steady_clock::time_point launched_;
  absl::Duration next_sample_ = absl::ZeroDuration();
  BootActivity activity_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_BOOT_CONSOLE_H_
