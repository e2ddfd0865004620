// Credential formats (airlock.secrets.v1 Credential.format): how proxyd
// places a credential's value in a request. The one parser of format text,
// used by secretsd only: it refuses a bad format before storing it, and
// sends proxyd each credential's format parsed (Credential.placement,
// FormatToProto), which proxyd reads back with FormatFromProto.
#ifndef AIRLOCK_COMMON_INJECT_FORMAT_H_
#define AIRLOCK_COMMON_INJECT_FORMAT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/secrets/v1/secrets.pb.h"

namespace airlock {

// The longest format ParseFormat accepts.
inline constexpr size_t kMaxFormatBytes = 1024;

// Format is a parsed credential format.
struct Format {
  enum class Kind {
    // One header carries the value: "header:<name>", "header:<name>=<template>",
    // "bearer", "basic:<user>".
    kHeader,
    // "replace": every occurrence of the sentinel becomes the value.
    kReplace,
  };
  Kind kind = Kind::kReplace;
  // kHeader: the header's name ("Authorization" for bearer and basic).
  std::string header;
  // kHeader: the header's text before and after the value ("Bearer " and "";
  // a template's text around its "%s").
  std::string prefix;
  std::string suffix;
  // kHeader: the value goes in as base64(<basic_user>:<value>).
  bool basic = false;
  std::string basic_user;

  // HeaderValue is the value of `header` that carries `value` (kHeader only).
  std::string HeaderValue(absl::string_view value) const;
};

// ParseFormat accepts:
//   "header:<name>"             header <name> carries the value
//   "header:<name>=<template>"  header <name> carries <template> with its one
//                               "%s" replaced by the value ("Token %s")
//   "bearer"                    Authorization: Bearer <value>
//   "basic:<user>"              Authorization: Basic base64(<user>:<value>)
//   "replace"                   every occurrence of the sentinel becomes the value
// <name> is an HTTP field name other than the ones that frame, route or
// encode a request or that proxyd removes itself (Host, Content-Length,
// Transfer-Encoding, Content-Encoding, Connection, Keep-Alive, Upgrade, TE,
// Trailer, Expect, Proxy-Connection, Proxy-Authorization). A <template> is
// printable ASCII holding the two characters "%s" exactly once (any other
// '%' is literal); a <user> is printable ASCII without ':' and may be
// empty. INVALID_ARGUMENT says what is wrong, quoting the format (never a
// value: a format holds none).
absl::StatusOr<Format> ParseFormat(absl::string_view format);

// A Format as the message secretsd sends proxyd (Credential.placement), and
// back. FormatFromProto holds a message to the rules ParseFormat holds text
// to (the header's name, printable text, a basic user without ':'), so a
// placement proxyd takes is one a format could have said; INVALID_ARGUMENT
// otherwise, and for a message that says neither header nor replace.
secrets::v1::CredentialPlacement FormatToProto(const Format& format);
absl::StatusOr<Format> FormatFromProto(const secrets::v1::CredentialPlacement& placement);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_INJECT_FORMAT_H_
