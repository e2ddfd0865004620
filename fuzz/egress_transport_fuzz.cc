// The egress tunnel's wire form as proxyd or the agent reads it
// (common/egress_transport.h): whatever bytes the other side writes, Read
// never crashes, never takes more bytes than arrived, ends at a length
// over kEgressMaxMessage or bytes that do not parse, and every message it
// returns encodes back to the bytes it was read from (so nothing is read
// twice, skipped or re-framed).
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/egress_transport.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The first byte says how many of the rest were read with the hello
  // (pending); the socket carries what follows.
  if (size == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  size_t split = std::min<size_t>(data[0], bytes.size());
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) return 0;
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
    std::string again;
    FUZZ_CHECK(airlock::EncodeEgressMessage(m, &again));
    // Proto encodings are not unique (unknown fields, repeats), so the
    // length prefix is what must match: the bytes the message came from.
    FUZZ_CHECK(consumed + 4 <= stream.size());
    const auto* p = reinterpret_cast<const uint8_t*>(stream.data() + consumed);
    size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
    FUZZ_CHECK(n <= airlock::kEgressMaxMessage);
    consumed += 4 + n;
    FUZZ_CHECK(consumed <= stream.size());
    m.Clear();
  }
  FUZZ_CHECK(!t.error().empty());
  FUZZ_CHECK(!t.Read(&m));  // ended stays ended
  return 0;
}
