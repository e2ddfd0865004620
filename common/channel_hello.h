// The handshake that starts every connection on a sandbox's agent channel.
//
// A virtio-serial port is one byte stream across all of vmmd's connections,
// and the guest cannot always see a quick disconnect and reconnect. So each
// new connection begins with a line "AIRLOCK-HELLO <nonce>" from vmmd; the
// agent answers "AIRLOCK-OK <nonce>" and only then starts a fresh gRPC
// transport. Bytes of a dead connection are never taken for the start of a
// new one.
#ifndef AIRLOCK_COMMON_CHANNEL_HELLO_H_
#define AIRLOCK_COMMON_CHANNEL_HELLO_H_

#include <string>

#include "absl/strings/string_view.h"

namespace airlock {

inline constexpr char kHelloPrefix[] = "AIRLOCK-HELLO ";
inline constexpr char kOkPrefix[] = "AIRLOCK-OK ";

// FindLine looks in `buf` for a complete line starting with `prefix` and
// returns its rest (without the newline), consuming everything up to and
// including that line. Returns false (consuming any complete lines that do
// not match) when there is none yet.
bool FindLine(std::string* buf, absl::string_view prefix, std::string* rest);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CHANNEL_HELLO_H_
