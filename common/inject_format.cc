#include "common/inject_format.h"

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {

namespace {

constexpr char kTemplateMarker[] = "%s";

// Headers a credential may not be placed in: setting one would change how
// the request is framed (a value as Content-Length desynchronizes the
// upstream connection), routed or decoded, or proxyd removes it before
// sending.
constexpr const char* kReservedHeaders[] = {
    "host",       "content-length", "transfer-encoding", "content-encoding",
    "connection", "keep-alive",     "upgrade",           "te",
    "trailer",    "expect",         "proxy-connection",  "proxy-authorization",
};

// RFC 9110 tchar: the characters of a field name.
bool IsTokenChar(char c) {
  return absl::ascii_isalnum(c) ||
         absl::string_view("!#$%&'*+-.^_`|~").find(c) != absl::string_view::npos;
}

bool IsPrintable(absl::string_view text) {
  for (char c : text) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

std::string Quote(absl::string_view text) {
  constexpr size_t kMax = 64;
  bool cut = text.size() > kMax;
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMax)), cut ? "...\"" : "\"");
}

// HeaderNameProblem says why `name` cannot carry a credential ("" when it can).
std::string HeaderNameProblem(absl::string_view name) {
  if (name.empty()) return "the header name is empty";
  for (char c : name) {
    if (!IsTokenChar(c)) return "the header name is not an HTTP field name";
  }
  for (const char* reserved : kReservedHeaders) {
    if (absl::EqualsIgnoreCase(name, reserved)) {
      return absl::StrCat("header ", name,
                          " frames, routes or encodes the request (or proxyd removes it); a "
                          "credential cannot go there");
    }
  }
  return "";
}

absl::Status Bad(absl::string_view format, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("format ", Quote(format), ": ", why));
}

}  // namespace

std::string Format::HeaderValue(absl::string_view value) const {
  if (basic) {
    return absl::StrCat(prefix, absl::Base64Escape(absl::StrCat(basic_user, ":", value)), suffix);
  }
  return absl::StrCat(prefix, value, suffix);
}

absl::StatusOr<Format> ParseFormat(absl::string_view format) {
  if (format.size() > kMaxFormatBytes) {
    return Bad(format, absl::StrCat("longer than ", kMaxFormatBytes, " bytes"));
  }
  Format f;
  if (format == "replace") return f;
  f.kind = Format::Kind::kHeader;
  if (format == "bearer") {
    f.header = "Authorization";
    f.prefix = "Bearer ";
    return f;
  }
  absl::string_view rest = format;
  if (absl::ConsumePrefix(&rest, "basic:")) {
    if (!IsPrintable(rest) || absl::StrContains(rest, ':')) {
      return Bad(format, "the basic user must be printable ASCII without ':'");
    }
    f.header = "Authorization";
    f.prefix = "Basic ";
    f.basic = true;
    f.basic_user = std::string(rest);
    return f;
  }
  if (!absl::ConsumePrefix(&rest, "header:")) {
    return Bad(format,
               "unknown; use header:<name>, header:<name>=<template>, bearer, basic:<user> or "
               "replace");
  }
  size_t eq = rest.find('=');
  absl::string_view name = rest.substr(0, eq);
  if (std::string why = HeaderNameProblem(name); !why.empty()) return Bad(format, why);
  f.header = std::string(name);
  if (eq == absl::string_view::npos) return f;
  absl::string_view tmpl = rest.substr(eq + 1);
  size_t at = tmpl.find(kTemplateMarker);
  if (!IsPrintable(tmpl) || at == absl::string_view::npos ||
      tmpl.find(kTemplateMarker, at + 1) != absl::string_view::npos) {
    return Bad(format, "the template must be printable ASCII holding \"%s\" exactly once");
  }
  f.prefix = std::string(tmpl.substr(0, at));
  f.suffix = std::string(tmpl.substr(at + 2));
  return f;
}

secrets::v1::CredentialPlacement FormatToProto(const Format& format) {
  secrets::v1::CredentialPlacement out;
  if (format.kind == Format::Kind::kReplace) {
    out.mutable_replace();
    return out;
  }
  secrets::v1::HeaderPlacement* h = out.mutable_header();
  h->set_name(format.header);
  h->set_prefix(format.prefix);
  h->set_suffix(format.suffix);
  h->set_basic(format.basic);
  h->set_basic_user(format.basic_user);
  return out;
}

absl::StatusOr<Format> FormatFromProto(const secrets::v1::CredentialPlacement& placement) {
  Format f;
  switch (placement.how_case()) {
    case secrets::v1::CredentialPlacement::kReplace:
      return f;
    case secrets::v1::CredentialPlacement::kHeader:
      break;
    default:
      return absl::InvalidArgumentError("the placement names neither a header nor replace");
  }
  const secrets::v1::HeaderPlacement& h = placement.header();
  auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("placement: ", why));
  };
  if (std::string why = HeaderNameProblem(h.name()); !why.empty()) return bad(why);
  if (!IsPrintable(h.prefix()) || !IsPrintable(h.suffix()) ||
      h.prefix().size() + h.suffix().size() > kMaxFormatBytes) {
    return bad("the header's text must be printable ASCII");
  }
  if (h.basic() ? !IsPrintable(h.basic_user()) || absl::StrContains(h.basic_user(), ':')
                : !h.basic_user().empty()) {
    return bad("the basic user must be printable ASCII without ':', and only with basic");
  }
  f.kind = Format::Kind::kHeader;
  f.header = h.name();
  f.prefix = h.prefix();
  f.suffix = h.suffix();
  f.basic = h.basic();
  f.basic_user = h.basic_user();
  return f;
}

}  // namespace airlock
