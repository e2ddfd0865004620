#include "guest/grpc_clock.h"

#include <grpc/grpc.h>
#include <grpc/support/time.h>

// gRPC's clock, a C symbol of Debian's libgpr 1.51 (grpc_clock.h).
extern "C" gpr_timespec (*gpr_now_impl)(gpr_clock_type);

namespace airlock::guest {
namespace {

gpr_timespec (*grpc_clock)(gpr_clock_type) = nullptr;

gpr_timespec MonotonicFromFiveSeconds(gpr_clock_type type) {
  gpr_timespec t = grpc_clock(type);
  if (type == GPR_CLOCK_MONOTONIC) t.tv_sec += 5;
  return t;
}

}  // namespace

void InitGrpc() {
  if (grpc_clock == nullptr) {
    grpc_clock = gpr_now_impl;
    gpr_now_impl = MonotonicFromFiveSeconds;
  }
  grpc_init();
}

}  // namespace airlock::guest
