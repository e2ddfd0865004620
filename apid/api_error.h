// The REST API's error: an HTTP status plus the body {code, message,
// details} with the API's lowerCamel codes, and how an absl::Status from a
// peer daemon becomes one.
#ifndef AIRLOCK_APID_API_ERROR_H_
#define AIRLOCK_APID_API_ERROR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "apid/http_types.h"
#include "nlohmann/json.hpp"

namespace airlock::apid {

// ApiError is one refusal.
struct ApiError {
  int status = 500;
  std::string code = "internal";
  std::string message;
  // Typed details, each an object with "@type".
  std::vector<nlohmann::json> details;

  static ApiError InvalidArgument(std::string message);
  static ApiError NotFound(std::string message);
  static ApiError FailedPrecondition(std::string message);
  static ApiError Unauthenticated(std::string message);
  static ApiError PermissionDenied(std::string message);
  // Unimplemented names the operation Airlock does not have.
  static ApiError Unimplemented(const std::string& operation);
  // EtagRequired is 428; EtagMismatch is 412 with the current etag.
  static ApiError EtagRequired();
  static ApiError EtagMismatch(const std::string& current_etag);
  // IdempotencyConflict is 409: the key was used with another payload.
  static ApiError IdempotencyConflict();
};

// CodeName is the API's code for an absl code ("invalidArgument").
std::string CodeName(absl::StatusCode code);

// FromStatus maps a peer's status to the API's code and HTTP status
// (INVALID_ARGUMENT 400, NOT_FOUND 404, ALREADY_EXISTS 409,
// FAILED_PRECONDITION 409, PERMISSION_DENIED 403, UNAUTHENTICATED 401,
// RESOURCE_EXHAUSTED 429, UNIMPLEMENTED 501, UNAVAILABLE 503,
// DEADLINE_EXCEEDED 504, others 500), keeping the message.
ApiError FromStatus(const absl::Status& status);

// ErrorResponse renders `e` as the response body.
HttpResponse ErrorResponse(const ApiError& e);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_API_ERROR_H_
