#include "proxyd/wire.h"

#include <openssl/bio.h>
#include <openssl/ssl.h>

#include <random>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

std::string U16(size_t n) { return {static_cast<char>(n >> 8), static_cast<char>(n & 0xff)}; }
std::string U24(size_t n) {
  return absl::StrCat(std::string(1, static_cast<char>(n >> 16)), U16(n & 0xffff));
}

// SniExtension is a server_name extension with one entry per name.
std::string SniExtension(const std::vector<std::string>& names, uint8_t type = 0) {
  std::string list;
  for (const std::string& n : names)
    absl::StrAppend(&list, std::string(1, static_cast<char>(type)), U16(n.size()), n);
  std::string body = absl::StrCat(U16(list.size()), list);
  return absl::StrCat(U16(0), U16(body.size()), body);
}

// Hello is a TLS 1.2-style ClientHello handshake message; `extensions`
// null means the message has no extensions block at all.
std::string Hello(const std::string* extensions) {
  std::string body = absl::StrCat("\x03\x03", std::string(32, 'r'), std::string(1, '\0'), U16(4),
                                  "\x13\x01\xc0\x2f", "\x01", std::string(1, '\0'));
  if (extensions != nullptr) absl::StrAppend(&body, U16(extensions->size()), *extensions);
  return absl::StrCat("\x01", U24(body.size()), body);
}

std::string Record(absl::string_view handshake) {
  return absl::StrCat("\x16\x03\x01", U16(handshake.size()), handshake);
}

std::string HelloRecord(const std::string& extensions) { return Record(Hello(&extensions)); }

// OpenSslClientHello is the first flight of a real OpenSSL client.
std::string OpenSslClientHello(const char* sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  if (sni != nullptr) SSL_set_tlsext_host_name(ssl, sni);
  static const unsigned char kAlpn[] = "\x02h2\x08http/1.1";
  SSL_set_alpn_protos(ssl, kAlpn, sizeof(kAlpn) - 1);
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // Stops wanting the ServerHello.
  char* data = nullptr;
  long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, n > 0 ? n : 0);
  SSL_free(ssl);
  SSL_CTX_free(ctx);
  return out;
}

absl::StatusOr<std::string> Sni(absl::string_view data, bool* need_more) {
  return ParseClientHelloSni(data, need_more);
}

TEST(ClientHelloSniTest, RealOpenSslClientHello) {
  std::string hello = OpenSslClientHello("Api.Example.COM");
  ASSERT_GT(hello.size(), 100u);
  EXPECT_TRUE(LooksLikeTls(hello));
  EXPECT_FALSE(LooksLikeHttp(hello));
  bool need_more = true;
  auto sni = Sni(hello, &need_more);
  ASSERT_TRUE(sni.ok()) << sni.status();
  EXPECT_EQ(*sni, "api.example.com");
  EXPECT_FALSE(need_more);

  auto none = Sni(OpenSslClientHello(nullptr), &need_more);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(*none, "");
}

TEST(ClientHelloSniTest, EveryPrefixNeedsMore) {
  std::string hello = OpenSslClientHello("api.example.com");
  for (size_t n = 0; n < hello.size(); ++n) {
    bool need_more = false;
    auto sni = Sni(hello.substr(0, n), &need_more);
    ASSERT_FALSE(sni.ok()) << "prefix " << n;
    ASSERT_TRUE(need_more) << "prefix " << n << ": " << sni.status();
  }
  // Bytes after the ClientHello (early data, say) do not matter.
  bool need_more = true;
  EXPECT_EQ(*Sni(hello + "\x17\x03\x03junk", &need_more), "api.example.com");
}

TEST(ClientHelloSniTest, ReassemblesAHelloSplitAcrossRecords) {
  std::string hello = OpenSslClientHello("split.example.com");
  std::string handshake = hello.substr(5);
  std::string split;
  for (size_t at = 0; at < handshake.size(); at += 7) split += Record(handshake.substr(at, 7));
  bool need_more = true;
  auto sni = Sni(split, &need_more);
  ASSERT_TRUE(sni.ok()) << sni.status();
  EXPECT_EQ(*sni, "split.example.com");
  auto partial = Sni(split.substr(0, split.size() - 1), &need_more);
  EXPECT_FALSE(partial.ok());
  EXPECT_TRUE(need_more);
}

TEST(ClientHelloSniTest, HandBuiltHellos) {
  bool need_more = true;
  // Other extensions before and after the SNI are skipped.
  std::string ext = absl::StrCat(U16(0x000a), U16(4), U16(2), U16(0x001d),
                                 SniExtension({"Host.Example.ORG."}), U16(0x0010), U16(0));
  EXPECT_EQ(*Sni(HelloRecord(ext), &need_more), "host.example.org");
  EXPECT_EQ(*Sni(Record(Hello(nullptr)), &need_more), "");
  EXPECT_EQ(*Sni(HelloRecord(""), &need_more), "");
  // An entry of another name type is not a host name.
  EXPECT_EQ(*Sni(HelloRecord(SniExtension({"x"}, 7)), &need_more), "");
  EXPECT_FALSE(need_more);
}

TEST(ClientHelloSniTest, Errors) {
  struct Case {
    std::string data;
    const char* why;
  } cases[] = {
      {"GET / HTTP/1.1\r\n", "not a TLS handshake record"},
      {std::string("\x17\x03\x03\x00\x01x", 6), "not a TLS handshake record"},
      {std::string("\x16\x02\x00", 3), "version major is 0x02"},
      {std::string("\x16\x03\x01\x00\x00", 5), "record length is 0"},
      {std::string("\x16\x03\x01\x40\x01", 5), "record length is 16385"},
      {Record(absl::StrCat("\x02", U24(2), "ab")), "not ClientHello"},
      {Record(absl::StrCat("\x01", U24(0x20000))), "claims"},
      {Record(absl::StrCat("\x01", U24(3), "\x03\x03x")), "truncated before the extensions"},
      {HelloRecord(SniExtension({"a.com"}) + SniExtension({"b.com"})), "appears twice"},
      {HelloRecord(SniExtension({"a.com", "b.com"})), "more than one host_name"},
      {HelloRecord(SniExtension({""})), "host_name is empty"},
      {HelloRecord(SniExtension({std::string("evil.com\x00.good.com", 18)})), "server_name: host"},
      {HelloRecord(SniExtension({"127.1"})), "dotted-quad"},
      {HelloRecord(absl::StrCat(U16(0), U16(2), U16(0))), "list length"},
      {HelloRecord(absl::StrCat(U16(0), U16(3), U16(1), std::string(1, '\0'))),
       "entry is truncated"},
      {HelloRecord(absl::StrCat(U16(0x10), U16(9))), "extension is truncated"},
  };
  // A ClientHello whose extensions length overstates what follows.
  std::string bad_len = Hello(nullptr);
  bad_len += U16(10);
  bad_len[3] = static_cast<char>(bad_len.size() - 4);
  for (const auto& c : cases) {
    bool need_more = true;
    auto sni = Sni(c.data, &need_more);
    ASSERT_FALSE(sni.ok()) << "accepted: " << absl::CEscape(c.data);
    EXPECT_FALSE(need_more) << absl::CEscape(c.data) << ": " << sni.status();
    EXPECT_NE(sni.status().message().find(c.why), absl::string_view::npos)
        << absl::CEscape(c.data) << ": " << sni.status();
  }
  bool need_more = true;
  auto sni = Sni(Record(bad_len), &need_more);
  ASSERT_FALSE(sni.ok());
  EXPECT_NE(sni.status().message().find("extensions length"), absl::string_view::npos)
      << sni.status();
  // A split hello whose second record is not a handshake.
  std::string hs = Hello(nullptr);
  sni = Sni(Record(hs.substr(0, 10)) + std::string("\x17\x03\x03\x00\x05hello", 10), &need_more);
  ASSERT_FALSE(sni.ok());
  EXPECT_FALSE(need_more);
}

// Random damage to a real hello must give an answer, never a crash or hang.
TEST(ClientHelloSniTest, SurvivesCorruption) {
  std::string hello = OpenSslClientHello("fuzz.example.com");
  std::mt19937 rng(42);
  for (int i = 0; i < 20000; ++i) {
    std::string data = hello;
    int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) data[rng() % data.size()] = static_cast<char>(rng());
    data.resize(rng() % (data.size() + 1));
    bool need_more = false;
    auto sni = Sni(data, &need_more);
    if (sni.ok()) {
      EXPECT_FALSE(need_more);
    }
  }
}

TEST(SniffTest, LooksLikeTlsOrHttp) {
  EXPECT_TRUE(LooksLikeTls("\x16"));
  EXPECT_TRUE(LooksLikeTls("\x16\x03"));
  EXPECT_TRUE(LooksLikeTls("\x16\x03\x01\x02\x00"));
  EXPECT_FALSE(LooksLikeTls(""));
  EXPECT_FALSE(LooksLikeTls("\x16\x02"));
  EXPECT_FALSE(LooksLikeTls("\x16\x03\x07"));
  EXPECT_FALSE(LooksLikeTls("GET / HTTP/1.1"));
  EXPECT_FALSE(LooksLikeTls(std::string("\x00\x16", 2)));

  for (const char* yes : {"G", "GE", "GET", "GET ", "GET / HTTP/1.1\r\n", "POST /", "PUT ",
                          "DELETE ", "HEAD ", "OPTIONS * HTTP/1.1", "PATCH ",
                          "CONNECT a:443 HTTP/1.1", "TRACE ", "PROPFIND ", "M-SEARCH * HTTP/1.1"}) {
    EXPECT_TRUE(LooksLikeHttp(yes)) << yes;
  }
  // Lenient servers take these as requests too, so they go to the strict
  // HTTP path rather than through a tunnel undecided.
  for (const char* yes : {"\r\nDELETE /x HTTP/1.1", " GET", "get / HTTP/1.1", "G3T /",
                          "SSH-2.0-OpenSSH", "\r\n"}) {
    EXPECT_TRUE(LooksLikeHttp(yes)) << absl::CEscape(yes);
  }
  for (const char* no : {"", "\x16\x03\x01", "\x00\x01", "\xff\xfe"}) {
    EXPECT_FALSE(LooksLikeHttp(no)) << absl::CEscape(no);
  }
}

// Query builds a DNS query packet by hand.
std::string Query(uint16_t id, uint16_t flags, const std::string& name_wire, uint16_t qtype,
                  uint16_t qd = 1, uint16_t an = 0, uint16_t ar = 0) {
  return absl::StrCat(U16(id), U16(flags), U16(qd), U16(an), U16(0), U16(ar), name_wire, U16(qtype),
                      U16(kDnsClassIn));
}

const std::string kWwwExample(
    "\x03WwW\x07"
    "Example\x03"
    "com\x00",
    17);

TEST(DnsTest, QueryAnswerRoundTrip) {
  std::string packet = Query(0xbeef, 0x0100, kWwwExample, kDnsTypeA);
  auto q = ParseDnsQuery(packet);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->id, 0xbeef);
  EXPECT_EQ(q->name, "www.example.com");
  EXPECT_EQ(q->qtype, kDnsTypeA);
  EXPECT_EQ(q->qclass, kDnsClassIn);
  EXPECT_TRUE(q->recursion_desired);
  EXPECT_EQ(q->wire_name, kWwwExample);

  std::string answer = DnsAnswerA(*q, {93, 184, 216, 34}, 300);
  // The header and question of the query, with QR, RD, RA and ANCOUNT=1.
  std::string expected = packet;
  expected[2] = '\x81';
  expected[3] = '\x80';
  expected[7] = 1;
  // The answer: a pointer to offset 12, type A, class IN, TTL 300, 4 bytes.
  expected += std::string("\xc0\x0c\x00\x01\x00\x01\x00\x00\x01\x2c\x00\x04\x5d\xb8\xd8\x22", 16);
  EXPECT_EQ(absl::BytesToHexString(answer), absl::BytesToHexString(expected));
  EXPECT_EQ(answer.substr(6, 2), std::string("\x00\x01", 2));  // ANCOUNT
  EXPECT_EQ(answer.substr(answer.size() - 4), "\x5d\xb8\xd8\x22");

  // What the answer's name pointer points at reads back as the question.
  auto again = ParseDnsQuery(packet);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(answer.substr(12, kWwwExample.size()), again->wire_name);
}

TEST(DnsTest, EmptyAnswersAndRcodes) {
  std::string packet = Query(7, 0x0000, kWwwExample, kDnsTypeAaaa);
  DnsQuestion q = *ParseDnsQuery(packet);
  EXPECT_FALSE(q.recursion_desired);
  std::string nodata = DnsEmptyAnswer(q, kDnsNoError);
  EXPECT_EQ(nodata.size(), packet.size());
  EXPECT_EQ(nodata.substr(0, 8), std::string("\x00\x07\x80\x80\x00\x01\x00\x00", 8));
  EXPECT_EQ(nodata.substr(12), packet.substr(12));
  EXPECT_EQ(static_cast<uint8_t>(DnsEmptyAnswer(q, kDnsNxDomain)[3]), 0x83);
  EXPECT_EQ(static_cast<uint8_t>(DnsEmptyAnswer(q, kDnsRefused)[3]), 0x85);
  EXPECT_EQ(static_cast<uint8_t>(DnsEmptyAnswer(q, kDnsFormErr)[3]), 0x81);

  // A question built by hand (no wire_name) is encoded from its name.
  DnsQuestion made;
  made.id = 1;
  made.name = "a.bc";
  made.qtype = kDnsTypeA;
  made.qclass = kDnsClassIn;
  EXPECT_EQ(DnsEmptyAnswer(made, kDnsNoError).substr(12), absl::StrCat(std::string("\x01"
                                                                                   "a\x02"
                                                                                   "bc\x00",
                                                                                   6),
                                                                       U16(1), U16(1)));
  made.name = "";
  EXPECT_EQ(DnsEmptyAnswer(made, kDnsNoError).substr(12),
            absl::StrCat(std::string(1, '\0'), U16(1), U16(1)));
}

TEST(DnsTest, AcceptsEdnsRootAndUnderscores) {
  std::string opt =
      absl::StrCat(std::string(1, '\0'), U16(41), U16(1232), std::string(4, '\0'), U16(0));
  auto q = ParseDnsQuery(Query(1, 0x0120, kWwwExample, kDnsTypeA, 1, 0, 1) + opt);
  ASSERT_TRUE(q.ok()) << q.status();
  EXPECT_EQ(q->name, "www.example.com");
  auto root = ParseDnsQuery(Query(2, 0, std::string(1, '\0'), 2));
  ASSERT_TRUE(root.ok()) << root.status();
  EXPECT_EQ(root->name, "");
  auto srv = ParseDnsQuery(Query(3, 0, std::string("\x05_http\x04_tcp\x01x\x00", 14), 33));
  ASSERT_TRUE(srv.ok()) << srv.status();
  EXPECT_EQ(srv->name, "_http._tcp.x");
}

TEST(DnsTest, MalformedQueries) {
  std::string label63 = absl::StrCat(std::string(1, 63), std::string(63, 'a'));
  std::string long_name;
  for (int i = 0; i < 4; ++i) long_name += label63;  // 256 bytes with the root.
  std::string ok_name = label63 + label63 + label63 + std::string(1, 61) + std::string(61, 'b');
  ASSERT_TRUE(ParseDnsQuery(Query(1, 0, ok_name + std::string(1, '\0'), 1)).ok());  // 255 bytes.
  struct Case {
    std::string packet;
    const char* why;
  } cases[] = {
      {"", "shorter than a header"},
      {std::string("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00", 11), "shorter than a header"},
      {Query(1, 0x8180, kWwwExample, 1), "response (QR=1)"},
      {Query(1, 0x1000, kWwwExample, 1), "opcode is 2"},
      {Query(1, 0x2800, kWwwExample, 1), "opcode is 5"},
      {Query(1, 0, kWwwExample, 1, 0), "0 questions"},
      {Query(1, 0, kWwwExample, 1, 2), "2 questions"},
      {Query(1, 0, kWwwExample, 1, 1, 1), "answer or authority"},
      {Query(1, 0, long_name + std::string(1, '\0'), 1), "longer than 255"},
      {Query(1, 0, absl::StrCat(std::string(1, 64), std::string(64, 'a'), std::string(1, '\0')), 1),
       "reserved label type"},
      {Query(1, 0,
             std::string("\x80"
                         "abc\x00",
                         5),
             1),
       "reserved label type"},
      {Query(1, 0,
             std::string("\x03"
                         "a.b\x00",
                         5),
             1),
       "letters, digits"},
      {Query(1, 0,
             std::string("\x03"
                         "a\x00"
                         "b\x00",
                         5),
             1),
       "letters, digits"},
      {Query(1, 0,
             std::string("\x03"
                         "a b\x00",
                         5),
             1),
       "letters, digits"},
      {Query(1, 0, kWwwExample, 1) + "x", "bytes follow the question"},
      {Query(1, 0, kWwwExample, 1).substr(0, 12 + 17 + 3), "question is truncated"},
      {Query(1, 0, kWwwExample, 1).substr(0, 12 + 10), "past the end"},
      {Query(1, 0, kWwwExample, 1).substr(0, 12 + 4), "past the end"},
      {Query(1, 0, "", 1).substr(0, 12), "past the end"},
      // Compression pointers: to itself, into the header, forwards, and a
      // label followed by a pointer back to that label (a loop).
      {Query(1, 0, "\xc0\x0c", 1), "does not point backwards"},
      {Query(1, 0, std::string("\xc0\x00", 2), 1), "into the header"},
      {Query(1, 0, "\xc0\x0b", 1), "into the header"},
      {Query(1, 0, "\xc0\x20", 1), "does not point backwards"},
      {Query(1, 0,
             "\x01"
             "a\xc0\x0c",
             1),
       "does not point backwards"},
      {Query(1, 0,
             "\x01"
             "a\xc0\x0e",
             1),
       "does not point backwards"},
      {Query(1, 0,
             "\x01"
             "a\xc0",
             1)
           .substr(0, 15),
       "pointer is truncated"},
  };
  for (const auto& c : cases) {
    auto q = ParseDnsQuery(c.packet);
    ASSERT_FALSE(q.ok()) << "accepted: " << absl::CEscape(c.packet);
    EXPECT_NE(q.status().message().find(c.why), absl::string_view::npos)
        << absl::CEscape(c.packet) << ": " << q.status();
  }
}

// Random packets, heavy in pointer bytes, must all terminate in bounds.
TEST(DnsTest, SurvivesRandomPackets) {
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    std::string packet = Query(1, 0, "", 1).substr(0, 12);
    int n = static_cast<int>(rng() % 64);
    for (int j = 0; j < n; ++j) {
      uint32_t r = rng();
      packet.push_back(static_cast<char>(r % 4 == 0 ? 0xc0 : r % 4 == 1 ? (r >> 8) % 40 : r >> 8));
    }
    auto q = ParseDnsQuery(packet);
    if (q.ok()) {
      EXPECT_LE(q->wire_name.size(), 255u);
    }
  }
}

TEST(DnsTest, FormatError) {
  EXPECT_EQ(DnsFormatError(""), "");
  EXPECT_EQ(DnsFormatError("\x12"), "");
  EXPECT_EQ(DnsFormatError(std::string("\x12\x34\x81\x80", 4)), "");  // A response: never answered.
  std::string reply = DnsFormatError("\x12\x34");
  EXPECT_EQ(reply, std::string("\x12\x34\x80\x81\x00\x00\x00\x00\x00\x00\x00\x00", 12));
  reply = DnsFormatError(std::string("\xab\xcd\x01\x00\x00\x01garbage", 13));
  EXPECT_EQ(reply, std::string("\xab\xcd\x81\x81\x00\x00\x00\x00\x00\x00\x00\x00", 12));
}

TEST(WireTest, IsRequestLine) {
  for (const char* yes : {"GET / HTTP/1.1", "DELETE /repos/a HTTP/1.0\r", "get /x HTTP/1.1",
                          "M-SEARCH * HTTP/1.1"}) {
    EXPECT_TRUE(IsRequestLine(yes)) << yes;
  }
  for (const char* no : {"SSH-2.0-OpenSSH_9.2\r", "GET /", "GET / HTTP/2", "PING", "",
                         " GET / HTTP/1.1", "G@T / HTTP/1.1"}) {
    EXPECT_FALSE(IsRequestLine(no)) << no;
  }
}

}  // namespace
}  // namespace airlock::proxyd
