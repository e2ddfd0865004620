#include "apid/auth.h"

#include <time.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace airlock::apid {

const std::vector<std::string>& EndpointPermissions() {
  static const std::vector<std::string> p = {"sandboxesExec", "sandboxesFilesRead",
                                             "sandboxesFilesWrite"};
  return p;
}

std::optional<ApiError> Authenticator::Verify(const HttpRequest& req, Claims* out) const {
  std::string h = req.Header("authorization");
  if (h.empty()) {
    return ApiError::Unauthenticated("missing Authorization: Bearer <token>");
  }
  if (h.size() < 7 || !absl::EqualsIgnoreCase(h.substr(0, 7), "Bearer ")) {
    return ApiError::Unauthenticated("the Authorization header must be \"Bearer <token>\"");
  }
  std::string token(absl::StripAsciiWhitespace(h.substr(7)));
  auto claims = signer_->Verify(token, time(nullptr));
  if (!claims.ok()) return ApiError::Unauthenticated(std::string(claims.status().message()));
  if (!tokens_->Live(claims->subject, claims->token_id)) {
    return ApiError::Unauthenticated(absl::StrCat(
        "API token \"", claims->subject, "\" was removed; credentials made from it are void"));
  }
  *out = std::move(*claims);
  return std::nullopt;
}

std::optional<ApiError> Authenticator::Management(const HttpRequest& req, Claims* out) const {
  if (auto e = Verify(req, out)) return e;
  if (out->kind != "access") {
    return ApiError::Unauthenticated(
        "an endpoint credential does not authorize management calls; use an access token");
  }
  return std::nullopt;
}

std::optional<ApiError> Authenticator::Endpoint(const HttpRequest& req, const std::string& uid,
                                                const std::string& audience,
                                                const std::string& permission) const {
  Claims c;
  if (auto e = Verify(req, &c)) return e;
  if (c.kind != "endpoint") {
    return ApiError::Unauthenticated(
        "the sandbox endpoint takes only a scoped endpoint credential "
        "(POST /v1/sandboxes/<uid>/endpoint-credentials), not a management token");
  }
  if (c.sandbox != uid || c.audience != audience) {
    return ApiError::Unauthenticated(absl::StrCat(
        "this endpoint credential is for sandboxes/", c.sandbox, ", not sandboxes/", uid));
  }
  if (std::find(c.permissions.begin(), c.permissions.end(), permission) == c.permissions.end()) {
    return ApiError::PermissionDenied(
        absl::StrCat("this endpoint credential does not grant ", permission));
  }
  return std::nullopt;
}

std::string Authenticator::IssueAccess(const TokenRecord& record, int64_t now,
                                       int64_t ttl_s) const {
  Claims c;
  c.kind = "access";
  c.subject = record.name;
  c.token_id = record.id;
  c.expires_at = now + ttl_s;
  return signer_->Sign(c);
}

std::string Authenticator::IssueEndpoint(const Claims& caller, const std::string& uid,
                                         const std::vector<std::string>& permissions,
                                         const std::string& audience,
                                         int64_t expires_at) const {
  Claims c;
  c.kind = "endpoint";
  c.subject = caller.subject;
  c.token_id = caller.token_id;
  c.sandbox = uid;
  c.permissions = permissions;
  c.audience = audience;
  c.expires_at = expires_at;
  return signer_->Sign(c);
}

}  // namespace airlock::apid
