#include "proxyd/http.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

// ExpectError checks that `result` failed with `why` in its message.
template <typename T>
void ExpectError(const absl::StatusOr<T>& result, absl::string_view why, absl::string_view input) {
  ASSERT_FALSE(result.ok()) << "accepted: " << input;
  EXPECT_NE(result.status().message().find(why), absl::string_view::npos)
      << "input: " << input << "\nerror: " << result.status();
}

TEST(FindHeadEndTest, CompleteIncompleteAndBareLf) {
  EXPECT_EQ(FindHeadEnd(""), 0u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n"), 0u);
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\r\nHost: a\r\n\r"), 0u);
  std::string head = "GET / HTTP/1.1\r\nHost: a\r\n\r\n";
  EXPECT_EQ(FindHeadEnd(head), head.size());
  EXPECT_EQ(FindHeadEnd(head + "GET /next HTTP/1.1\r\n"), head.size());
  EXPECT_EQ(FindHeadEnd("GET / HTTP/1.1\nHost: a\n\nbody"), 24u);
}

TEST(ParseRequestHeadTest, ParsesLineAndHeaders) {
  auto req = ParseRequestHead(
      "POST /v1/messages?x=1 HTTP/1.1\r\nHost: api.example.com\r\n"
      "Content-Length:  5 \r\nX-Empty:\r\nAccept: a\r\naccept: b\r\n\r\n");
  ASSERT_TRUE(req.ok()) << req.status();
  EXPECT_EQ(req->method, "POST");
  EXPECT_EQ(req->target, "/v1/messages?x=1");
  EXPECT_EQ(req->version, "HTTP/1.1");
  ASSERT_EQ(req->headers.size(), 5u);
  EXPECT_EQ(req->headers[1].name, "Content-Length");
  EXPECT_EQ(req->headers[1].value, "5");
  EXPECT_EQ(req->Get("content-length"), "5");
  EXPECT_EQ(req->Get("ACCEPT"), "a");
  EXPECT_EQ(req->Get("x-empty"), "");
  EXPECT_EQ(req->Get("missing"), "");

  // Bare LF line endings and no final blank line are accepted too.
  auto lf = ParseRequestHead("GET / HTTP/1.0\nHost: h\n");
  ASSERT_TRUE(lf.ok()) << lf.status();
  EXPECT_EQ(lf->Get("host"), "h");
}

TEST(ParseRequestHeadTest, SetAndRemoveKeepOrder) {
  RequestHead req = *ParseRequestHead("GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nb: 3\r\nC: 4\r\n\r\n");
  req.Set("b", "x");
  ASSERT_EQ(req.headers.size(), 3u);
  EXPECT_EQ(req.headers[1].name, "b");
  EXPECT_EQ(req.headers[1].value, "x");
  EXPECT_EQ(req.headers[2].name, "C");
  req.Set("D", "new");
  EXPECT_EQ(req.headers.back().name, "D");
  req.Set(req.headers[0].name, "self");  // A name viewing the header it replaces.
  EXPECT_EQ(req.headers[0].name, "A");
  EXPECT_EQ(req.headers[0].value, "self");
  req.Remove(req.headers[0].name);
  EXPECT_EQ(req.Get("a"), "");
  req.Remove("a");
  req.Remove("nothing");
  ASSERT_EQ(req.headers.size(), 3u);
  EXPECT_EQ(req.headers[0].name, "b");
  ResponseHead resp;
  resp.headers = {{"X", "1"}, {"x", "2"}};
  resp.Set("X", "3");
  ASSERT_EQ(resp.headers.size(), 1u);
  EXPECT_EQ(resp.Get("x"), "3");
  resp.Remove("X");
  EXPECT_TRUE(resp.headers.empty());
}

TEST(ParseRequestHeadTest, MalformedHeadsSayWhatIsWrong) {
  struct Case {
    const char* head;
    const char* why;
  } cases[] = {
      {"", "request line is empty"},
      {"\r\nGET / HTTP/1.1\r\n\r\n", "request line is empty"},
      {"GET /\r\n\r\n", "request line"},
      {"GET  / HTTP/1.1\r\n\r\n", "single spaces"},
      {"GET / HTTP/1.1 \r\n\r\n", "single spaces"},
      {"G(T / HTTP/1.1\r\n\r\n", "method that is not a token"},
      {"GET /a\x01 HTTP/1.1\r\n\r\n", "control"},
      {"GET / HTTP/2.0\r\n\r\n", "only HTTP/1.0 and HTTP/1.1"},
      {"GET / http/1.1\r\n\r\n", "only HTTP/1.0 and HTTP/1.1"},
      {"GET / HTTP/1.1\r\nHost h\r\n\r\n", "header line 1 (\"Host h\") has no colon"},
      {"GET / HTTP/1.1\r\nA: 1\r\nX-Foo: a\r\n bar\r\n\r\n", "header line 3"},
      {"GET / HTTP/1.1\r\nX-Foo: a\r\n\tbar\r\n\r\n", "obs-fold"},
      {"GET / HTTP/1.1\r\nHost : h\r\n\r\n", "whitespace before the colon"},
      {"GET / HTTP/1.1\r\nHo(st: h\r\n\r\n", "not a token"},
      {"GET / HTTP/1.1\r\n: h\r\n\r\n", "empty name"},
      {"GET / HTTP/1.1\r\nX: a\x01z\r\n\r\n", "control character in its value"},
      {"GET / HTTP/1.1\r\nX: a\rz\r\n\r\n", "control character in its value"},
      {"GET / HTTP/1.1\r\nX: a\x7f\r\n\r\n", "control character in its value"},
      {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", "more than one Host"},
      {"GET / HTTP/1.1\r\nHost: a\r\n\r\nextra", "data after the blank line"},
  };
  for (const auto& c : cases) ExpectError(ParseRequestHead(c.head), c.why, c.head);
}

// Framing that two parsers could read differently is how one request is
// smuggled inside another; every such head must be refused.
TEST(ParseRequestHeadTest, RefusesSmugglingFraming) {
  struct Case {
    const char* headers;
    const char* why;
  } cases[] = {
      {"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"Transfer-Encoding: chunked\r\nContent-Length: 0\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"Content-Length: 5\r\nContent-Length: 6\r\n", "differing Content-Length values 5 and 6"},
      {"Content-Length: 5, 6\r\n", "malformed Content-Length"},
      {"Content-Length: +5\r\n", "malformed Content-Length"},
      {"Content-Length: -1\r\n", "malformed Content-Length"},
      {"Content-Length: 0x10\r\n", "malformed Content-Length"},
      {"Content-Length: 1 2\r\n", "malformed Content-Length"},
      {"Content-Length:\r\n", "malformed Content-Length"},
      {"Content-Length: 99999999999999999999\r\n", "malformed Content-Length"},
      {"Transfer-Encoding: gzip, chunked\r\n", "exactly \"chunked\""},
      {"Transfer-Encoding: chunked, chunked\r\n", "exactly \"chunked\""},
      {"Transfer-Encoding: xchunked\r\n", "exactly \"chunked\""},
      {"Transfer-Encoding: identity\r\n", "exactly \"chunked\""},
      {"Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", "exactly \"chunked\""},
      {"Transfer-Encoding : chunked\r\n", "whitespace before the colon"},
      {"Transfer-Encoding:\r\n chunked\r\n", "obs-fold"},
      {"Transfer-Encoding: \x0b"
       "chunked\r\n",
       "control character"},
  };
  for (const auto& c : cases) {
    std::string head = absl::StrCat("POST /x HTTP/1.1\r\nHost: h\r\n", c.headers, "\r\n");
    ExpectError(ParseRequestHead(head), c.why, head);
  }
  ExpectError(ParseRequestHead("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"),
              "HTTP/1.0 request has a Transfer-Encoding", "HTTP/1.0 TE");

  // What stays legal: one framing header, repeated identical lengths, any
  // case of "chunked".
  for (const char* ok : {"Content-Length: 5\r\n", "Content-Length: 5\r\nContent-Length: 5\r\n",
                         "Content-Length: 5, 5\r\n", "Transfer-Encoding: Chunked\r\n"}) {
    std::string head = absl::StrCat("POST /x HTTP/1.1\r\nHost: h\r\n", ok, "\r\n");
    EXPECT_TRUE(ParseRequestHead(head).ok()) << head;
  }
}

TEST(ParseResponseHeadTest, StatusLinesAndFraming) {
  auto resp = ParseResponseHead("HTTP/1.1 404 Not Found\r\nContent-Length: 3\r\n\r\n");
  ASSERT_TRUE(resp.ok()) << resp.status();
  EXPECT_EQ(resp->version, "HTTP/1.1");
  EXPECT_EQ(resp->status, 404);
  EXPECT_EQ(resp->reason, "Not Found");
  EXPECT_EQ(resp->Get("content-length"), "3");
  auto bare = ParseResponseHead("HTTP/1.0 200\r\n\r\n");
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->reason, "");
  EXPECT_TRUE(ParseResponseHead("HTTP/1.1 200 \r\nTransfer-Encoding: gzip, chunked\r\n\r\n").ok());

  struct Case {
    const char* head;
    const char* why;
  } cases[] = {
      {"", "status line is empty"},
      {"HTTP/2 200 OK\r\n\r\n", "only HTTP/1.0 and HTTP/1.1"},
      {"ICY 200 OK\r\n\r\n", "only HTTP/1.0 and HTTP/1.1"},
      {"HTTP/1.1 20 OK\r\n\r\n", "status code"},
      {"HTTP/1.1 2000 OK\r\n\r\n", "status code"},
      {"HTTP/1.1 099 OK\r\n\r\n", "status code"},
      {"HTTP/1.1 600 OK\r\n\r\n", "status code"},
      {"HTTP/1.1 +20 OK\r\n\r\n", "status code"},
      {"HTTP/1.1 200 O\x01K\r\n\r\n", "control character"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
       "both Content-Length and Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "differing"},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip,,\r\n\r\n", "malformed Transfer-Encoding"},
      {"HTTP/1.1 200 OK\r\nX-A: 1\r\n  more\r\n\r\n", "obs-fold"},
  };
  for (const auto& c : cases) ExpectError(ParseResponseHead(c.head), c.why, c.head);
}

TEST(SerializeTest, RoundTripsAndNeverSplitsLines) {
  std::string text = "GET /a?b HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\r\n";
  RequestHead req = *ParseRequestHead(text);
  EXPECT_EQ(SerializeRequestHead(req), text);
  std::string resp_text = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  EXPECT_EQ(SerializeResponseHead(*ParseResponseHead(resp_text)), resp_text);

  req.Set("X-Injected", "v\r\nEvil: 1\r\n\r\nGET /admin HTTP/1.1");
  std::string out = SerializeRequestHead(req);
  EXPECT_EQ(FindHeadEnd(out), out.size()) << out;
  auto back = ParseRequestHead(out);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->Get("Evil"), "");
  EXPECT_EQ(back->headers.size(), 3u);
}

RequestHead Req(const std::string& method, const std::string& target,
                const std::string& host = "") {
  RequestHead r;
  r.method = method;
  r.target = target;
  r.version = "HTTP/1.1";
  if (!host.empty()) r.headers.push_back({"Host", host});
  return r;
}

TEST(ParseTargetTest, ConnectAuthorityForm) {
  auto t = ParseTarget(Req("CONNECT", "API.Example.COM.:443"), false, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "api.example.com");
  EXPECT_EQ(t->port, 443);
  EXPECT_EQ(t->path, "");
  auto v6 = ParseTarget(Req("CONNECT", "[2001:DB8::1]:8443"), false, true);
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "2001:db8::1");
  EXPECT_EQ(v6->port, 8443);

  ExpectError(ParseTarget(Req("CONNECT", "example.com"), false, true), "has no port", "no port");
  ExpectError(ParseTarget(Req("CONNECT", "example.com:"), false, true), "1..65535", "empty port");
  ExpectError(ParseTarget(Req("CONNECT", "example.com:0"), false, true), "1..65535", "port 0");
  ExpectError(ParseTarget(Req("CONNECT", "example.com:70000"), false, true), "1..65535", "big");
  ExpectError(ParseTarget(Req("CONNECT", "2001:db8::1:443"), false, true), "brackets", "bare v6");
  ExpectError(ParseTarget(Req("CONNECT", "[2001:db8::1:443"), false, true), "no ']'", "no ]");
  ExpectError(ParseTarget(Req("CONNECT", "[nothex::1]:443"), false, true), "invalid IPv6",
              "bad v6");
  ExpectError(ParseTarget(Req("CONNECT", "u:p@example.com:443"), false, true), "user info", "ui");
  ExpectError(ParseTarget(Req("CONNECT", "ex ample.com:443"), false, true), "character", "space");
  ExpectError(ParseTarget(Req("CONNECT", "a..b:443"), false, true), "empty or over-long label",
              "..");
}

TEST(ParseTargetTest, ForwardProxyAbsoluteForm) {
  auto t = ParseTarget(Req("GET", "http://Example.com/a/b?q=1&r", "other.com"), false, true);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "example.com");
  EXPECT_EQ(t->port, 80);
  EXPECT_EQ(t->path, "/a/b");
  EXPECT_EQ(t->origin_form, "/a/b?q=1&r");
  EXPECT_EQ(HostHeaderValue(*t, false), "example.com");

  auto port = ParseTarget(Req("POST", "HTTP://example.com:8080"), false, true);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(port->port, 8080);
  EXPECT_EQ(port->path, "/");
  EXPECT_EQ(port->origin_form, "/");
  EXPECT_EQ(HostHeaderValue(*port, false), "example.com:8080");

  auto query = ParseTarget(Req("GET", "http://[::1]:81?x"), false, true);
  ASSERT_TRUE(query.ok()) << query.status();
  EXPECT_EQ(query->host, "::1");
  EXPECT_EQ(query->path, "/");
  EXPECT_EQ(query->origin_form, "/?x");
  EXPECT_EQ(HostHeaderValue(*query, false), "[::1]:81");

  ExpectError(ParseTarget(Req("GET", "https://example.com/"), false, true), "absolute http://",
              "https");
  ExpectError(ParseTarget(Req("GET", "/a", "example.com"), false, true), "absolute http://",
              "origin");
  ExpectError(ParseTarget(Req("GET", "ftp://example.com/"), false, true), "absolute http://",
              "ftp");
  ExpectError(ParseTarget(Req("GET", "http:///a"), false, true), "empty host", "no host");
  ExpectError(ParseTarget(Req("GET", "http://a@evil.com/"), false, true), "user info", "userinfo");
  ExpectError(ParseTarget(Req("GET", "http://example.com/a#frag"), false, true), "fragment", "#");
}

TEST(ParseTargetTest, OriginFormUsesTheHostHeader) {
  auto t = ParseTarget(Req("GET", "/repos/x?page=2", "API.github.com"), true, false);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->host, "api.github.com");
  EXPECT_EQ(t->port, 443);
  EXPECT_EQ(t->path, "/repos/x");
  EXPECT_EQ(t->origin_form, "/repos/x?page=2");
  EXPECT_EQ(HostHeaderValue(*t, true), "api.github.com");
  auto plain = ParseTarget(Req("GET", "/", "example.com:8080"), false, false);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->port, 8080);
  EXPECT_EQ(ParseTarget(Req("GET", "/", "example.com"), false, false)->port, 80);
  // The path is kept as sent; NormalizePath is the caller's separate check.
  EXPECT_EQ(ParseTarget(Req("GET", "/a/%2e%2e/b?x", "h"), true, false)->path, "/a/%2e%2e/b");

  ExpectError(ParseTarget(Req("GET", "/"), true, false), "0 Host headers", "no host");
  RequestHead two = Req("GET", "/", "a.com");
  two.headers.push_back({"host", "b.com"});
  ExpectError(ParseTarget(two, true, false), "2 Host headers", "two hosts");
  ExpectError(ParseTarget(Req("GET", "http://evil.com/", "good.com"), true, false), "origin-form",
              "absolute form in transparent mode");
  ExpectError(ParseTarget(Req("OPTIONS", "*", "good.com"), true, false), "origin-form", "asterisk");
  ExpectError(ParseTarget(Req("GET", "/", ""), true, false), "0 Host headers", "empty");
  RequestHead empty_host = Req("GET", "/");
  empty_host.headers.push_back({"Host", ""});
  ExpectError(ParseTarget(empty_host, true, false), "empty host", "empty host");
}

TEST(CanonicalHostTest, NamesAndNumericTricks) {
  EXPECT_EQ(*CanonicalHost("Example.COM."), "example.com");
  EXPECT_EQ(*CanonicalHost("_dmarc.x-y.org"), "_dmarc.x-y.org");
  EXPECT_EQ(*CanonicalHost("10.0.0.1"), "10.0.0.1");
  EXPECT_EQ(*CanonicalHost("255.255.255.255"), "255.255.255.255");
  EXPECT_EQ(*CanonicalHost("::FFFF:1.2.3.4"), "::ffff:1.2.3.4");
  EXPECT_EQ(*CanonicalHost("3com.example"), "3com.example");
  // Forms inet_aton reads as addresses, which a CIDR rule would not match.
  for (const char* host :
       {"127.1", "2130706433", "017.0.0.1", "0x7f000001", "1.2.3.256", "1.2.3.4.5"}) {
    ExpectError(CanonicalHost(host), "dotted-quad", host);
  }
  EXPECT_EQ(*CanonicalHost("10.0.0.1."), "10.0.0.1");
  for (const std::string& host :
       {std::string(""), std::string("."), std::string("a..b"), std::string("a b"),
        std::string("a%2eb"), std::string("a\0b", 3), std::string("evil.com/x")}) {
    EXPECT_FALSE(CanonicalHost(host).ok()) << absl::CEscape(host);
  }
  EXPECT_FALSE(CanonicalHost(std::string(64, 'a') + ".com").ok());
  EXPECT_TRUE(CanonicalHost(std::string(63, 'a') + ".com").ok());
}

TEST(NormalizePathTest, AcceptsOrdinaryPaths) {
  for (const char* path : {"/", "/repos/x/y", "/repos/x/", "/v1/messages", "/a..b/c",
                           "/.well-known/x", "/~user/x", "/@scope/pkg"}) {
    auto n = NormalizePath(path);
    ASSERT_TRUE(n.ok()) << path << ": " << n.status();
    EXPECT_EQ(n->match, path);
    EXPECT_EQ(n->ambiguity, "") << path;
  }
  // Accepted too, but servers may route them as another path.
  for (const char* path : {"/a%20b", "/a%3Fb", "/a;b=c/d", "/~user/%E2%82%AC", "/%40evil/pkg",
                           "/repos/..%252fadmin"}) {
    auto n = NormalizePath(path);
    ASSERT_TRUE(n.ok()) << path << ": " << n.status();
    EXPECT_NE(n->ambiguity, "") << path;
  }
}

// Package managers' URLs: Debian versions with '~' arrive encoded, and
// npm's scoped packages carry an encoded '/'.
TEST(NormalizePathTest, DecodesUnreservedCharactersForMatching) {
  auto apt = NormalizePath("/debian/pool/main/n/npm/npm_9.2.0%7eds1-1_all.deb");
  ASSERT_TRUE(apt.ok()) << apt.status();
  EXPECT_EQ(apt->match, "/debian/pool/main/n/npm/npm_9.2.0~ds1-1_all.deb");
  EXPECT_EQ(apt->ambiguity, "");
  EXPECT_EQ(NormalizePath("/%61dmin")->match, "/admin");
  EXPECT_EQ(NormalizePath("/a%3fb%e2%82%ac")->match, "/a%3Fb%E2%82%AC");
  EXPECT_EQ(NormalizePath("/rep%6fs/x")->ambiguity, "");
  auto npm = NormalizePath("/@anthropic-ai%2fclaude-code");
  ASSERT_TRUE(npm.ok()) << npm.status();
  EXPECT_EQ(npm->match, "/@anthropic-ai%2Fclaude-code");
  EXPECT_NE(npm->ambiguity.find("encoded \"/\" (%2f)"), std::string::npos) << npm->ambiguity;
  auto apt_ok = NormalizePath("/debian/pool/main/n/npm/npm_9.2.0%7eds1-1_all.deb");
  EXPECT_EQ(apt_ok->ambiguity, "");
}

// Every path here reaches something other than what a glob on its text
// would say on at least one common server: refused everywhere.
TEST(NormalizePathTest, RefusesTraversalAndMalformedPaths) {
  struct Case {
    const char* path;
    const char* why;
  } cases[] = {
      {"", "does not start with '/'"},
      {"repos/x", "does not start with '/'"},
      {"/repos/../admin", "\"..\" segment"},
      {"/repos/..", "\"..\" segment"},
      {"/repos/./x", "\"..\" segment"},
      {"/.", "\"..\" segment"},
      {"/repos/..;/admin", "\"..\" segment"},
      {"/repos/%2e%2e/admin", "\"..\" segment"},
      {"/repos/%2E%2E/admin", "\"..\" segment"},
      {"/repos/.%2e/admin", "\"..\" segment"},
      {"/repos%00.json", "encoded NUL"},
      {"/a%", "malformed percent"},
      {"/a%2", "malformed percent"},
      {"/a%zz", "malformed percent"},
      {"/a%u002e", "malformed percent"},
      {"/a?b", "query or fragment"},
      {"/a#b", "query or fragment"},
      {"/a b", "space"},
      {"/a\xc3\xa9", "non-ASCII"},
  };
  for (const auto& c : cases) {
    auto n = NormalizePath(c.path);
    ASSERT_FALSE(n.ok()) << "accepted: " << c.path;
    EXPECT_NE(n.status().message().find(c.why), absl::string_view::npos) << c.path << ": "
                                                                          << n.status();
  }
}

// These may be another path to some server: accepted, with the reason
// kept, so that proxyd refuses them where a path rule applies.
TEST(NormalizePathTest, FlagsShapesThatCouldBypassAPathRule) {
  struct Case {
    const char* path;
    const char* why;
  } cases[] = {
      {"/repos%2f..%2fadmin", "(%2f)"},  {"/repos%2F..", "(%2F)"},
      {"/repos%5c..", "(%5c)"},          {"/repos\\..\\admin", "backslash"},
      {"//admin", "empty segment"},      {"/repos//x", "empty segment"},
  };
  for (const auto& c : cases) {
    auto n = NormalizePath(c.path);
    ASSERT_TRUE(n.ok()) << c.path << ": " << n.status();
    EXPECT_NE(n->ambiguity.find(c.why), std::string::npos) << c.path << ": " << n->ambiguity;
  }
}

TEST(BodyKindTest, Requests) {
  uint64_t len = 99;
  EXPECT_EQ(RequestBodyKind(*ParseRequestHead("GET / HTTP/1.1\r\nHost: h\r\n\r\n"), &len),
            BodyKind::kNone);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(
      RequestBodyKind(*ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 12\r\n\r\n"), &len),
      BodyKind::kLength);
  EXPECT_EQ(len, 12u);
  EXPECT_EQ(
      RequestBodyKind(*ParseRequestHead("POST / HTTP/1.1\r\nContent-Length: 0\r\n\r\n"), &len),
      BodyKind::kLength);
  EXPECT_EQ(len, 0u);
  EXPECT_EQ(RequestBodyKind(
                *ParseRequestHead("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"), &len),
            BodyKind::kChunked);
}

TEST(BodyKindTest, Responses) {
  auto kind = [](const std::string& head, const std::string& method, uint64_t* len) {
    auto resp = ParseResponseHead(head);
    EXPECT_TRUE(resp.ok()) << resp.status();
    return ResponseBodyKind(*resp, method, len);
  };
  uint64_t len = 0;
  EXPECT_EQ(kind("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", "GET", &len), BodyKind::kLength);
  EXPECT_EQ(len, 7u);
  EXPECT_EQ(kind("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n", "HEAD", &len), BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 204 No Content\r\n\r\n", "GET", &len), BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 304 Not Modified\r\nContent-Length: 7\r\n\r\n", "GET", &len),
            BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 100 Continue\r\n\r\n", "POST", &len), BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 101 Switching Protocols\r\n\r\n", "GET", &len), BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 200 Connection established\r\n\r\n", "CONNECT", &len), BodyKind::kNone);
  EXPECT_EQ(kind("HTTP/1.1 407 Auth\r\nContent-Length: 2\r\n\r\n", "CONNECT", &len),
            BodyKind::kLength);
  EXPECT_EQ(kind("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", "GET", &len),
            BodyKind::kChunked);
  EXPECT_EQ(kind("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", "GET", &len),
            BodyKind::kUntilClose);
  EXPECT_EQ(kind("HTTP/1.1 200 OK\r\n\r\n", "GET", &len), BodyKind::kUntilClose);
  EXPECT_EQ(kind("HTTP/1.0 200 OK\r\n\r\n", "POST", &len), BodyKind::kUntilClose);
}

constexpr absl::string_view kChunkedBody =
    "4\r\nWiki\r\n"
    "5;name=\"v\"\r\npedia\r\n"
    "E\r\n in\r\n\r\nchunks.\r\n"
    "0\r\n"
    "Expires: never\r\n"
    "\r\n";

TEST(ChunkedScannerTest, StopsExactlyAtTheEndOfTheBody) {
  std::string pipelined = "GET /next HTTP/1.1\r\n\r\n";
  ChunkedScanner s;
  EXPECT_EQ(s.Feed(absl::StrCat(kChunkedBody, pipelined)), kChunkedBody.size());
  EXPECT_TRUE(s.done());
  EXPECT_TRUE(s.status().ok());
  EXPECT_EQ(s.Feed("more"), 0u);

  ChunkedScanner empty;
  EXPECT_EQ(empty.Feed("0\r\n\r\nX"), 5u);
  EXPECT_TRUE(empty.done());
}

TEST(ChunkedScannerTest, OneByteAtATime) {
  std::string input = absl::StrCat(kChunkedBody, "NEXT");
  ChunkedScanner s;
  size_t consumed = 0;
  for (size_t i = 0; i < input.size(); ++i) {
    size_t n = s.Feed(input.substr(i, 1));
    ASSERT_TRUE(s.status().ok()) << "at byte " << i << ": " << s.status();
    ASSERT_LE(n, 1u);
    consumed += n;
    // done() turns true exactly on the last body byte, and not before.
    EXPECT_EQ(s.done(), i + 1 >= kChunkedBody.size()) << "at byte " << i;
    if (i + 1 > kChunkedBody.size()) {
      EXPECT_EQ(n, 0u) << "at byte " << i;
    }
  }
  EXPECT_EQ(consumed, kChunkedBody.size());
}

TEST(ChunkedScannerTest, EverySplitIntoTwoFeeds) {
  std::string input = absl::StrCat(kChunkedBody, "NEXT");
  for (size_t cut = 0; cut <= input.size(); ++cut) {
    ChunkedScanner s;
    size_t consumed = s.Feed(input.substr(0, cut));
    consumed += s.Feed(input.substr(cut));
    EXPECT_TRUE(s.done()) << "cut " << cut;
    EXPECT_EQ(consumed, kChunkedBody.size()) << "cut " << cut;
  }
}

TEST(ChunkedScannerTest, MalformedBodies) {
  struct Case {
    std::string body;
    const char* why;
    size_t good_bytes;  // What Feed returns: the bytes before the bad one.
  } cases[] = {
      {"x\r\n", "not hexadecimal", 0},
      {" 4\r\nWiki\r\n", "not hexadecimal", 0},
      {"-1\r\n", "not hexadecimal", 0},
      {"0x4\r\nWiki\r\n", "unexpected byte", 1},
      {"4 \r\nWiki\r\n", "unexpected byte", 1},
      {"4\nWiki\r\n", "unexpected byte", 1},
      {"4\r\rWiki\r\n", "does not end in CRLF", 2},
      {"4\r\nWikipedia\r\n", "longer than its size", 7},
      {"4\r\nWiki\rX", "not followed by CRLF", 8},
      {"4\r\nWiki\n", "longer than its size", 7},
      {"4;a\x01\r\n", "control character", 3},
      {"ffffffffffffffffff\r\n", "chunk size is over", 10},
      {"10000000001\r\n", "chunk size is over", 10},
      {"0\r\nX-Trailer\r\n\r\n", "no colon", 12},
      {"0\r\n Folded: x\r\n\r\n", "does not start with a field name", 3},
      {"0\r\nA: b\n\r\n", "control character", 7},
      {"0\r\n\rX", "last chunk is not followed by CRLF", 4},
  };
  for (const auto& c : cases) {
    ChunkedScanner s;
    size_t n = s.Feed(c.body);
    ASSERT_FALSE(s.status().ok()) << "accepted: " << absl::CEscape(c.body);
    EXPECT_NE(s.status().message().find(c.why), absl::string_view::npos)
        << absl::CEscape(c.body) << ": " << s.status();
    EXPECT_EQ(n, c.good_bytes) << absl::CEscape(c.body);
    EXPECT_FALSE(s.done());
    EXPECT_EQ(s.Feed("0\r\n\r\n"), 0u);
  }
  // At the limit is fine: the scanner then expects that many data bytes.
  ChunkedScanner big;
  EXPECT_EQ(big.Feed("10000000000\r\nabc"), 16u);
  EXPECT_TRUE(big.status().ok()) << big.status();
  // Leading zeros are fine, but not without end.
  ChunkedScanner zeros;
  EXPECT_EQ(zeros.Feed("0000000000000004\r\nWiki\r\n0\r\n\r\n"), 29u);
  EXPECT_TRUE(zeros.done());
  ChunkedScanner too_many;
  too_many.Feed(std::string(17, '0'));
  EXPECT_FALSE(too_many.status().ok());
  // Trailers are bounded in total.
  ChunkedScanner trailers;
  trailers.Feed("0\r\n");
  for (int i = 0; i < 2000 && trailers.status().ok(); ++i) {
    trailers.Feed("X-Long-Trailer: value\r\n");
  }
  EXPECT_NE(trailers.status().message().find("trailers are too long"), absl::string_view::npos)
      << trailers.status();
}

TEST(DenyResponseTest, IsACompletePlainText403) {
  std::string resp = DenyResponse("evil.com", 443, "deny **.evil.com", "r-12", "");
  size_t end = FindHeadEnd(resp);
  ASSERT_GT(end, 0u);
  auto head = ParseResponseHead(resp.substr(0, end));
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ(head->status, 403);
  EXPECT_EQ(head->Get("Content-Type"), "text/plain; charset=utf-8");
  EXPECT_EQ(head->Get("Connection"), "close");
  EXPECT_EQ(head->Get("X-Airlock-Decision"), "deny");
  std::string body = resp.substr(end);
  EXPECT_EQ(head->Get("Content-Length"), std::to_string(body.size()));
  EXPECT_EQ(body,
            "airlock: blocked evil.com:443 by policy\n"
            "rule: deny **.evil.com (r-12)\n"
            "allow it with: airlock policy allow network evil.com\n");
}

TEST(DenyResponseTest, DefaultDenyDetailAndIpv6) {
  std::string resp = DenyResponse("::1", 8080, "", "", "DELETE /repos/x is not allowed");
  std::string body = resp.substr(FindHeadEnd(resp));
  EXPECT_EQ(body,
            "airlock: blocked [::1]:8080 by policy\n"
            "rule: default deny (no rule allows this host)\n"
            "DELETE /repos/x is not allowed\n"
            "allow it with: airlock policy allow network ::1\n");
  EXPECT_NE(resp.find("Content-Length: " + std::to_string(body.size()) + "\r\n"),
            std::string::npos);
}

TEST(HasConnectionOptionTest, AnyConnectionHeaderAnyCaseAnyPlaceInItsList) {
  std::vector<Header> h = {{"connection", "keep-alive"}, {"Content-Length", "2"},
                           {"Connection", "Keep-Alive,  Close "}};
  EXPECT_TRUE(HasConnectionOption(h, "close"));
  EXPECT_TRUE(HasConnectionOption(h, "keep-alive"));
  EXPECT_FALSE(HasConnectionOption(h, "upgrade"));
  // An option, not a substring of one or of another header's value.
  EXPECT_FALSE(HasConnectionOption({{"Connection", "closed"}, {"X-Note", "close"}}, "close"));
  EXPECT_FALSE(HasConnectionOption({}, "close"));
}

}  // namespace
}  // namespace airlock::proxyd
