#include "proxyd/http.h"

#include <arpa/inet.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock::proxyd {
namespace {

// Quote shows untrusted text in an error message: escaped, and cut short.
std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 80;
  std::string out = absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMax)), "\"");
  if (text.size() > kMax) absl::StrAppend(&out, "...");
  return out;
}

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

// IsTchar is RFC 9110's tchar, the characters of a token.
bool IsTchar(char c) {
  return absl::ascii_isalnum(c) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsToken(absl::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar); }

// IsControl is true for the C0 controls except HTAB, and DEL.
bool IsControl(char c) {
  auto u = static_cast<unsigned char>(c);
  return (u < 0x20 && c != '\t') || u == 0x7f;
}

bool IsOws(char c) { return c == ' ' || c == '\t'; }

absl::string_view StripOws(absl::string_view s) {
  while (!s.empty() && IsOws(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsOws(s.back())) s.remove_suffix(1);
  return s;
}

template <typename Head>
std::string GetHeader(const Head& h, absl::string_view name) {
  for (const Header& f : h.headers) {
    if (absl::EqualsIgnoreCase(f.name, name)) return f.value;
  }
  return "";
}

// RemoveHeader and SetHeader copy `name` and `value` first: they may view
// a header of `h` itself, which the edit moves.
template <typename Head>
void RemoveHeader(Head* h, absl::string_view name_view) {
  std::string name(name_view);
  h->headers.erase(
      std::remove_if(h->headers.begin(), h->headers.end(),
                     [&](const Header& f) { return absl::EqualsIgnoreCase(f.name, name); }),
      h->headers.end());
}

template <typename Head>
void SetHeader(Head* h, absl::string_view name_view, absl::string_view value_view) {
  std::string name(name_view);
  std::string value(value_view);
  auto first = std::find_if(h->headers.begin(), h->headers.end(),
                            [&](const Header& f) { return absl::EqualsIgnoreCase(f.name, name); });
  size_t index = first - h->headers.begin();
  // Everything before the first match stays put, so `index` is still the
  // place of the first one once all are gone.
  RemoveHeader(h, name);
  h->headers.insert(h->headers.begin() + index, Header{std::move(name), std::move(value)});
}

// SplitHead cuts a head into its start line and field lines. Lines end in
// LF with an optional CR before it; the first empty line ends the head.
absl::Status SplitHead(absl::string_view head, absl::string_view start_name,
                       absl::string_view* start, std::vector<absl::string_view>* fields) {
  bool first = true;
  while (!head.empty()) {
    size_t lf = head.find('\n');
    absl::string_view line = head.substr(0, lf);
    head.remove_prefix(lf == absl::string_view::npos ? head.size() : lf + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (first) {
      if (line.empty()) return Bad(absl::StrCat(start_name, " is empty"));
      *start = line;
      first = false;
      continue;
    }
    if (line.empty()) {
      if (!head.empty()) {
        return Bad(absl::StrCat("data after the blank line that ends the head: ", Quote(head)));
      }
      return absl::OkStatus();
    }
    fields->push_back(line);
  }
  if (first) return Bad(absl::StrCat(start_name, " is empty"));
  return absl::OkStatus();
}

absl::Status ParseFields(const std::vector<absl::string_view>& lines, std::vector<Header>* out) {
  for (size_t i = 0; i < lines.size(); ++i) {
    absl::string_view line = lines[i];
    std::string where = absl::StrCat("header line ", i + 1, " (", Quote(line), ")");
    if (IsOws(line.front())) {
      return Bad(absl::StrCat(
          where, " starts with whitespace: obs-fold continuation lines are not accepted"));
    }
    size_t colon = line.find(':');
    if (colon == absl::string_view::npos) return Bad(absl::StrCat(where, " has no colon"));
    absl::string_view name = line.substr(0, colon);
    if (name.empty()) return Bad(absl::StrCat(where, " has an empty name"));
    if (IsOws(name.back())) return Bad(absl::StrCat(where, " has whitespace before the colon"));
    if (!IsToken(name)) return Bad(absl::StrCat(where, " has a name that is not a token"));
    absl::string_view value = StripOws(line.substr(colon + 1));
    if (std::any_of(value.begin(), value.end(), IsControl)) {
      return Bad(absl::StrCat(where, " has a control character in its value"));
    }
    out->push_back({std::string(name), std::string(value)});
  }
  return absl::OkStatus();
}

// ParseContentLength reads one Content-Length value: digits, or a list of
// identical digit strings ("5, 5"), which RFC 9110 lets a recipient accept.
bool ParseContentLength(absl::string_view value, uint64_t* out) {
  bool have = false;
  for (absl::string_view part : absl::StrSplit(value, ',')) {
    part = StripOws(part);
    // 19 digits always fit in 64 bits.
    if (part.empty() || part.size() > 19 ||
        !std::all_of(part.begin(), part.end(), absl::ascii_isdigit)) {
      return false;
    }
    uint64_t n = 0;
    if (!absl::SimpleAtoi(part, &n)) return false;
    if (have && n != *out) return false;
    *out = n;
    have = true;
  }
  return have;
}

// CheckFraming holds the invariant every later framing decision relies on:
// at most one way to find the end of the body, read the same by anyone.
absl::Status CheckFraming(const std::vector<Header>& headers, absl::string_view version,
                          bool request) {
  absl::string_view kind = request ? "request" : "response";
  bool have_length = false;
  uint64_t length = 0;
  std::vector<absl::string_view> encodings;
  for (const Header& h : headers) {
    if (absl::EqualsIgnoreCase(h.name, "Content-Length")) {
      uint64_t n = 0;
      if (!ParseContentLength(h.value, &n)) {
        return Bad(absl::StrCat(kind, " has a malformed Content-Length ", Quote(h.value)));
      }
      if (have_length && n != length) {
        return Bad(absl::StrCat(kind, " has differing Content-Length values ", length, " and ", n));
      }
      have_length = true;
      length = n;
    } else if (absl::EqualsIgnoreCase(h.name, "Transfer-Encoding")) {
      encodings.push_back(h.value);
    }
  }
  if (encodings.empty()) return absl::OkStatus();
  if (have_length) {
    return Bad(absl::StrCat(kind, " has both Content-Length and Transfer-Encoding"));
  }
  if (version == "HTTP/1.0") {
    return Bad(absl::StrCat("HTTP/1.0 ", kind, " has a Transfer-Encoding"));
  }
  if (request) {
    if (encodings.size() != 1 || !absl::EqualsIgnoreCase(encodings[0], "chunked")) {
      return Bad(absl::StrCat("request Transfer-Encoding must be exactly \"chunked\", not ",
                              Quote(absl::StrJoin(encodings, ", "))));
    }
    return absl::OkStatus();
  }
  for (absl::string_view value : encodings) {
    for (absl::string_view coding : absl::StrSplit(value, ',')) {
      // A coding may carry parameters ("gzip;q=1"); its name is a token.
      coding = StripOws(coding.substr(0, coding.find(';')));
      if (!IsToken(coding)) {
        return Bad(absl::StrCat("response has a malformed Transfer-Encoding ", Quote(value)));
      }
    }
  }
  return absl::OkStatus();
}

bool KnownVersion(absl::string_view v) { return v == "HTTP/1.1" || v == "HTTP/1.0"; }

// LastCoding is the last transfer coding named in the Transfer-Encoding
// headers, lower-cased; "" when there is none.
std::string LastCoding(const std::vector<Header>& headers) {
  std::string last;
  for (const Header& h : headers) {
    if (!absl::EqualsIgnoreCase(h.name, "Transfer-Encoding")) continue;
    for (absl::string_view coding : absl::StrSplit(h.value, ',')) {
      coding = StripOws(coding.substr(0, coding.find(';')));
      if (!coding.empty()) last = absl::AsciiStrToLower(coding);
    }
  }
  return last;
}

bool HasContentLength(const std::vector<Header>& headers, uint64_t* length) {
  for (const Header& h : headers) {
    if (absl::EqualsIgnoreCase(h.name, "Content-Length")) {
      return ParseContentLength(h.value, length);
    }
  }
  return false;
}

// Clean makes text safe to put on one line of a head.
std::string Clean(absl::string_view text) {
  std::string out(text);
  for (char& c : out) {
    if (c == '\r' || c == '\n' || c == '\0') c = ' ';
  }
  return out;
}

void AppendFields(const std::vector<Header>& headers, std::string* out) {
  for (const Header& h : headers) absl::StrAppend(out, Clean(h.name), ": ", Clean(h.value), "\r\n");
  out->append("\r\n");
}

absl::StatusOr<uint16_t> ParsePort(absl::string_view text, absl::string_view whole) {
  uint32_t port = 0;
  if (text.empty() || text.size() > 5 ||
      !std::all_of(text.begin(), text.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(text, &port) || port == 0 || port > 65535) {
    return Bad(absl::StrCat("authority ", Quote(whole), " has a port that is not 1..65535"));
  }
  return static_cast<uint16_t>(port);
}

// ParseAuthority reads "host[:port]" or "[v6][:port]" into target->host and
// target->port; a missing port is `default_port`, or an error when that is 0.
absl::Status ParseAuthority(absl::string_view text, uint16_t default_port, Target* target) {
  if (text.empty()) return Bad("empty host");
  if (absl::StrContains(text, '@')) {
    return Bad(absl::StrCat("authority ", Quote(text), " has user info, which is not accepted"));
  }
  absl::string_view host = text;
  absl::string_view port;
  bool has_port = false;
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) {
      return Bad(absl::StrCat("authority ", Quote(text), " has no ']'"));
    }
    host = text.substr(1, close - 1);
    absl::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') {
        return Bad(
            absl::StrCat("authority ", Quote(text), " has text after ']' that is not a port"));
      }
      port = rest.substr(1);
      has_port = true;
    }
    std::string h(host);
    in6_addr a6;
    if (inet_pton(AF_INET6, h.c_str(), &a6) != 1) {
      return Bad(absl::StrCat("authority ", Quote(text), " has an invalid IPv6 address"));
    }
  } else {
    size_t colon = text.find(':');
    if (colon != absl::string_view::npos) {
      if (text.find(':', colon + 1) != absl::string_view::npos) {
        return Bad(absl::StrCat("authority ", Quote(text), ": IPv6 addresses need brackets"));
      }
      host = text.substr(0, colon);
      port = text.substr(colon + 1);
      has_port = true;
    }
  }
  if (has_port) {
    absl::StatusOr<uint16_t> p = ParsePort(port, text);
    if (!p.ok()) return p.status();
    target->port = *p;
  } else if (default_port == 0) {
    return Bad(absl::StrCat("authority ", Quote(text), " has no port"));
  } else {
    target->port = default_port;
  }
  absl::StatusOr<std::string> canonical = CanonicalHost(host);
  if (!canonical.ok()) return canonical.status();
  target->host = *std::move(canonical);
  return absl::OkStatus();
}

// SplitPathQuery fills path and origin_form from "/path?q"; a fragment is
// refused, since servers disagree on whether it is part of the path.
absl::Status SplitPathQuery(absl::string_view text, Target* target) {
  if (absl::StrContains(text, '#')) {
    return Bad(absl::StrCat("request target ", Quote(text), " has a fragment"));
  }
  // An absolute URI may have no path at all ("http://h" or "http://h?q");
  // its origin form then starts with "/".
  std::string origin = absl::StartsWith(text, "/") ? std::string(text) : absl::StrCat("/", text);
  target->path = origin.substr(0, origin.find('?'));
  target->origin_form = std::move(origin);
  return absl::OkStatus();
}

bool IsUnreserved(char c) {
  return absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

bool CanonicalIpv4(absl::string_view host) {
  std::vector<absl::string_view> parts = absl::StrSplit(host, '.');
  if (parts.size() != 4) return false;
  for (absl::string_view p : parts) {
    uint32_t n = 0;
    if (p.empty() || p.size() > 3 || (p.size() > 1 && p.front() == '0') ||
        !std::all_of(p.begin(), p.end(), absl::ascii_isdigit) || !absl::SimpleAtoi(p, &n) ||
        n > 255) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string RequestHead::Get(absl::string_view name) const { return GetHeader(*this, name); }
void RequestHead::Remove(absl::string_view name) { RemoveHeader(this, name); }
void RequestHead::Set(absl::string_view name, absl::string_view value) {
  SetHeader(this, name, value);
}

std::string ResponseHead::Get(absl::string_view name) const { return GetHeader(*this, name); }
void ResponseHead::Remove(absl::string_view name) { RemoveHeader(this, name); }
void ResponseHead::Set(absl::string_view name, absl::string_view value) {
  SetHeader(this, name, value);
}

size_t FindHeadEnd(absl::string_view buf) {
  size_t line_start = 0;
  for (size_t i = 0; i < buf.size(); ++i) {
    if (buf[i] != '\n') continue;
    size_t line_len = i - line_start;
    // The line that just ended is empty (or only "\r"): the head ends here.
    // A blank first line is reported too, for the parser to refuse.
    if (line_len == 0 || (line_len == 1 && buf[line_start] == '\r')) return i + 1;
    line_start = i + 1;
  }
  return 0;
}

absl::StatusOr<RequestHead> ParseRequestHead(absl::string_view head) {
  absl::string_view start;
  std::vector<absl::string_view> lines;
  absl::Status split = SplitHead(head, "request line", &start, &lines);
  if (!split.ok()) return split;
  std::vector<absl::string_view> parts = absl::StrSplit(start, ' ');
  if (parts.size() != 3 || parts[0].empty() || parts[1].empty() || parts[2].empty()) {
    return Bad(absl::StrCat("request line ", Quote(start),
                            " is not METHOD SP TARGET SP VERSION with single spaces"));
  }
  RequestHead req;
  if (!IsToken(parts[0])) {
    return Bad(absl::StrCat("request line ", Quote(start), " has a method that is not a token"));
  }
  for (char c : parts[1]) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) {
      return Bad(absl::StrCat("request line ", Quote(start),
                              " has a target with a control, space or non-ASCII byte"));
    }
  }
  if (!KnownVersion(parts[2])) {
    return Bad(absl::StrCat("request line ", Quote(start), " has version ", Quote(parts[2]),
                            "; only HTTP/1.0 and HTTP/1.1 are accepted"));
  }
  req.method = std::string(parts[0]);
  req.target = std::string(parts[1]);
  req.version = std::string(parts[2]);
  absl::Status fields = ParseFields(lines, &req.headers);
  if (!fields.ok()) return fields;
  int hosts = 0;
  for (const Header& h : req.headers) hosts += absl::EqualsIgnoreCase(h.name, "Host") ? 1 : 0;
  if (hosts > 1) return Bad("request has more than one Host header");
  absl::Status framing = CheckFraming(req.headers, req.version, /*request=*/true);
  if (!framing.ok()) return framing;
  return req;
}

absl::StatusOr<ResponseHead> ParseResponseHead(absl::string_view head) {
  absl::string_view start;
  std::vector<absl::string_view> lines;
  absl::Status split = SplitHead(head, "status line", &start, &lines);
  if (!split.ok()) return split;
  // HTTP-version SP 3DIGIT SP reason; a missing " reason" is tolerated.
  ResponseHead resp;
  size_t sp = start.find(' ');
  absl::string_view version = start.substr(0, sp);
  if (!KnownVersion(version)) {
    return Bad(absl::StrCat("status line ", Quote(start), " has version ", Quote(version),
                            "; only HTTP/1.0 and HTTP/1.1 are accepted"));
  }
  absl::string_view rest = sp == absl::string_view::npos ? "" : start.substr(sp + 1);
  absl::string_view code = rest.substr(0, 3);
  int status = 0;
  if (code.size() != 3 || !std::all_of(code.begin(), code.end(), absl::ascii_isdigit) ||
      !absl::SimpleAtoi(code, &status) || status < 100 || status > 599 ||
      (rest.size() > 3 && rest[3] != ' ')) {
    return Bad(absl::StrCat("status line ", Quote(start), " has no status code 100..599"));
  }
  absl::string_view reason = rest.size() > 4 ? rest.substr(4) : "";
  if (std::any_of(reason.begin(), reason.end(), IsControl)) {
    return Bad(absl::StrCat("status line ", Quote(start), " has a control character"));
  }
  resp.version = std::string(version);
  resp.status = status;
  resp.reason = std::string(reason);
  absl::Status fields = ParseFields(lines, &resp.headers);
  if (!fields.ok()) return fields;
  absl::Status framing = CheckFraming(resp.headers, resp.version, /*request=*/false);
  if (!framing.ok()) return framing;
  return resp;
}

std::string SerializeRequestHead(const RequestHead& req) {
  std::string out =
      absl::StrCat(Clean(req.method), " ", Clean(req.target), " ", Clean(req.version), "\r\n");
  AppendFields(req.headers, &out);
  return out;
}

std::string SerializeResponseHead(const ResponseHead& resp) {
  std::string out =
      absl::StrCat(Clean(resp.version), " ", resp.status, " ", Clean(resp.reason), "\r\n");
  AppendFields(resp.headers, &out);
  return out;
}

absl::StatusOr<std::string> CanonicalHost(absl::string_view host) {
  std::string h = absl::AsciiStrToLower(host);
  if (absl::StrContains(h, ':')) {
    in6_addr a6;
    if (inet_pton(AF_INET6, h.c_str(), &a6) != 1) {
      return Bad(absl::StrCat("host ", Quote(host), " is not a valid IPv6 address"));
    }
    return h;
  }
  if (!h.empty() && h.back() == '.') h.pop_back();
  if (h.empty() || h.size() > 253) {
    return Bad(absl::StrCat("host ", Quote(host), " is empty or too long"));
  }
  std::vector<absl::string_view> labels = absl::StrSplit(h, '.');
  for (absl::string_view label : labels) {
    if (label.empty() || label.size() > 63) {
      return Bad(absl::StrCat("host ", Quote(host), " has an empty or over-long label"));
    }
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') {
        return Bad(absl::StrCat("host ", Quote(host),
                                " has a character other than letters, digits, '-', '_' and '.'"));
      }
    }
  }
  if (absl::ascii_isdigit(labels.back().front()) && !CanonicalIpv4(h)) {
    return Bad(
        absl::StrCat("host ", Quote(host), " looks numeric but is not a dotted-quad IPv4 address"));
  }
  return h;
}

absl::StatusOr<Target> ParseTarget(const RequestHead& req, bool tls, bool forward_proxy) {
  Target t;
  absl::string_view target = req.target;
  if (req.method == "CONNECT") {
    absl::Status s = ParseAuthority(target, 0, &t);
    if (!s.ok()) return Bad(absl::StrCat("CONNECT target: ", s.message()));
    return t;
  }
  if (forward_proxy) {
    constexpr absl::string_view kScheme = "http://";
    if (!absl::StartsWithIgnoreCase(target, kScheme)) {
      return Bad(absl::StrCat("proxy request target ", Quote(target),
                              " is not an absolute http:// URI (use CONNECT for https)"));
    }
    absl::string_view rest = target.substr(kScheme.size());
    size_t end = rest.find_first_of("/?#");
    absl::string_view authority = rest.substr(0, end);
    absl::Status s = ParseAuthority(authority, 80, &t);
    if (!s.ok()) return Bad(absl::StrCat("proxy request target: ", s.message()));
    s = SplitPathQuery(end == absl::string_view::npos ? "" : rest.substr(end), &t);
    if (!s.ok()) return s;
    return t;
  }
  if (target.empty() || target.front() != '/') {
    return Bad(absl::StrCat("request target ", Quote(target), " is not an origin-form path"));
  }
  absl::Status s = SplitPathQuery(target, &t);
  if (!s.ok()) return s;
  int hosts = 0;
  std::string host;
  for (const Header& h : req.headers) {
    if (!absl::EqualsIgnoreCase(h.name, "Host")) continue;
    ++hosts;
    host = h.value;
  }
  if (hosts != 1) return Bad(absl::StrCat("request has ", hosts, " Host headers; it needs one"));
  s = ParseAuthority(host, tls ? 443 : 80, &t);
  if (!s.ok()) return Bad(absl::StrCat("Host header: ", s.message()));
  return t;
}

std::string HostHeaderValue(const Target& target, bool tls) {
  std::string host =
      absl::StrContains(target.host, ':') ? absl::StrCat("[", target.host, "]") : target.host;
  if (target.port == (tls ? 443 : 80)) return host;
  return absl::StrCat(host, ":", target.port);
}

absl::StatusOr<NormalizedPath> NormalizePath(absl::string_view path) {
  auto bad = [&](absl::string_view why) {
    return Bad(absl::StrCat("path ", Quote(path), " ", why));
  };
  if (path.empty() || path.front() != '/') return bad("does not start with '/'");
  NormalizedPath out;
  auto ambiguous = [&](std::string why) {
    if (out.ambiguity.empty()) out.ambiguity = std::move(why);
  };
  out.match.reserve(path.size());
  for (size_t i = 0; i < path.size(); ++i) {
    char c = path[i];
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f) return bad("has a control, space or non-ASCII byte");
    if (c == '?' || c == '#') return bad("has a query or fragment");
    if (c == '\\') {
      ambiguous("has a backslash, which some servers read as '/'");
      out.match += c;
      continue;
    }
    if (c != '%') {
      out.match += c;
      continue;
    }
    int hi = i + 1 < path.size() ? absl::ascii_isxdigit(path[i + 1]) : 0;
    int lo = i + 2 < path.size() ? absl::ascii_isxdigit(path[i + 2]) : 0;
    if (!hi || !lo) return bad("has a malformed percent escape");
    std::string escape(path.substr(i, 3));
    char d = absl::HexStringToBytes(escape.substr(1))[0];
    i += 2;
    if (d == '\0') return bad(absl::StrCat("has an encoded NUL (", escape, ")"));
    if (!IsUnreserved(d)) {
      // Servers decode escapes before routing ("%40" is "@", "%2f" a
      // separator to some, "%25" another escape to those decoding twice);
      // a glob on the encoded text would not see what they route to.
      ambiguous(absl::StrCat("has an encoded ", Quote(std::string(1, d)), " (", escape,
                             "), which servers decode before routing"));
    }
    if (IsUnreserved(d)) {
      out.match += d;
    } else {
      out.match += absl::AsciiStrToUpper(escape);
    }
  }
  std::vector<absl::string_view> segments = absl::StrSplit(absl::string_view(out.match).substr(1), '/');
  for (size_t i = 0; i < segments.size(); ++i) {
    absl::string_view seg = segments[i];
    if (seg.empty() && i + 1 < segments.size()) ambiguous("has an empty segment (\"//\")");
    absl::string_view name = seg.substr(0, seg.find(';'));
    if (name == "." || name == "..") return bad("has a \".\" or \"..\" segment");
    if (name.size() != seg.size()) {
      ambiguous("has a ';' parameter, which servers such as Tomcat strip before routing");
    }
  }
  return out;
}

BodyKind RequestBodyKind(const RequestHead& req, uint64_t* length) {
  *length = 0;
  if (!LastCoding(req.headers).empty()) return BodyKind::kChunked;
  if (HasContentLength(req.headers, length)) return BodyKind::kLength;
  return BodyKind::kNone;
}

bool HasConnectionOption(const std::vector<Header>& headers, absl::string_view option) {
  for (const Header& h : headers) {
    if (!absl::EqualsIgnoreCase(h.name, "Connection")) continue;
    for (absl::string_view listed : absl::StrSplit(h.value, ',')) {
      if (absl::EqualsIgnoreCase(StripOws(listed), option)) return true;
    }
  }
  return false;
}

BodyKind ResponseBodyKind(const ResponseHead& resp, absl::string_view request_method,
                          uint64_t* length) {
  *length = 0;
  if (request_method == "HEAD" || resp.status < 200 || resp.status == 204 || resp.status == 304 ||
      (request_method == "CONNECT" && resp.status < 300)) {
    return BodyKind::kNone;
  }
  std::string coding = LastCoding(resp.headers);
  if (!coding.empty()) return coding == "chunked" ? BodyKind::kChunked : BodyKind::kUntilClose;
  if (HasContentLength(resp.headers, length)) return BodyKind::kLength;
  return BodyKind::kUntilClose;
}

void ChunkedScanner::Fail(absl::string_view why) {
  state_ = State::kError;
  status_ = absl::InvalidArgumentError(absl::StrCat("malformed chunked body: ", why));
}

size_t ChunkedScanner::Feed(absl::string_view data) {
  size_t i = 0;
  while (i < data.size() && state_ != State::kDone && state_ != State::kError) {
    if (state_ == State::kData) {
      uint64_t n = std::min<uint64_t>(remaining_, data.size() - i);
      i += n;
      remaining_ -= n;
      if (remaining_ == 0) state_ = State::kDataCr;
      continue;
    }
    char c = data[i];
    switch (state_) {
      case State::kSize:
        if (absl::ascii_isxdigit(c)) {
          int digit = absl::ascii_isdigit(c) ? c - '0' : absl::ascii_tolower(c) - 'a' + 10;
          size_ = size_ * 16 + digit;
          // Checked per digit, so size_ never exceeds 16 * kMaxChunkSize.
          if (++size_digits_ > 16 || size_ > kMaxChunkSize) {
            Fail(absl::StrCat("chunk size is over ", kMaxChunkSize, " bytes"));
          }
        } else if (size_digits_ == 0) {
          Fail("chunk size is not hexadecimal");
        } else if (c == ';') {
          state_ = State::kExtension;
          extension_ = 0;
        } else if (c == '\r') {
          state_ = State::kSizeLf;
        } else {
          Fail(absl::StrCat("chunk size line has an unexpected byte ",
                            Quote(absl::string_view(&c, 1))));
        }
        break;
      case State::kExtension:
        if (c == '\r') {
          state_ = State::kSizeLf;
        } else if (IsControl(c)) {
          Fail("chunk extension has a control character");
        } else if (++extension_ > kMaxExtension) {
          Fail("chunk extension is too long");
        }
        break;
      case State::kSizeLf:
        if (c != '\n') {
          Fail("chunk size line does not end in CRLF");
          break;
        }
        remaining_ = size_;
        state_ = size_ == 0 ? State::kTrailerStart : State::kData;
        size_ = 0;
        size_digits_ = 0;
        break;
      case State::kDataCr:
        if (c == '\r') {
          state_ = State::kDataLf;
        } else {
          Fail("chunk data is longer than its size");
        }
        break;
      case State::kDataLf:
        if (c == '\n') {
          state_ = State::kSize;
        } else {
          Fail("chunk data is not followed by CRLF");
        }
        break;
      case State::kTrailerStart:
        if (c == '\r') {
          state_ = State::kFinalLf;
        } else if (IsTchar(c)) {
          state_ = State::kTrailerLine;
          trailer_colon_ = false;
        } else {
          Fail("trailer line does not start with a field name");
        }
        break;
      case State::kTrailerLine:
        if (c == '\r') {
          if (!trailer_colon_) {
            Fail("trailer line has no colon");
          } else {
            state_ = State::kTrailerLf;
          }
        } else if (IsControl(c)) {
          Fail("trailer line has a control character");
        } else {
          trailer_colon_ = trailer_colon_ || c == ':';
        }
        break;
      case State::kTrailerLf:
        if (c == '\n') {
          state_ = State::kTrailerStart;
        } else {
          Fail("trailer line does not end in CRLF");
        }
        break;
      case State::kFinalLf:
        if (c == '\n') {
          state_ = State::kDone;
        } else {
          Fail("last chunk is not followed by CRLF");
        }
        break;
      case State::kData:
      case State::kDone:
      case State::kError:
        break;
    }
    if (state_ == State::kError) break;
    // Every byte from the last-chunk line's LF to the end counts as trailer.
    if (state_ >= State::kTrailerStart && state_ <= State::kFinalLf && ++trailers_ > kMaxTrailers) {
      Fail("trailers are too long");
      break;
    }
    ++i;
  }
  return i;
}

std::string DenyResponse(absl::string_view host, uint16_t port, absl::string_view rule_text,
                         absl::string_view rule_id, absl::string_view detail) {
  std::string shown =
      absl::StrContains(host, ':') ? absl::StrCat("[", host, "]") : std::string(host);
  std::string body = absl::StrCat("airlock: blocked ", shown, ":", port, " by policy\n");
  if (rule_text.empty()) {
    body.append("rule: default deny (no rule allows this host)\n");
  } else if (rule_id.empty()) {
    absl::StrAppend(&body, "rule: ", rule_text, "\n");
  } else {
    absl::StrAppend(&body, "rule: ", rule_text, " (", rule_id, ")\n");
  }
  if (!detail.empty()) absl::StrAppend(&body, detail, "\n");
  absl::StrAppend(&body, "allow it with: airlock policy allow network ", host, "\n");
  return absl::StrCat(
      "HTTP/1.1 403 Forbidden\r\n"
      "Content-Type: text/plain; charset=utf-8\r\n"
      "Content-Length: ",
      body.size(),
      "\r\n"
      "Connection: close\r\n"
      "X-Airlock-Decision: deny\r\n"
      "\r\n",
      body);
}

}  // namespace airlock::proxyd
