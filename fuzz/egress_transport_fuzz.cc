// The egress tunnel's wire form as proxyd or the agent reads it
// (common/egress_transport.h): whatever bytes the other side writes, Read
// never crashes, takes messages exactly as they are framed (each one it
// returns is the message its length prefix delimits, in order, none
// skipped), ends at a length over kEgressMaxMessage, at too many frames or
// at bytes that do not parse, and never returns a message while a whole
// one it could not use is pending.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/egress_transport.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Written before anything reads: it must fit the socket's buffer.
  if (size == 0 || size > 64 * 1024) return 0;
  // The first byte says how many of the rest were read with the hello
  // (pending); the socket carries what follows.
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t split = std::min<size_t>(data[0], bytes.size());
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return 0;
  int big = 256 * 1024;
  setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  std::string rest = bytes.substr(split);
  size_t off = 0;
  while (off < rest.size()) {
    ssize_t n = write(sp[1], rest.data() + off, rest.size() - off);
    if (n <= 0) break;
    off += static_cast<size_t>(n);
  }
  close(sp[1]);  // the peer's end: Read sees the end after the bytes
  airlock::EgressTransport t(sp[0], bytes.substr(0, split));
  std::string stream = bytes.substr(0, split) + rest.substr(0, off);
  size_t consumed = 0;
  airlock::agent::v1::EgressFrames m;
  while (t.Read(&m)) {
    FUZZ_CHECK(consumed + 4 <= stream.size());
    const auto* p = reinterpret_cast<const uint8_t*>(stream.data() + consumed);
    size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    FUZZ_CHECK(n <= airlock::kEgressMaxMessage);
    FUZZ_CHECK(consumed + 4 + n <= stream.size());
    // The same bytes parsed here give the same message.
    airlock::agent::v1::EgressFrames expected;
    FUZZ_CHECK(expected.ParseFromArray(stream.data() + consumed + 4, static_cast<int>(n)));
    FUZZ_CHECK(expected.SerializeAsString() == m.SerializeAsString());
    FUZZ_CHECK(m.frames_size() <= airlock::kEgressMaxFramesPerMessage);
    consumed += 4 + n;
    m.Clear();
  }
  FUZZ_CHECK(!t.error().empty());
  if (t.error() == "the peer closed the tunnel") {
    // It ended at the end of the bytes: what is left is not a whole message.
    size_t left = stream.size() - consumed;
    if (left >= 4) {
      const auto* p = reinterpret_cast<const uint8_t*>(stream.data() + consumed);
      size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
      FUZZ_CHECK(left < 4 + n);
    }
  }
  FUZZ_CHECK(!t.Read(&m));  // ended stays ended
  return 0;
}
