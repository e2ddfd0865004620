// A small client of the Cloud Sandboxes REST API, written from the
// published OpenAPI description (docker/docs api.yaml), not from apid's
// code: the token exchange, management calls with a bearer token, each
// sandbox's data plane at core.endpoint.uri with a scoped credential, and
// the interact WebSocket (subprotocol sandboxes.v1). Tests use it to drive
// apid as any client would.
#ifndef AIRLOCK_TESTS_SANDBOXES_API_CLIENT_H_
#define AIRLOCK_TESTS_SANDBOXES_API_CLIENT_H_

#include <chrono>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace airlock::sbxapi {

struct Response {
  long status = 0;
  // Header names lower-cased.
  std::map<std::string, std::string> headers;
  std::string body;
  // The body as JSON (null when it is not JSON).
  nlohmann::json Json() const;
  std::string Code() const;  // Error.code, "" when none
};

// Call makes one HTTP request; `headers` are "Name: value" lines.
Response Call(const std::string& method, const std::string& url,
              const std::vector<std::string>& headers = {}, const std::string& body = "");

// Base64 (standard alphabet, padded), as JSON bytes fields use.
std::string B64(const std::string& raw);
std::string UnB64(const std::string& text);

class Client {
 public:
  // `base` is the management base URL; `token_url` the token exchange.
  Client(std::string base, std::string token_url)
      : base_(std::move(base)), token_url_(std::move(token_url)) {}

  // Login exchanges an API token for an access token; the exchange's
  // response.
  Response Login(const std::string& identifier, const std::string& secret);
  const std::string& access_token() const { return access_; }
  void set_access_token(std::string t) { access_ = std::move(t); }

  // Management: `path` is appended to the base ("/v1/sandboxes").
  Response Management(const std::string& method, const std::string& path,
                      const std::string& body = "", std::vector<std::string> headers = {});

  // CreateSandbox posts `request`; `idempotency_key` when not empty.
  Response CreateSandbox(const nlohmann::json& request, const std::string& idempotency_key = "");
  Response GetSandbox(const std::string& uid);
  // WaitForStatus polls getSandbox until core.status is in `want` (or
  // `timeout`); returns the last sandbox read (null when it vanished).
  nlohmann::json WaitForStatus(const std::string& uid, const std::set<std::string>& want,
                               std::chrono::seconds timeout);
  // Mutations that need If-Match read the current ETag first.
  Response DeleteSandbox(const std::string& uid);
  Response StopSandbox(const std::string& uid);
  Response StartSandbox(const std::string& uid);

  // EndpointCredential asks for a scoped token for `uid`.
  Response EndpointCredential(const std::string& uid, const std::vector<std::string>& permissions,
                              const std::string& ttl = "");

 private:
  std::string base_, token_url_, access_;
};

// Endpoint is one sandbox's data plane: its URI and a scoped token.
class Endpoint {
 public:
  Endpoint(std::string uri, std::string token) : uri_(std::move(uri)), token_(std::move(token)) {}
  Response Call(const std::string& method, const std::string& path, const std::string& body = "",
                std::vector<std::string> headers = {}) const;
  Response Exec(const nlohmann::json& request) const;
  Response WriteFile(const std::string& path, const std::string& data, int mode = 0) const;
  Response ReadFile(const std::string& path) const;
  const std::string& uri() const { return uri_; }
  const std::string& token() const { return token_; }

 private:
  std::string uri_, token_;
};

// Interact is an interact WebSocket session.
class Interact {
 public:
  // Connect opens {uri}/v1/processes/{process}/interact offering
  // sandboxes.v1, the token in Authorization (or, with `token_in_protocol`,
  // as a sandboxes.bearer.v1 offer). On a refused upgrade, `refused_status`
  // holds the HTTP status and `ok()` is false.
  Interact(const std::string& uri, const std::string& token, const std::string& process,
           bool token_in_protocol = false);
  ~Interact();
  bool ok() const { return ok_; }
  int refused_status() const { return refused_status_; }
  const std::string& subprotocol() const { return subprotocol_; }
  bool Send(const nlohmann::json& frame);
  // Read returns the next frame, or null once the server closed; then
  // close_code() says how.
  nlohmann::json Read();
  int close_code() const { return close_code_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  bool ok_ = false;
  int refused_status_ = 0;
  int close_code_ = 0;
  std::string subprotocol_;
};

}  // namespace airlock::sbxapi

#endif  // AIRLOCK_TESTS_SANDBOXES_API_CLIENT_H_
