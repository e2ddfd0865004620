#include "common/client.h"

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/peer.h"
#include "common/status.h"
#include "protos/grpc/health/v1/health.grpc.pb.h"

namespace airlock {

std::shared_ptr<grpc::Channel> DialUnix(const std::string& path) {
  return Peer::Unix(path).Dial();
}

void DeadlineAfter(grpc::ClientContext& ctx, std::chrono::milliseconds d) {
  ctx.set_deadline(std::chrono::system_clock::now() + d);
}

absl::Status CheckHealth(grpc::Channel& channel, std::chrono::milliseconds timeout,
                         bool wait_for_ready) {
  auto stub = grpc::health::v1::Health::NewStub(
      std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, timeout);
  ctx.set_wait_for_ready(wait_for_ready);
  grpc::health::v1::HealthCheckRequest req;
  grpc::health::v1::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, req, &resp);
  if (!s.ok()) return FromGrpc(s);
  if (resp.status() != grpc::health::v1::HealthCheckResponse::SERVING) {
    return absl::UnavailableError("daemon answers but is not serving");
  }
  return absl::OkStatus();
}

absl::Status WaitHealthy(grpc::Channel& channel, std::chrono::milliseconds timeout) {
  auto end = std::chrono::steady_clock::now() + timeout;
  absl::Status last = absl::DeadlineExceededError("no answer");
  while (std::chrono::steady_clock::now() < end) {
    // Wait for ready: a call stays in flight while the channel connects.
    // Fail-fast calls end at once while the channel is reconnecting, and
    // with no call waiting, the client did not read a daemon's handshake
    // before the attempt timed out: a daemon restarted after a crash was
    // seen some 5 s after it served (tests/daemon_restart_test).
    last = CheckHealth(channel, std::chrono::milliseconds(500), /*wait_for_ready=*/true);
    if (last.ok()) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return last;
}

}  // namespace airlock
