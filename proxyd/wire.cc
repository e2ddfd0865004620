#include "proxyd/wire.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "proxyd/http.h"

namespace airlock::proxyd {
namespace {

absl::Status Bad(absl::string_view what) { return absl::InvalidArgumentError(what); }

// Reader takes big-endian integers and byte runs off the front of a buffer;
// every read checks the length first and fails without moving on a short one.
class Reader {
 public:
  explicit Reader(absl::string_view data) : data_(data) {}

  bool U8(uint32_t* v) { return Int(1, v); }
  bool U16(uint32_t* v) { return Int(2, v); }
  bool U24(uint32_t* v) { return Int(3, v); }
  bool Bytes(size_t n, absl::string_view* out) {
    if (data_.size() < n) return false;
    *out = data_.substr(0, n);
    data_.remove_prefix(n);
    return true;
  }
  // Vector reads a length of `width` bytes, then that many bytes.
  bool Vector(int width, absl::string_view* out) {
    uint32_t n = 0;
    absl::string_view saved = data_;
    if (!Int(width, &n) || !Bytes(n, out)) {
      data_ = saved;
      return false;
    }
    return true;
  }
  size_t size() const { return data_.size(); }

 private:
  bool Int(int width, uint32_t* v) {
    if (data_.size() < static_cast<size_t>(width)) return false;
    *v = 0;
    for (int i = 0; i < width; ++i) *v = (*v << 8) | static_cast<uint8_t>(data_[i]);
    data_.remove_prefix(width);
    return true;
  }
  absl::string_view data_;
};

constexpr uint8_t kTlsHandshake = 0x16;
constexpr uint8_t kClientHello = 1;
constexpr uint32_t kExtServerName = 0;
constexpr uint8_t kHostName = 0;
// TLSPlaintext.length is at most 2^14 (RFC 8446 5.1).
constexpr size_t kMaxRecord = 1 << 14;
// A ClientHello is a few KiB even with post-quantum key shares.
constexpr size_t kMaxClientHello = 1 << 16;

absl::Status BadHello(absl::string_view why) {
  return Bad(absl::StrCat("malformed TLS ClientHello: ", why));
}

// ServerName reads the server_name extension body (RFC 6066 3).
absl::StatusOr<std::string> ServerName(absl::string_view ext) {
  Reader r(ext);
  absl::string_view list;
  if (!r.Vector(2, &list) || r.size() != 0 || list.empty()) {
    return BadHello("server_name list length does not match the extension");
  }
  Reader names(list);
  std::string host;
  bool have = false;
  while (names.size() > 0) {
    uint32_t type = 0;
    absl::string_view name;
    if (!names.U8(&type) || !names.Vector(2, &name)) {
      return BadHello("server_name entry is truncated");
    }
    if (type != kHostName) continue;
    if (have) return BadHello("server_name has more than one host_name");
    if (name.empty()) return BadHello("server_name host_name is empty");
    absl::StatusOr<std::string> canonical = CanonicalHost(name);
    if (!canonical.ok()) {
      return BadHello(absl::StrCat("server_name: ", canonical.status().message()));
    }
    host = *std::move(canonical);
    have = true;
  }
  return host;
}

absl::StatusOr<std::string> ClientHelloSni(absl::string_view body) {
  Reader r(body);
  uint32_t version = 0;
  absl::string_view random, session, suites, compression;
  if (!r.U16(&version) || !r.Bytes(32, &random) || !r.Vector(1, &session) ||
      !r.Vector(2, &suites) || !r.Vector(1, &compression)) {
    return BadHello("truncated before the extensions");
  }
  if ((version >> 8) != 3) return BadHello(absl::StrFormat("legacy_version is 0x%04x", version));
  if (session.size() > 32) return BadHello("session id is longer than 32 bytes");
  if (suites.empty() || suites.size() % 2 != 0) return BadHello("cipher suite list is malformed");
  if (compression.empty()) return BadHello("compression method list is empty");
  if (r.size() == 0) return std::string();  // No extensions, so no SNI.
  absl::string_view extensions;
  if (!r.Vector(2, &extensions) || r.size() != 0) {
    return BadHello("extensions length does not match the message");
  }
  Reader ext(extensions);
  std::string sni;
  bool seen = false;
  while (ext.size() > 0) {
    uint32_t type = 0;
    absl::string_view data;
    if (!ext.U16(&type) || !ext.Vector(2, &data)) return BadHello("extension is truncated");
    if (type != kExtServerName) continue;
    if (seen) return BadHello("server_name extension appears twice");
    seen = true;
    absl::StatusOr<std::string> name = ServerName(data);
    if (!name.ok()) return name.status();
    sni = *std::move(name);
  }
  return sni;
}

absl::Status BadDns(absl::string_view why) {
  return Bad(absl::StrCat("malformed DNS query: ", why));
}

constexpr size_t kDnsHeader = 12;
constexpr size_t kMaxDnsName = 255;
constexpr uint16_t kFlagQr = 0x8000;
constexpr uint16_t kFlagRd = 0x0100;
constexpr uint16_t kFlagRa = 0x0080;

// ReadName reads the name at `*pos`, leaving *pos just past it (past the
// first pointer if there is one). Termination: each pointer must point
// before the start of the run of labels it ends, so the runs start at
// strictly decreasing offsets, and the name is capped at 255 bytes.
absl::Status ReadName(absl::string_view packet, size_t* pos, std::string* name, std::string* wire) {
  size_t p = *pos;
  size_t run_start = p;
  size_t after = 0;  // 0 until the first pointer fixes it.
  std::vector<std::string> labels;
  size_t wire_size = 0;
  while (true) {
    if (p >= packet.size()) return BadDns("name runs past the end of the packet");
    uint8_t len = packet[p];
    if ((len & 0xc0) == 0xc0) {
      if (p + 1 >= packet.size()) return BadDns("compression pointer is truncated");
      size_t target = (static_cast<size_t>(len & 0x3f) << 8) | static_cast<uint8_t>(packet[p + 1]);
      if (after == 0) after = p + 2;
      if (target < kDnsHeader) return BadDns("compression pointer points into the header");
      if (target >= run_start) return BadDns("compression pointer does not point backwards");
      p = target;
      run_start = target;
      continue;
    }
    // Two high bits of 01 or 10 are reserved; 00 leaves labels <= 63 bytes.
    if (len & 0xc0) return BadDns("name uses a reserved label type");
    wire_size += 1 + len;
    if (wire_size > kMaxDnsName) return BadDns("name is longer than 255 bytes");
    if (len == 0) {
      if (after == 0) after = p + 1;
      break;
    }
    if (packet.size() - (p + 1) < len) return BadDns("label runs past the end of the packet");
    absl::string_view label = packet.substr(p + 1, len);
    for (char c : label) {
      if (!absl::ascii_isalnum(c) && c != '-' && c != '_') {
        return BadDns("label has a byte other than letters, digits, '-' and '_'");
      }
    }
    labels.emplace_back(label);
    p += 1 + len;
  }
  wire->clear();
  for (const std::string& l : labels) {
    wire->push_back(static_cast<char>(l.size()));
    wire->append(l);
  }
  wire->push_back('\0');
  *name = absl::AsciiStrToLower(absl::StrJoin(labels, "."));
  *pos = after;
  return absl::OkStatus();
}

void Put16(std::string* out, uint16_t v) {
  out->push_back(static_cast<char>(v >> 8));
  out->push_back(static_cast<char>(v & 0xff));
}

void Put32(std::string* out, uint32_t v) {
  Put16(out, v >> 16);
  Put16(out, v & 0xffff);
}

// EncodeName writes a checked name in wire form.
std::string EncodeName(absl::string_view name) {
  std::string out;
  if (!name.empty()) {
    for (absl::string_view label : absl::StrSplit(name, '.')) {
      out.push_back(static_cast<char>(label.size()));
      out.append(label.data(), label.size());
    }
  }
  out.push_back('\0');
  return out;
}

std::string Response(const DnsQuestion& q, uint8_t rcode, uint16_t answers) {
  std::string out;
  Put16(&out, q.id);
  Put16(&out, kFlagQr | (q.recursion_desired ? kFlagRd : 0) | kFlagRa | (rcode & 0x0f));
  Put16(&out, 1);        // QDCOUNT
  Put16(&out, answers);  // ANCOUNT
  Put16(&out, 0);        // NSCOUNT
  Put16(&out, 0);        // ARCOUNT
  out.append(q.wire_name.empty() ? EncodeName(q.name) : q.wire_name);
  Put16(&out, q.qtype);
  Put16(&out, q.qclass);
  return out;
}

}  // namespace

absl::StatusOr<std::string> ParseClientHelloSni(absl::string_view data, bool* need_more) {
  *need_more = false;
  // Reassemble the handshake message from as many records as it spans.
  std::string handshake;
  size_t pos = 0;
  while (true) {
    if (handshake.size() >= 4) {
      if (static_cast<uint8_t>(handshake[0]) != kClientHello) {
        return BadHello(absl::StrCat("handshake message type is ",
                                     static_cast<int>(static_cast<uint8_t>(handshake[0])),
                                     ", not ClientHello"));
      }
      uint32_t len = 0;
      Reader(absl::string_view(handshake).substr(1, 3)).U24(&len);
      if (len > kMaxClientHello) return BadHello(absl::StrCat("it claims ", len, " bytes"));
      if (handshake.size() >= 4 + len) {
        return ClientHelloSni(absl::string_view(handshake).substr(4, len));
      }
    }
    absl::string_view rec = data.substr(pos);
    if (!rec.empty() && static_cast<uint8_t>(rec[0]) != kTlsHandshake) {
      return Bad(absl::StrFormat("not a TLS handshake record: byte %d is 0x%02x, not 0x16", pos,
                                 static_cast<uint8_t>(rec[0])));
    }
    if (rec.size() >= 2 && rec[1] != 3) {
      return Bad(absl::StrFormat("not a TLS handshake record: version major is 0x%02x, not 0x03",
                                 static_cast<uint8_t>(rec[1])));
    }
    if (rec.size() < 5) break;
    uint32_t len = 0;
    Reader(rec.substr(3, 2)).U16(&len);
    if (len == 0 || len > kMaxRecord) return BadHello(absl::StrCat("record length is ", len));
    if (rec.size() < 5 + len) break;
    handshake.append(rec.data() + 5, len);
    pos += 5 + len;
  }
  *need_more = true;
  return absl::UnavailableError("TLS ClientHello is incomplete; read more bytes");
}

bool LooksLikeTls(absl::string_view b) {
  if (b.empty() || static_cast<uint8_t>(b[0]) != kTlsHandshake) return false;
  if (b.size() >= 2 && b[1] != 3) return false;
  if (b.size() >= 3 && static_cast<uint8_t>(b[2]) > 4) return false;
  return true;
}

bool LooksLikeHttp(absl::string_view b) {
  // Lenient servers skip blank lines before a request and take any token as
  // a method, so anything that could start one counts: a strict parser
  // then refuses what is not a real request.
  size_t i = 0;
  while (i < b.size() && (b[i] == '\r' || b[i] == '\n' || b[i] == ' ' || b[i] == '\t')) ++i;
  if (i == b.size()) return i > 0;
  char c = b[i];
  return absl::ascii_isalnum(c) || absl::StrContains("!#$%&'*+-.^_`|~", c);
}

bool IsRequestLine(absl::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  size_t sp1 = line.find(' ');
  if (sp1 == 0 || sp1 == absl::string_view::npos) return false;
  for (char c : line.substr(0, sp1)) {
    if (!absl::ascii_isalnum(c) && !absl::StrContains("!#$%&'*+-.^_`|~", c)) return false;
  }
  size_t sp2 = line.rfind(' ');
  if (sp2 == sp1) return false;
  absl::string_view version = line.substr(sp2 + 1);
  return version == "HTTP/1.1" || version == "HTTP/1.0";
}

absl::StatusOr<DnsQuestion> ParseDnsQuery(absl::string_view packet) {
  Reader r(packet);
  uint32_t id = 0, flags = 0, qd = 0, an = 0, ns = 0, ar = 0;
  if (!r.U16(&id) || !r.U16(&flags) || !r.U16(&qd) || !r.U16(&an) || !r.U16(&ns) || !r.U16(&ar)) {
    return BadDns(absl::StrCat("packet is ", packet.size(), " bytes, shorter than a header"));
  }
  if (flags & kFlagQr) return BadDns("it is a response (QR=1)");
  if (((flags >> 11) & 0xf) != 0) return BadDns(absl::StrCat("opcode is ", (flags >> 11) & 0xf));
  if (qd != 1) return BadDns(absl::StrCat("it has ", qd, " questions, not one"));
  if (an != 0 || ns != 0) return BadDns("it has answer or authority records");
  DnsQuestion q;
  q.id = id;
  q.recursion_desired = (flags & kFlagRd) != 0;
  size_t pos = kDnsHeader;
  absl::Status name = ReadName(packet, &pos, &q.name, &q.wire_name);
  if (!name.ok()) return name;
  Reader tail(packet.substr(pos));
  uint32_t qtype = 0, qclass = 0;
  if (!tail.U16(&qtype) || !tail.U16(&qclass)) return BadDns("question is truncated");
  if (ar == 0 && tail.size() != 0) return BadDns("bytes follow the question");
  q.qtype = qtype;
  q.qclass = qclass;
  return q;
}

std::string DnsAnswerA(const DnsQuestion& q, const std::array<uint8_t, 4>& ip, uint32_t ttl) {
  std::string out = Response(q, kDnsNoError, 1);
  Put16(&out, 0xc000 | kDnsHeader);  // The question's name.
  Put16(&out, kDnsTypeA);
  Put16(&out, kDnsClassIn);
  Put32(&out, ttl);
  Put16(&out, 4);
  out.append(reinterpret_cast<const char*>(ip.data()), ip.size());
  return out;
}

std::string DnsEmptyAnswer(const DnsQuestion& q, uint8_t rcode) { return Response(q, rcode, 0); }

std::string DnsFormatError(absl::string_view packet) {
  if (packet.size() < 2) return "";
  uint8_t hi = packet.size() > 2 ? static_cast<uint8_t>(packet[2]) : 0;
  if (hi & 0x80) return "";
  std::string out(packet.substr(0, 2));
  // Opcode and RD echo the query's; everything else is ours.
  Put16(&out, kFlagQr | ((hi & 0x79) << 8) | kFlagRa | kDnsFormErr);
  out.append(8, '\0');
  return out;
}

}  // namespace airlock::proxyd
