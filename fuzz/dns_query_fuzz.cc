// DNS question parsing (packets from the guest): an accepted query's
// answers parse as responses of the same id and question, never as a
// query; a refused one gets at most a FORMERR that is never a query.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz/fuzz_check.h"
#include "proxyd/wire.h"

namespace p = airlock::proxyd;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string packet(reinterpret_cast<const char*>(data), size);
  auto q = p::ParseDnsQuery(packet);
  if (!q.ok()) {
    std::string err = p::DnsFormatError(packet);
    FUZZ_CHECK(err.empty() || (err.size() >= 12 && (static_cast<uint8_t>(err[2]) & 0x80)));
    FUZZ_CHECK(!p::ParseDnsQuery(err).ok());
    return 0;
  }
  FUZZ_CHECK(q->name.size() <= 255);
  for (const std::string& answer :
       {p::DnsAnswerA(*q, std::array<uint8_t, 4>{198, 18, 0, 1}, 60),
        p::DnsEmptyAnswer(*q, p::kDnsNxDomain)}) {
    FUZZ_CHECK(answer.size() >= 12);
    FUZZ_CHECK((static_cast<uint8_t>(answer[0]) << 8 | static_cast<uint8_t>(answer[1])) == q->id);
    FUZZ_CHECK(static_cast<uint8_t>(answer[2]) & 0x80);  // QR: a response
    FUZZ_CHECK(!p::ParseDnsQuery(answer).ok());          // so never taken for a query
  }
  return 0;
}
