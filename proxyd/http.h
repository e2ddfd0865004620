// HTTP/1.x message heads as proxyd sees them: parsing and re-serializing
// request and response heads, finding the request target, body framing and
// the 403 page for a denied request. Pure functions over bytes; the caller
// owns the sockets. Parsing is strict on purpose: anything two HTTP
// implementations could read differently (the raw material of request
// smuggling and of policy bypass) is an error here, not a guess.
#ifndef AIRLOCK_PROXYD_HTTP_H_
#define AIRLOCK_PROXYD_HTTP_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::proxyd {

// Header is one header field as sent: the name keeps its case, the value
// has no leading or trailing whitespace.
struct Header {
  std::string name;
  std::string value;
};

// RequestHead is a parsed request line and its header fields, in order.
struct RequestHead {
  std::string method;
  std::string target;
  // "HTTP/1.0" or "HTTP/1.1".
  std::string version;
  std::vector<Header> headers;

  // Get returns the value of the first header named `name` (any case), or
  // "" when there is none.
  std::string Get(absl::string_view name) const;
  // Remove drops every header named `name` (any case).
  void Remove(absl::string_view name);
  // Set leaves exactly one header named `name` with `value`: in place of the
  // first existing one, or appended.
  void Set(absl::string_view name, absl::string_view value);
};

// ResponseHead is a parsed status line and its header fields, in order.
struct ResponseHead {
  std::string version;
  int status = 0;
  std::string reason;
  std::vector<Header> headers;

  // Get, Remove and Set behave as in RequestHead.
  std::string Get(absl::string_view name) const;
  void Remove(absl::string_view name);
  void Set(absl::string_view name, absl::string_view value);
};

// FindHeadEnd returns the index just past the blank line that ends a
// message head in `buf` ("\r\n\r\n", also bare "\n\n"), or 0 when the head
// is not complete yet.
size_t FindHeadEnd(absl::string_view buf);

// ParseRequestHead parses a request head (with or without its final blank
// line; nothing may follow that line). Only HTTP/1.0 and HTTP/1.1 are
// accepted. Rejected, with an error saying which line is wrong: obs-fold
// continuation lines, header names that are not tokens or are followed by
// whitespace, control characters in values, more than one Host, and the
// framing ambiguities used for request smuggling: Content-Length together
// with Transfer-Encoding, differing or malformed Content-Length values, and
// any Transfer-Encoding other than exactly "chunked".
absl::StatusOr<RequestHead> ParseRequestHead(absl::string_view head);

// ParseResponseHead parses a response head with the same header rules.
// Content-Length with Transfer-Encoding, and differing or malformed
// Content-Length values, are errors here too: a proxy that forwards such a
// response cannot know how its client will frame it.
absl::StatusOr<ResponseHead> ParseResponseHead(absl::string_view head);

// SerializeRequestHead writes the head back in wire form, ending with the
// blank line. It never emits a line break inside a line: CR, LF and NUL in
// any field (a value a caller Set, say) are written as spaces, so no input
// can split the head.
std::string SerializeRequestHead(const RequestHead& req);

// SerializeResponseHead is SerializeRequestHead for responses.
std::string SerializeResponseHead(const ResponseHead& resp);

// Target is where a request goes.
struct Target {
  // Lower case, no brackets around IPv6 literals, no trailing dot.
  std::string host;
  uint16_t port = 0;
  // The path exactly as sent, without query or fragment; "" for CONNECT.
  std::string path;
  // The path and query ("/path?q") to send upstream in origin form; "" for
  // CONNECT.
  std::string origin_form;
};

// CanonicalHost checks a host name or IP literal (no brackets, no port) and
// returns it lower-cased without a trailing dot. Names are labels of
// letters, digits, '-' and '_'. A name whose last label starts with a digit
// must be a dotted-quad IPv4 address without leading zeros: resolvers read
// "127.1", "0x7f000001" and "017.0.0.1" as addresses, which a rule on
// 127.0.0.0/8 would not see coming.
absl::StatusOr<std::string> CanonicalHost(absl::string_view host);

// ParseTarget finds the destination of `req`:
//  - CONNECT: the authority form "host:port" (port required, IPv6 as
//    "[::1]:443");
//  - otherwise, with `forward_proxy`: the absolute form
//    "http://host[:port]/path?q" (http only, default port 80); the caller
//    must replace the Host header with HostHeaderValue(), as a proxy that
//    forwards an absolute-form request has to;
//  - otherwise the origin form "/path?q", with the host from the single
//    Host header and the default port 443 if `tls`, else 80. An absolute
//    form is refused here, so the host the policy checks is the one the
//    server will see.
// The path is not normalized or checked beyond its first '/'; callers
// deciding on path rules must also call NormalizePath.
absl::StatusOr<Target> ParseTarget(const RequestHead& req, bool tls, bool forward_proxy);

// HostHeaderValue is the Host header for `target`: the host (bracketed if
// IPv6), with ":port" unless the port is the default for `tls`.
std::string HostHeaderValue(const Target& target, bool tls);

// NormalizedPath is a request path as the policy matches it.
struct NormalizedPath {
  // The path with percent-encoded unreserved characters (letters, digits,
  // "-._~") decoded, as RFC 3986 section 6.2.2.2 says they mean the same,
  // and other escapes in upper case: "/pool/npm_9.2.0%7eds1" matches as
  // "/pool/npm_9.2.0~ds1". The request is forwarded as sent.
  std::string match;
  // Why some server may route this path as another one ("has an empty
  // segment (\"//\")", any escape of a character that is not unreserved,
  // a ';' parameter, a backslash); empty when none. Such a path is refused only where a path rule applies to the host
  // (it could bypass the glob) and forwarded otherwise (npm's
  // "/@scope%2fname").
  std::string ambiguity;
};

// NormalizePath reads a request path. Refused everywhere: a path not
// starting with '/', a "." or ".." segment (also when encoded, or before a
// ';' parameter as Tomcat reads "/..;/"), an encoded NUL, a malformed
// escape, and control, space or non-ASCII bytes.
absl::StatusOr<NormalizedPath> NormalizePath(absl::string_view path);

// BodyKind is how a message body is delimited.
enum class BodyKind { kNone, kLength, kChunked, kUntilClose };

// RequestBodyKind frames the body of a request accepted by ParseRequestHead:
// chunked, or Content-Length bytes (stored in *length, possibly 0), or no
// body at all when neither header is present.
BodyKind RequestBodyKind(const RequestHead& req, uint64_t* length);

// ResponseBodyKind frames the body of a response accepted by
// ParseResponseHead to a request with `request_method`: none for HEAD, 1xx,
// 204, 304 and a 2xx to CONNECT; chunked when the last transfer coding is
// chunked; Content-Length bytes (in *length); else until the server closes.
BodyKind ResponseBodyKind(const ResponseHead& resp, absl::string_view request_method,
                          uint64_t* length);

// HasConnectionOption is true when any Connection header of `headers`
// lists `option` (any case): "close" in "Keep-Alive, Close".
bool HasConnectionOption(const std::vector<Header>& headers, absl::string_view option);

// ChunkedScanner follows a chunked body as it streams past, so a proxy can
// forward exactly the body bytes, unchanged, and keep whatever follows (a
// pipelined request) for the next message. It holds no data, only the
// position in the chunk grammar, so input may be split anywhere.
class ChunkedScanner {
 public:
  // Chunk sizes above this are refused: no real sender needs more, and it
  // keeps the arithmetic far from overflow.
  static constexpr uint64_t kMaxChunkSize = uint64_t{1} << 40;
  // Bytes of chunk extensions (per chunk) and of trailers (in total).
  static constexpr size_t kMaxExtension = 4096;
  static constexpr size_t kMaxTrailers = 16384;

  // Feed scans `data` and returns how many of its bytes belong to the body.
  // That is all of them until the body ends, then the prefix up to and
  // including the final CRLF (done() turns true). After an error (status()
  // not ok) it returns the bytes before the offending one and then 0; the
  // caller must drop the connection.
  size_t Feed(absl::string_view data);

  // done is true once the last chunk and the trailers have been read.
  bool done() const { return state_ == State::kDone; }
  // status says why the body is malformed, or OK.
  absl::Status status() const { return status_; }

 private:
  enum class State {
    kSize,
    kExtension,
    kSizeLf,
    kData,
    kDataCr,
    kDataLf,
    kTrailerStart,
    kTrailerLine,
    kTrailerLf,
    kFinalLf,
    kDone,
    kError,
  };
  void Fail(absl::string_view why);

  State state_ = State::kSize;
  absl::Status status_;
  uint64_t size_ = 0;
  int size_digits_ = 0;
  uint64_t remaining_ = 0;
  size_t extension_ = 0;
  size_t trailers_ = 0;
  bool trailer_colon_ = false;
};

// DenyResponse is the complete HTTP/1.1 403 response sent instead of a
// request the policy denies. The plain-text body says what was blocked
// ("airlock: blocked <host>:<port> by policy"), the deciding rule ("rule:
// <rule_text> (<rule_id>)", or the default deny when `rule_text` is empty),
// `detail` when not empty, and the command that would allow the host. The
// X-Airlock-Decision: deny header lets tools tell it from a server's 403.
std::string DenyResponse(absl::string_view host, uint16_t port, absl::string_view rule_text,
                         absl::string_view rule_id, absl::string_view detail);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_HTTP_H_
