// The HTTP/1.1 response front end: an accepted head round-trips through
// serialization, and its body framing never crashes for any method.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "proxyd/http.h"

using airlock::proxyd::ParseResponseHead;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  auto resp = ParseResponseHead(input);
  if (!resp.ok()) return 0;
  std::string wire = airlock::proxyd::SerializeResponseHead(*resp);
  auto again = ParseResponseHead(wire);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->status == resp->status);
  FUZZ_CHECK(again->version == resp->version);
  FUZZ_CHECK(again->headers.size() == resp->headers.size());
  for (const char* method : {"GET", "HEAD", "CONNECT", "POST"}) {
    uint64_t length = 0;
    (void)airlock::proxyd::ResponseBodyKind(*resp, method, &length);
  }
  return 0;
}
