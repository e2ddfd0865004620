// The agent's end of a sandbox channel: a virtio-serial port carrying one
// host connection at a time, gRPC from vmmd (ServePort) or the egress
// tunnel from proxyd (ServeRawPort).
#ifndef AIRLOCK_GUEST_CHANNEL_H_
#define AIRLOCK_GUEST_CHANNEL_H_

#include <cstddef>
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

// A host that heard no answer in time says hello again (AgentLink), so
// the first answer it reads may be to an earlier hello, and later hellos
// can reach the port before its stream begins. DropLeadingHellos removes
// complete hello lines from the start of `buf`: true when what is left
// starts the host's stream, false while `buf` may still be the start of
// another hello (at most kMaxHelloLine bytes are waited for).
inline constexpr size_t kMaxHelloLine = 256;
bool DropLeadingHellos(std::string* buf);

// ServePort never returns: it bridges `device` to `server` through a
// socketpair per host connection. Each connection starts with the hello
// handshake (common/channel_hello.h), and the hellos said again before the
// stream are dropped (DropLeadingHellos); when vmmd hangs up, or the gRPC transport ends, the
// agent waits for the next hello, so every connection gets a clean HTTP/2
// stream. `on_ready` runs once the port is open.
[[noreturn]] void ServePort(grpc::Server* server, const std::string& device,
                            const std::function<void()>& on_ready);

// ServeRawPort never returns: for each host connection on `device` (after
// the same hello) it calls `serve` with a descriptor of the port (serve
// closes it) and the bytes read past the hello, and waits for the next
// connection when serve returns.
[[noreturn]] void ServeRawPort(const std::string& device,
                               const std::function<void(int fd, std::string pending)>& serve);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_CHANNEL_H_
