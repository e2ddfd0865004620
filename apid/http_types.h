// The HTTP request and response as apid's handlers see them: plain values
// with no HTTP library in them, so handlers are unit-tested without a
// socket.
#ifndef AIRLOCK_APID_HTTP_TYPES_H_
#define AIRLOCK_APID_HTTP_TYPES_H_

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"

namespace airlock::apid {

// HttpRequest is one request, read whole.
struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  // Path without the query, percent-decoded.
  std::string path;
  // Query parameters in order, percent-decoded; a repeated name repeats.
  std::vector<std::pair<std::string, std::string>> query;
  // Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;

  // Header returns the named header ("" when absent); `name` lower-case.
  std::string Header(absl::string_view name) const {
    auto it = headers.find(absl::AsciiStrToLower(name));
    return it == headers.end() ? "" : it->second;
  }
  // Query returns the first value of parameter `name` ("" when absent).
  std::string Param(absl::string_view name) const {
    for (const auto& [k, v] : query) {
      if (k == name) return v;
    }
    return "";
  }
  bool HasParam(absl::string_view name) const {
    for (const auto& [k, v] : query) {
      if (k == name) return true;
    }
    return false;
  }
};

// HttpResponse is one response; Content-Length is set from the body.
struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
};

// SplitTarget splits a request target into its percent-decoded path and
// query parameters ('+' in the query means a space). False on bad
// percent-encoding.
bool SplitTarget(absl::string_view target, std::string* path,
                 std::vector<std::pair<std::string, std::string>>* query);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_HTTP_TYPES_H_
