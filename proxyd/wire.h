// The non-HTTP bytes proxyd must read before it can decide anything: the
// SNI of a TLS ClientHello, a first-bytes guess at the protocol of a new
// connection, and DNS queries and answers (RFC 1035 over UDP). Pure
// functions over bytes; every length is checked against the buffer and
// every loop is bounded, because all of this input comes from the guest.
#ifndef AIRLOCK_PROXYD_WIRE_H_
#define AIRLOCK_PROXYD_WIRE_H_

#include <array>
#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::proxyd {

// ParseClientHelloSni reads the ClientHello at the start of `data` (the
// first bytes a TLS client sent, possibly over several handshake records)
// and returns its server_name of type host_name, lower-cased without a
// trailing dot (checked by CanonicalHost), or "" when there is no SNI.
// When `data` ends before the ClientHello does, it sets *need_more and
// returns an error: read more and call again with all the bytes. Any other
// error (not a TLS handshake, not a ClientHello, a malformed or duplicated
// server_name) leaves *need_more false.
absl::StatusOr<std::string> ParseClientHelloSni(absl::string_view data, bool* need_more);

// LooksLikeTls is true when `first_bytes` (at least one) can begin a TLS
// handshake record: 0x16 0x03 followed by a minor version up to 0x04.
bool LooksLikeTls(absl::string_view first_bytes);

// LooksLikeHttp is true when `first_bytes` could begin an HTTP/1.x request
// to a lenient server: after any blank lines or spaces, a token character
// (a method of any case). Deliberately broad: what is routed to the HTTP
// path and is not a request gets a 400 there, while a real request that
// slipped past would reach the server undecided. Only whitespace so far
// counts as yes (more may follow).
bool LooksLikeHttp(absl::string_view first_bytes);

// IsRequestLine is true for "METHOD SP target SP HTTP/1.x" (a trailing CR
// allowed), the first line of any HTTP/1 request a server would serve.
bool IsRequestLine(absl::string_view line);

// DnsQuestion is a parsed DNS query.
struct DnsQuestion {
  uint16_t id = 0;
  // Lower case, no trailing dot; "" for the root.
  std::string name;
  uint16_t qtype = 0;
  uint16_t qclass = 0;
  bool recursion_desired = false;
  // The question name in wire form with its original case, so answers echo
  // it byte for byte (resolvers that randomize case check). Builders encode
  // `name` instead when this is empty.
  std::string wire_name;
};

// DNS types, classes and response codes proxyd uses.
inline constexpr uint16_t kDnsTypeA = 1;
inline constexpr uint16_t kDnsTypeAaaa = 28;
inline constexpr uint16_t kDnsClassIn = 1;
inline constexpr uint8_t kDnsNoError = 0;
inline constexpr uint8_t kDnsFormErr = 1;
inline constexpr uint8_t kDnsServFail = 2;
inline constexpr uint8_t kDnsNxDomain = 3;
inline constexpr uint8_t kDnsNotImp = 4;
inline constexpr uint8_t kDnsRefused = 5;

// ParseDnsQuery reads a standard query: QR=0, opcode 0, exactly one
// question, no answer or authority records (additional records such as
// EDNS OPT are allowed and ignored). Labels are at most 63 bytes of
// letters, digits, '-' and '_', the name at most 255 bytes in wire form.
// Compression pointers are followed only backwards and never into the
// header, so a crafted packet cannot loop or read out of bounds.
absl::StatusOr<DnsQuestion> ParseDnsQuery(absl::string_view packet);

// DnsAnswerA is the response to `q` with one A record for `ip`: the
// question echoed, the answer's name a compression pointer to it, RD copied
// and RA set.
std::string DnsAnswerA(const DnsQuestion& q, const std::array<uint8_t, 4>& ip, uint32_t ttl);

// DnsEmptyAnswer is the response to `q` with no answer records and
// `rcode` (low 4 bits): kDnsNoError for "no records of this type" (AAAA
// when only A is served), or kDnsNxDomain, kDnsRefused, kDnsFormErr, ...
std::string DnsEmptyAnswer(const DnsQuestion& q, uint8_t rcode);

// DnsFormatError is a FORMERR response (no question) for a packet that
// ParseDnsQuery refused, echoing its id. It is "" when there is no id to
// echo (under 2 bytes) or when the packet is itself a response (QR=1):
// answering responses would let two DNS speakers loop.
std::string DnsFormatError(absl::string_view packet);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_WIRE_H_
