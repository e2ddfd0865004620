// Who may call: the management API takes an access token from a token
// exchange (whose API token still exists); a sandbox's data plane takes
// only an endpoint credential for that sandbox and audience carrying the
// operation's permission. The decision is here and nowhere else:
//   no or malformed bearer, bad signature, expired, a revoked API token,
//   the wrong kind of credential, another sandbox or audience -> 401;
//   a valid endpoint credential without the permission -> 403.
#ifndef AIRLOCK_APID_AUTH_H_
#define AIRLOCK_APID_AUTH_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "apid/api_error.h"
#include "apid/http_types.h"
#include "apid/signer.h"
#include "apid/token_store.h"

namespace airlock::apid {

// The data-plane permissions an endpoint credential can carry.
const std::vector<std::string>& EndpointPermissions();

class Authenticator {
 public:
  Authenticator(const Signer* signer, TokenStore* tokens) : signer_(signer), tokens_(tokens) {}

  // Management returns the caller's claims, or the 401 to answer.
  std::optional<ApiError> Management(const HttpRequest& req, Claims* out) const;
  // Endpoint checks a data-plane call on sandbox `uid` served at
  // `audience` that needs `permission`.
  std::optional<ApiError> Endpoint(const HttpRequest& req, const std::string& uid,
                                   const std::string& audience,
                                   const std::string& permission) const;

  // IssueAccess mints an access token for API token `record`, valid
  // `ttl_s` seconds from `now`.
  std::string IssueAccess(const TokenRecord& record, int64_t now, int64_t ttl_s) const;
  // IssueEndpoint mints an endpoint credential from a management caller.
  std::string IssueEndpoint(const Claims& caller, const std::string& uid,
                            const std::vector<std::string>& permissions,
                            const std::string& audience, int64_t expires_at) const;

 private:
  std::optional<ApiError> Verify(const HttpRequest& req, Claims* out) const;
  const Signer* signer_;
  TokenStore* tokens_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_AUTH_H_
