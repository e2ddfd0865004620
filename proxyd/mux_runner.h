// How proxyd runs a sandbox's egress mux: as a fiber on loop `loop` of
// `loops` (the loop of that sandbox's handlers and tunnel reader), its
// waits parked there, and a fiber of that loop waking it through a Waker
// (no system call); other threads wake it through its descriptor.
#ifndef AIRLOCK_PROXYD_MUX_RUNNER_H_
#define AIRLOCK_PROXYD_MUX_RUNNER_H_

#include <functional>
#include <memory>
#include <utility>

#include "common/egress_mux.h"
#include "proxyd/fibers.h"

namespace airlock::proxyd {

// `loops` must outlive the mux.
inline EgressMuxRunner MuxRunnerOn(FiberLoops* loops, size_t loop) {
  EgressMuxRunner runner;
  runner.start = [loops, loop](std::function<void()> fn) {
    return loops->SpawnOn(loop, std::move(fn));
  };
  auto waker = std::make_shared<Waker>();
  runner.wait = [waker](int fd, int timeout_ms) { waker->Wait(fd, timeout_ms); };
  runner.wake = [waker] { return waker->Wake(); };
  return runner;
}

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_MUX_RUNNER_H_
