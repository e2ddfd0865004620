// BootWatch: which of the boot's steps is still running, said on the
// console when the boot takes long.
//
// The guest kernel runs `quiet`, and before the agent is ready nothing
// else writes to the console: a boot that hangs left vmmd's console log
// with the kernel's last error and no clue where the guest stopped. The
// watch writes, after `first` and then every `every`, one line naming the
// steps still running, the time since the kernel started and the kernel's
// latest messages, until Done.
#ifndef AIRLOCK_GUEST_BOOT_WATCH_H_
#define AIRLOCK_GUEST_BOOT_WATCH_H_

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace airlock::guest {

// SlowBootLine is the watch's line: the steps still running (each with how
// long it has run), the seconds since the kernel started and the kernel's
// latest messages. Pure, for tests.
struct RunningStep {
  std::string what;
  absl::Duration running;
};
std::string SlowBootLine(const std::vector<RunningStep>& steps, double uptime_s,
                         absl::string_view kernel_tail);

// KernelTail is the last `lines` lines of the kernel's log buffer, joined
// with " | " ("" when it cannot be read).
std::string KernelTail(int lines);

class BootWatch {
 public:
  using Sink = std::function<void(absl::string_view line)>;
  // Production: the console, the kernel's log and /proc/uptime.
  BootWatch(absl::Duration first, absl::Duration every);
  // Tests: `sink` gets each line; `kernel_tail` what KernelTail would say.
  BootWatch(absl::Duration first, absl::Duration every, Sink sink,
            std::function<std::string()> kernel_tail);
  ~BootWatch();  // Done
  BootWatch(const BootWatch&) = delete;
  BootWatch& operator=(const BootWatch&) = delete;

  // Step marks `what` running until the returned step is destroyed (or
  // Finish is called on it). Steps on several threads are fine.
  class Step {
   public:
    Step(BootWatch* watch, uint64_t id) : watch_(watch), id_(id) {}
    Step(Step&& other) noexcept : watch_(other.watch_), id_(other.id_) { other.watch_ = nullptr; }
    Step(const Step&) = delete;
    Step& operator=(const Step&) = delete;
    Step& operator=(Step&& other) noexcept {
      if (this != &other) {
        Finish();
        watch_ = other.watch_;
        id_ = other.id_;
        other.watch_ = nullptr;
      }
      return *this;
    }
    ~Step() { Finish(); }
    void Finish();

   private:
    BootWatch* watch_;
    uint64_t id_;
  };
  [[nodiscard]] Step Begin(std::string what);

  // Done ends the watch: no line is written after it returns.
  void Done();

 private:
  void Run();
  void End(uint64_t id);

  const absl::Duration first_;
  const absl::Duration every_;
  const Sink sink_;
  const std::function<std::string()> kernel_tail_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  uint64_t next_id_ = 0;
  std::map<uint64_t, std::pair<std::string, absl::Time>> running_;
  std::thread thread_;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_BOOT_WATCH_H_
