// The HTTP/1.1 request front end: a head the parser accepts serializes to
// a head it accepts again, with the same fields, and never holds a line
// break inside a line; the target, path normalization and body framing of
// an accepted head never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "proxyd/http.h"

using airlock::proxyd::ParseRequestHead;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  (void)airlock::proxyd::FindHeadEnd(input);
  auto req = ParseRequestHead(input);
  if (!req.ok()) return 0;
  std::string wire = airlock::proxyd::SerializeRequestHead(*req);
  auto again = ParseRequestHead(wire);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(again->method == req->method);
  FUZZ_CHECK(again->target == req->target);
  FUZZ_CHECK(again->version == req->version);
  FUZZ_CHECK(again->headers.size() == req->headers.size());
  for (size_t i = 0; i < req->headers.size(); ++i) {
    FUZZ_CHECK(again->headers[i].name == req->headers[i].name);
    FUZZ_CHECK(again->headers[i].value == req->headers[i].value);
  }
  FUZZ_CHECK(airlock::proxyd::FindHeadEnd(wire) == wire.size());
  for (bool tls : {false, true}) {
    for (bool forward : {false, true}) {
      auto target = airlock::proxyd::ParseTarget(*req, tls, forward);
      if (target.ok()) {
        FUZZ_CHECK(target->host.find_first_of("\r\n ") == std::string::npos);
        (void)airlock::proxyd::HostHeaderValue(*target, tls);
        (void)airlock::proxyd::NormalizePath(target->path);
      }
    }
  }
  uint64_t length = 0;
  (void)airlock::proxyd::RequestBodyKind(*req, &length);
  return 0;
}
