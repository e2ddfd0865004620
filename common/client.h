// Dialing an Airlock daemon and waiting for it to be healthy.
#ifndef AIRLOCK_COMMON_CLIENT_H_
#define AIRLOCK_COMMON_CLIENT_H_

#include <chrono>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"

namespace airlock {

// DialUnix returns a channel to the daemon serving on the Unix socket `path`.
std::shared_ptr<grpc::Channel> DialUnix(const std::string& path);

// CheckHealth asks grpc.health.v1 once; OK when the daemon is SERVING.
// With `wait_for_ready` the call waits (up to `timeout`) for the channel to
// connect instead of failing at once while it is reconnecting.
absl::Status CheckHealth(grpc::Channel& channel, std::chrono::milliseconds timeout,
                         bool wait_for_ready = false);

// WaitHealthy polls CheckHealth until it succeeds or `timeout` passes. It
// answers as soon as a daemon that (re)starts meanwhile serves.
absl::Status WaitHealthy(grpc::Channel& channel, std::chrono::milliseconds timeout);

// DeadlineAfter sets `ctx`'s deadline `d` from now.
void DeadlineAfter(grpc::ClientContext& ctx, std::chrono::milliseconds d);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CLIENT_H_
