// Credential injection: the guest holds only a sentinel ("proxy-managed",
// or a custom secret's random placeholder); on a request proxyd has already
// allowed, to a host a credential names, the sentinel is swapped for the
// real value here, in the request head (and, for custom placeholders, in
// a small uncompressed body). A request whose credential cannot be placed
// safely is refused rather than sent half-rewritten.
#ifndef AIRLOCK_PROXYD_INJECT_H_
#define AIRLOCK_PROXYD_INJECT_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/inject_format.h"
#include "protos/secrets/v1/secrets.pb.h"
#include "proxyd/http.h"

namespace airlock::proxyd {

// Placement is one credential to place, as secretsd's Resolve gives it.
struct Placement {
  std::string id;
  std::string sentinel;
  std::string value;
  // How: a header to fill, or the sentinel to swap (common/inject_format.h),
  // as secretsd parsed it (Credential.placement; proxyd parses no format).
  Format format;
  // Why secretsd's placement is not one proxyd can use ("" when it is): the
  // request is refused (InjectHead), never sent with half its credentials.
  std::string invalid;
};

// PlacementFromWire is the Placement of a credential secretsd's Resolve
// returned, its placement read with FormatFromProto (`invalid` says why
// when it cannot be used).
Placement PlacementFromWire(const secrets::v1::Credential& c);

// Bodies up to this size are read whole and checked for sentinels when a
// credential applies; larger ones stream unchanged.
inline constexpr size_t kMaxInspectedBody = 1 << 20;

// InjectHead places `creds` in `req`: a header the format names is set when
// the guest left it out or sent the sentinel in it (a value of the guest's
// own is left alone), and "replace" sentinels are swapped in every header
// value and in the request target. Returns the ids of the credentials
// placed. INVALID_ARGUMENT for a credential whose placement is invalid
// (never sent half-done: `req` is untouched then).
absl::StatusOr<std::vector<std::string>> InjectHead(RequestHead* req,
                                                    const std::vector<Placement>& creds);

// InjectBody checks a whole request body for sentinels: in an identity
// body, "replace" placeholders are swapped (the caller fixes
// Content-Length); in a gzip or deflate body a sentinel cannot be placed,
// so finding one is FAILED_PRECONDITION (the caller answers 422). Other
// content codings cannot be looked into and pass unchanged.
absl::Status InjectBody(const RequestHead& req, const std::vector<Placement>& creds,
                        std::string* body, std::vector<std::string>* placed);

// RegistryReadOnly says a request may carry a registry credential (one
// whose id starts with "registry:", which InjectHead places only then): it
// reads (GET or HEAD), asks a token service for pull access at most (every
// action of every `scope` parameter is "pull"), and asks for no long-lived
// token (`offline_token`). A guest can pull with the host's credential, but
// cannot push, delete, or take away a token worth more than a pull.
bool RegistryReadOnly(const RequestHead& req);

// Base64 of `data` (standard alphabet, padded).
std::string Base64(absl::string_view data);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_INJECT_H_
