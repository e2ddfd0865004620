// Carrying one forwarded TCP connection between an agent stream and a
// socket connected to 127.0.0.1:<port> inside the guest.
#ifndef AIRLOCK_GUEST_PORT_FORWARD_H_
#define AIRLOCK_GUEST_PORT_FORWARD_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::guest {

// ConnectLoopback connects to 127.0.0.1:port; UNAVAILABLE names the port
// when nothing listens.
absl::StatusOr<int> ConnectLoopback(uint32_t port);

// PumpSocket sends what the socket reads to `send` (data, then eof=true
// once) until the socket's read side ends. Returns when it has.
void PumpSocket(int fd, const std::function<bool(absl::string_view data, bool eof)>& send);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_PORT_FORWARD_H_
