// A host daemon's connection to one of a sandbox's agent ports (vmmd's agent
// port, proxyd's egress port): a Unix socket to the
// hypervisor's end of the virtio-serial port, opened with the hello
// handshake (common/channel_hello.h) and handed to gRPC as a channel of its own. When
// that connection breaks, the next call makes a new one; gRPC never
// reconnects behind our back, which the byte stream could not tell apart.
#ifndef AIRLOCK_COMMON_AGENT_LINK_H_
#define AIRLOCK_COMMON_AGENT_LINK_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"

namespace airlock {

class AgentLink {
 public:
  explicit AgentLink(std::string socket_path) : socket_path_(std::move(socket_path)) {}

  // Channel returns the connected channel, connecting first when there is
  // none (at first use, or after Reset).
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Channel(std::chrono::milliseconds timeout);

  // Reset drops the current connection (after a call saw it broken).
  void Reset();

 private:
  absl::StatusOr<std::shared_ptr<grpc::Channel>> Connect(std::chrono::milliseconds timeout);

  std::string socket_path_;
  std::mutex mu_;
  std::shared_ptr<grpc::Channel> channel_;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_AGENT_LINK_H_
