#include "proxyd/inject.h"

#include <zlib.h>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/inject_format.h"

namespace airlock::proxyd {

namespace {

// Inflate undoes gzip or zlib/deflate framing; false when the data is not
// that, or inflates past `limit`.
bool Inflate(absl::string_view in, size_t limit, std::string* out) {
  z_stream z{};
  // 15 + 32: detect gzip or zlib headers; raw deflate is tried next.
  for (int window : {15 + 32, -15}) {
    z = z_stream{};
    if (inflateInit2(&z, window) != Z_OK) return false;
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    out->clear();
    char buf[65536];
    int rc = Z_OK;
    while (rc == Z_OK) {
      z.next_out = reinterpret_cast<Bytef*>(buf);
      z.avail_out = sizeof(buf);
      rc = inflate(&z, Z_NO_FLUSH);
      out->append(buf, sizeof(buf) - z.avail_out);
      if (out->size() > limit) rc = Z_MEM_ERROR;
      if (rc == Z_BUF_ERROR && z.avail_in == 0) break;
    }
    inflateEnd(&z);
    if (rc == Z_STREAM_END) return true;
  }
  return false;
}

bool SentinelIn(absl::string_view text, const std::vector<Placement>& creds) {
  for (const Placement& c : creds) {
    if (!c.sentinel.empty() && absl::StrContains(text, c.sentinel)) return true;
  }
  return false;
}

// Decodes %XX and '+' in a query component; false on a malformed escape.
bool QueryDecode(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] == '+') {
      out->push_back(' ');
    } else if (in[i] != '%') {
      out->push_back(in[i]);
    } else {
      if (i + 2 >= in.size() || !absl::ascii_isxdigit(in[i + 1]) ||
          !absl::ascii_isxdigit(in[i + 2])) {
        return false;
      }
      out->push_back(static_cast<char>(std::stoi(std::string(in.substr(i + 1, 2)), nullptr, 16)));
      i += 2;
    }
  }
  return true;
}

}  // namespace

bool RegistryReadOnly(const RequestHead& req) {
  if (req.method != "GET" && req.method != "HEAD") return false;
  size_t q = req.target.find('?');
  if (q == std::string::npos) return true;
  for (absl::string_view pair : absl::StrSplit(absl::string_view(req.target).substr(q + 1), '&')) {
    std::pair<absl::string_view, absl::string_view> kv = absl::StrSplit(pair, absl::MaxSplits('=', 1));
    std::string key, value;
    if (!QueryDecode(kv.first, &key) || !QueryDecode(kv.second, &value)) return false;
    key = absl::AsciiStrToLower(key);
    if (key == "offline_token" || key == "refresh_token") return false;
    if (key != "scope") continue;
    // "repository:NAME:ACTIONS", several separated by spaces.
    for (absl::string_view scope : absl::StrSplit(value, ' ', absl::SkipEmpty())) {
      size_t colon = scope.rfind(':');
      if (colon == absl::string_view::npos) return false;
      for (absl::string_view action : absl::StrSplit(scope.substr(colon + 1), ',')) {
        if (action != "pull") return false;
      }
    }
  }
  return true;
}

std::string Base64(absl::string_view data) { return absl::Base64Escape(data); }

Placement PlacementFromWire(const secrets::v1::Credential& c) {
  auto format = FormatFromProto(c.placement());
  return Placement{c.id(), c.sentinel(), c.value(), format.value_or(Format{}),
                   format.ok() ? "" : std::string(format.status().message())};
}

absl::StatusOr<std::vector<std::string>> InjectHead(RequestHead* req,
                                                    const std::vector<Placement>& creds) {
  RequestHead out = *req;
  std::vector<std::string> placed;
  for (const Placement& c : creds) {
    if (absl::StartsWith(c.id, "registry:") && !RegistryReadOnly(out)) continue;
    if (!c.invalid.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("credential ", c.id, " cannot be placed: ", c.invalid));
    }
    const Format& format = c.format;
    bool done = false;
    if (format.kind == Format::Kind::kHeader) {
      std::string current = out.Get(format.header);
      // The guest's own value stays; the sentinel (bare, as a bearer token,
      // inside a template's text or inside basic credentials) is replaced,
      // and so is a missing one. A credential with no sentinel (a registry
      // credential) only fills a missing header.
      bool has = !c.sentinel.empty();
      bool sentinel = current.empty() || (has && absl::StrContains(current, c.sentinel));
      if (!sentinel && has && absl::StartsWith(absl::AsciiStrToLower(current), "basic ")) {
        std::string decoded;
        sentinel = absl::Base64Unescape(absl::StripAsciiWhitespace(current.substr(6)), &decoded) &&
                   absl::StrContains(decoded, c.sentinel);
      }
      if (sentinel) {
        out.Set(format.header, format.HeaderValue(c.value));
        done = true;
      }
    } else {
      if (c.sentinel.size() < 8) {
        return absl::InvalidArgumentError(
            absl::StrCat("credential ", c.id, " has a placeholder too short to replace safely"));
      }
      for (Header& h : out.headers) {
        if (absl::StrContains(h.value, c.sentinel)) {
          h.value = absl::StrReplaceAll(h.value, {{c.sentinel, c.value}});
          done = true;
        }
      }
      if (absl::StrContains(out.target, c.sentinel)) {
        out.target = absl::StrReplaceAll(out.target, {{c.sentinel, c.value}});
        done = true;
      }
    }
    if (done) placed.push_back(c.id);
  }
  *req = std::move(out);
  return placed;
}

absl::Status InjectBody(const RequestHead& req, const std::vector<Placement>& creds,
                        std::string* body, std::vector<std::string>* placed) {
  std::string coding = absl::AsciiStrToLower(req.Get("Content-Encoding"));
  if (coding.empty() || coding == "identity") {
    for (const Placement& c : creds) {
      if (!c.invalid.empty() || c.format.kind != Format::Kind::kReplace ||
          c.sentinel.size() < 8) {
        continue;
      }
      if (absl::StrContains(*body, c.sentinel)) {
        *body = absl::StrReplaceAll(*body, {{c.sentinel, c.value}});
        placed->push_back(c.id);
      }
    }
    return absl::OkStatus();
  }
  if (coding == "gzip" || coding == "x-gzip" || coding == "deflate") {
    std::string plain;
    if (!Inflate(*body, 16 * kMaxInspectedBody, &plain) || SentinelIn(plain, creds)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the request body is ", coding,
          "-encoded and holds a credential sentinel (or cannot be checked); proxyd cannot put "
          "the real value inside a compressed body, so the request was not sent. Send the "
          "sentinel in a header, or the body uncompressed"));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::proxyd
