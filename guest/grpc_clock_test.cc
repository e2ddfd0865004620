#include "guest/grpc_clock.h"

#include <grpc/support/time.h>
#include <time.h>

#include <cstdlib>

#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

TEST(InitGrpcTest, GrpcsMonotonicClockRunsFiveSecondsAheadAndNothingElseMoves) {
  InitGrpc();
  InitGrpc();  // a second call changes nothing
  struct timespec before, after;
  clock_gettime(CLOCK_MONOTONIC, &before);
  gpr_timespec grpc = gpr_now(GPR_CLOCK_MONOTONIC);
  clock_gettime(CLOCK_MONOTONIC, &after);
  EXPECT_GE(grpc.tv_sec, before.tv_sec + 5);
  EXPECT_LE(grpc.tv_sec, after.tv_sec + 5);
  // Wall time is gRPC's own, unmoved.
  gpr_timespec wall = gpr_now(GPR_CLOCK_REALTIME);
  EXPECT_LE(std::llabs(wall.tv_sec - time(nullptr)), 1);
}

}  // namespace
}  // namespace airlock::guest
