#include "tests/sandboxes_api_client.h"

#include <curl/curl.h>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock::sbxapi {

namespace {

size_t OnBody(char* data, size_t size, size_t n, void* out) {
  static_cast<std::string*>(out)->append(data, size * n);
  return size * n;
}

size_t OnHeader(char* data, size_t size, size_t n, void* out) {
  std::string line(data, size * n);
  size_t colon = line.find(':');
  if (colon != std::string::npos) {
    std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    (*static_cast<std::map<std::string, std::string>*>(out))[name] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

}  // namespace

nlohmann::json Response::Json() const {
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  return j.is_discarded() ? nlohmann::json() : j;
}

std::string Response::Code() const {
  auto j = Json();
  return j.is_object() && j.contains("code") && j["code"].is_string() ? j["code"].get<std::string>()
                                                                      : "";
}

std::string B64(const std::string& raw) { return absl::Base64Escape(raw); }
std::string UnB64(const std::string& text) {
  std::string out;
  absl::Base64Unescape(text, &out);
  return out;
}

Response Call(const std::string& method, const std::string& url,
              const std::vector<std::string>& headers, const std::string& body) {
  Response r;
  CURL* c = curl_easy_init();
  curl_slist* list = nullptr;
  for (const auto& h : headers) list = curl_slist_append(list, h.c_str());
  if (!body.empty() && !absl::c_any_of(headers, [](const std::string& h) {
        return absl::StartsWithIgnoreCase(h, "content-type:");
      })) {
    list = curl_slist_append(list, "Content-Type: application/json");
  }
  list = curl_slist_append(list, "Expect:");
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, list);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r.body);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &r.headers);
  curl_easy_setopt(c, CURLOPT_TIMEOUT, 600L);
  if (curl_easy_perform(c) == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r.status);
  curl_slist_free_all(list);
  curl_easy_cleanup(c);
  return r;
}

Response Client::Login(const std::string& identifier, const std::string& secret) {
  Response r = Call("POST", token_url_, {},
                    nlohmann::json{{"identifier", identifier}, {"secret", secret}}.dump());
  auto j = r.Json();
  if (r.status == 200 && j.contains("access_token")) access_ = j["access_token"];
  return r;
}

Response Client::Management(const std::string& method, const std::string& path,
                            const std::string& body, std::vector<std::string> headers) {
  if (!access_.empty()) headers.push_back("Authorization: Bearer " + access_);
  return Call(method, base_ + path, headers, body);
}

Response Client::CreateSandbox(const nlohmann::json& request, const std::string& key) {
  std::vector<std::string> h;
  if (!key.empty()) h.push_back("Idempotency-Key: " + key);
  return Management("POST", "/v1/sandboxes", request.dump(), h);
}

Response Client::GetSandbox(const std::string& uid) {
  return Management("GET", "/v1/sandboxes/" + uid);
}

nlohmann::json Client::WaitForStatus(const std::string& uid, const std::set<std::string>& want,
                                     std::chrono::seconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  nlohmann::json last;
  while (std::chrono::steady_clock::now() < deadline) {
    Response r = GetSandbox(uid);
    if (r.status == 404) return nlohmann::json();
    last = r.Json();
    if (r.status == 200 && want.count(last["core"]["status"].get<std::string>())) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return last;
}

namespace {
std::string EtagOf(Client& c, const std::string& uid) {
  Response r = c.GetSandbox(uid);
  return r.headers.count("etag") ? r.headers["etag"] : "";
}
}  // namespace

Response Client::DeleteSandbox(const std::string& uid) {
  return Management("DELETE", "/v1/sandboxes/" + uid, "", {"If-Match: " + EtagOf(*this, uid)});
}

Response Client::StopSandbox(const std::string& uid) {
  return Management("POST", "/v1/sandboxes/" + uid + "/stop", "{}",
                    {"If-Match: " + EtagOf(*this, uid)});
}

Response Client::StartSandbox(const std::string& uid) {
  return Management("POST", "/v1/sandboxes/" + uid + "/start", "{}",
                    {"If-Match: " + EtagOf(*this, uid)});
}

Response Client::EndpointCredential(const std::string& uid,
                                    const std::vector<std::string>& permissions,
                                    const std::string& ttl) {
  nlohmann::json body = {{"permissions", permissions}};
  if (!ttl.empty()) body["ttl"] = ttl;
  return Management("POST", "/v1/sandboxes/" + uid + "/endpoint-credentials", body.dump());
}

Response Endpoint::Call(const std::string& method, const std::string& path,
                        const std::string& body, std::vector<std::string> headers) const {
  headers.push_back("Authorization: Bearer " + token_);
  return sbxapi::Call(method, uri_ + path, headers, body);
}

Response Endpoint::Exec(const nlohmann::json& request) const {
  return Call("POST", "/v1/processes/exec", request.dump());
}

namespace {
std::string Escape(const std::string& s) {
  CURL* c = curl_easy_init();
  char* e = curl_easy_escape(c, s.c_str(), static_cast<int>(s.size()));
  std::string out(e);
  curl_free(e);
  curl_easy_cleanup(c);
  return out;
}
}  // namespace

Response Endpoint::WriteFile(const std::string& path, const std::string& data, int mode) const {
  std::string q = "/v1/files/content?path=" + Escape(path);
  if (mode != 0) q += "&mode=" + std::to_string(mode);
  return Call("PUT", q, data, {"Content-Type: application/octet-stream"});
}

Response Endpoint::ReadFile(const std::string& path) const {
  return Call("GET", "/v1/files/content?path=" + Escape(path));
}

namespace beast = boost::beast;
namespace websocket = boost::beast::websocket;
using tcp = boost::asio::ip::tcp;

struct Interact::Impl {
  boost::asio::io_context io;
  websocket::stream<tcp::socket> ws{io};
};

Interact::Interact(const std::string& uri, const std::string& token, const std::string& process,
                   bool token_in_protocol)
    : impl_(std::make_unique<Impl>()) {
  // uri is http://HOST:PORT/PREFIX
  std::string rest(absl::StripPrefix(uri, "http://"));
  std::string hostport = rest.substr(0, rest.find('/'));
  std::string prefix = rest.substr(hostport.size());
  std::string host = hostport.substr(0, hostport.rfind(':'));
  std::string port = hostport.substr(hostport.rfind(':') + 1);
  beast::error_code ec;
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(host, port, ec);
  if (ec) return;
  boost::asio::connect(impl_->ws.next_layer(), results, ec);
  if (ec) return;
  std::string protocols = "sandboxes.v1";
  if (token_in_protocol) {
    protocols += ", sandboxes.bearer.v1." + absl::WebSafeBase64Escape(token);
  }
  impl_->ws.set_option(websocket::stream_base::decorator([&](websocket::request_type& req) {
    req.set(beast::http::field::sec_websocket_protocol, protocols);
    if (!token_in_protocol) req.set(beast::http::field::authorization, "Bearer " + token);
  }));
  websocket::response_type res;
  impl_->ws.handshake(res, hostport, prefix + "/v1/processes/" + process + "/interact", ec);
  if (ec) {
    // Beast keeps no response of a declined upgrade: ask again over plain
    // HTTP, with the same upgrade headers, for the status.
    std::vector<std::string> h = {"Connection: Upgrade", "Upgrade: websocket",
                                  "Sec-WebSocket-Version: 13",
                                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
                                  "Sec-WebSocket-Protocol: " + protocols};
    if (!token_in_protocol) h.push_back("Authorization: Bearer " + token);
    refused_status_ = static_cast<int>(
        Call("GET", uri + "/v1/processes/" + process + "/interact", h).status);
    return;
  }
  subprotocol_ = std::string(res[beast::http::field::sec_websocket_protocol]);
  ok_ = true;
}

Interact::~Interact() {
  beast::error_code ec;
  if (ok_ && impl_->ws.is_open()) impl_->ws.close(websocket::close_code::normal, ec);
}

bool Interact::Send(const nlohmann::json& frame) {
  beast::error_code ec;
  impl_->ws.text(true);
  impl_->ws.write(boost::asio::buffer(frame.dump()), ec);
  return !ec;
}

nlohmann::json Interact::Read() {
  beast::flat_buffer buf;
  beast::error_code ec;
  impl_->ws.read(buf, ec);
  if (ec) {
    close_code_ = impl_->ws.reason().code;
    return nlohmann::json();
  }
  return nlohmann::json::parse(beast::buffers_to_string(buf.data()), nullptr, false);
}

}  // namespace airlock::sbxapi
