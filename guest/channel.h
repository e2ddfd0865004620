// The agent's end of the sandbox channel: a virtio-serial port carrying one
// gRPC connection from vmmd at a time.
#ifndef AIRLOCK_GUEST_CHANNEL_H_
#define AIRLOCK_GUEST_CHANNEL_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace grpc {
class Server;
}

namespace airlock::guest {

// FindVirtioPort returns /dev/<vportNpM> of the port called `name`
// (/sys/class/virtio-ports/*/name; there is no udev in the guest).
absl::StatusOr<std::string> FindVirtioPort(const std::string& name);

// ServePort never returns: it bridges `device` to `server` through a
// socketpair per host connection. Each connection starts with the hello
// handshake (common/channel_hello.h); when vmmd hangs up, or the gRPC transport ends, the
// agent waits for the next hello, so every connection gets a clean HTTP/2
// stream. `on_ready` runs once the port is open.
[[noreturn]] void ServePort(grpc::Server* server, const std::string& device,
                            const std::function<void()>& on_ready);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_CHANNEL_H_
