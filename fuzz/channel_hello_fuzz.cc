// The agent channel's handshake reader: whatever bytes a (possibly dead)
// earlier connection left on the serial port, FindLine only ever returns
// the rest of a complete line with the prefix, without a line break, and
// consumes input, never grows it.
#include <cstddef>
#include <cstdint>
#include <string>

#include "common/channel_hello.h"
#include "fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string buf(reinterpret_cast<const char*>(data), size);
  for (const char* prefix : {airlock::kHelloPrefix, airlock::kOkPrefix}) {
    std::string b = buf;
    std::string rest;
    for (int i = 0; i < 64; ++i) {
      size_t before = b.size();
      bool found = airlock::FindLine(&b, prefix, &rest);
      FUZZ_CHECK(b.size() <= before);
      if (!found) break;
      FUZZ_CHECK(rest.find('\n') == std::string::npos);
      FUZZ_CHECK(buf.find(std::string(prefix) + rest) != std::string::npos);
    }
  }
  return 0;
}
