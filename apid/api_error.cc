#include "apid/api_error.h"

namespace airlock::apid {

namespace {
ApiError Make(int status, const char* code, std::string message) {
  ApiError e;
  e.status = status;
  e.code = code;
  e.message = std::move(message);
  return e;
}
}  // namespace

ApiError ApiError::InvalidArgument(std::string m) { return Make(400, "invalidArgument", std::move(m)); }
ApiError ApiError::NotFound(std::string m) { return Make(404, "notFound", std::move(m)); }
ApiError ApiError::FailedPrecondition(std::string m) {
  return Make(409, "failedPrecondition", std::move(m));
}
ApiError ApiError::Unauthenticated(std::string m) { return Make(401, "unauthenticated", std::move(m)); }
ApiError ApiError::PermissionDenied(std::string m) {
  return Make(403, "permissionDenied", std::move(m));
}
ApiError ApiError::Unimplemented(const std::string& operation) {
  return Make(501, "unimplemented", operation + " is not available on this service (Airlock)");
}
ApiError ApiError::EtagRequired() {
  return Make(428, "failedPrecondition",
              "etag_required: send the resource's current ETag in If-Match");
}
ApiError ApiError::EtagMismatch(const std::string& current) {
  ApiError e = Make(412, "failedPrecondition",
                    "etag_mismatch: If-Match is not the resource's current ETag; read it again");
  e.details.push_back({{"@type", "type.googleapis.com/docker.sandboxes.v1.EtagMismatch"},
                       {"currentEtag", current}});
  return e;
}
ApiError ApiError::IdempotencyConflict() {
  return Make(409, "failedPrecondition",
              "the Idempotency-Key was already used with a different payload");
}

std::string CodeName(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kCancelled: return "canceled";
    case absl::StatusCode::kInvalidArgument: return "invalidArgument";
    case absl::StatusCode::kDeadlineExceeded: return "deadlineExceeded";
    case absl::StatusCode::kNotFound: return "notFound";
    case absl::StatusCode::kAlreadyExists: return "alreadyExists";
    case absl::StatusCode::kPermissionDenied: return "permissionDenied";
    case absl::StatusCode::kResourceExhausted: return "resourceExhausted";
    case absl::StatusCode::kFailedPrecondition: return "failedPrecondition";
    case absl::StatusCode::kAborted: return "aborted";
    case absl::StatusCode::kOutOfRange: return "outOfRange";
    case absl::StatusCode::kUnimplemented: return "unimplemented";
    case absl::StatusCode::kUnavailable: return "unavailable";
    case absl::StatusCode::kDataLoss: return "dataLoss";
    case absl::StatusCode::kUnauthenticated: return "unauthenticated";
    case absl::StatusCode::kInternal: return "internal";
    default: return "unknown";
  }
}

ApiError FromStatus(const absl::Status& s) {
  int http = 500;
  switch (s.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange: http = 400; break;
    case absl::StatusCode::kNotFound: http = 404; break;
    // The API answers its failedPrecondition refusals with 409 (412 and
    // 428 for ETags, set where they arise).
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted: http = 409; break;
    case absl::StatusCode::kPermissionDenied: http = 403; break;
    case absl::StatusCode::kUnauthenticated: http = 401; break;
    case absl::StatusCode::kResourceExhausted: http = 429; break;
    case absl::StatusCode::kUnimplemented: http = 501; break;
    case absl::StatusCode::kUnavailable: http = 503; break;
    case absl::StatusCode::kDeadlineExceeded: http = 504; break;
    case absl::StatusCode::kCancelled: http = 499; break;
    default: http = 500;
  }
  ApiError e;
  e.status = http;
  e.code = CodeName(s.code());
  e.message = std::string(s.message());
  return e;
}

HttpResponse ErrorResponse(const ApiError& e) {
  nlohmann::json body = {{"code", e.code}, {"message", e.message},
                         {"details", nlohmann::json::array()}};
  for (const auto& d : e.details) body["details"].push_back(d);
  HttpResponse r;
  r.status = e.status;
  r.body = body.dump();
  return r;
}

}  // namespace airlock::apid
