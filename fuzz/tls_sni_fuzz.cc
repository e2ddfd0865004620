// The TLS ClientHello reader (the first bytes of an intercepted
// connection): any input either yields a server name without control
// characters, asks for more bytes, or is refused; and the protocol sniffers
// never crash.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "proxyd/wire.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  bool need_more = false;
  auto sni = airlock::proxyd::ParseClientHelloSni(input, &need_more);
  if (sni.ok()) {
    FUZZ_CHECK(!need_more);
    for (char c : *sni) FUZZ_CHECK(static_cast<unsigned char>(c) > 0x20 && c != 0x7f);
  }
  (void)airlock::proxyd::LooksLikeTls(input);
  (void)airlock::proxyd::LooksLikeHttp(input);
  (void)airlock::proxyd::IsRequestLine(input);
  return 0;
}
