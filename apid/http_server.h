// apid's HTTP/1.1 and WebSocket listener, on Boost.Beast: plain TCP on a
// loopback address, TLS (OpenSSL through Asio) anywhere else. Each
// connection is served by one thread of its own up to a fixed cap; a
// request is read whole (bounded), answered by the Router's handler, and
// the connection kept alive as the client asks. An upgrade request goes to
// the WebSocket handler, which then owns the connection. Stop closes every
// connection and joins every thread.
#ifndef AIRLOCK_APID_HTTP_SERVER_H_
#define AIRLOCK_APID_HTTP_SERVER_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "apid/http_types.h"

namespace airlock::apid {

// WebSocket is a server-side WebSocket session, after the handshake. All
// calls come from the thread the session was handed to, except Close,
// which any thread may call to end a blocked Read.
class WebSocket {
 public:
  virtual ~WebSocket() = default;
  // Read returns the next text or binary message; an error when the peer
  // closed or the connection broke.
  virtual absl::StatusOr<std::string> Read() = 0;
  // Write sends one text message.
  virtual absl::Status Write(const std::string& text) = 0;
  // Close ends the session with a close frame carrying `reason`.
  virtual void Close(const std::string& reason) = 0;
};

// WebSocketHandler decides an upgrade: it returns the subprotocol to accept
// (empty for none) or an HttpResponse that refuses the upgrade, and then,
// once the handshake is done, serves the session in `serve`.
struct WebSocketAccept {
  // Set to refuse the upgrade with this response.
  std::unique_ptr<HttpResponse> refusal;
  // Subprotocol echoed in Sec-WebSocket-Protocol (empty: none).
  std::string subprotocol;
  // Serves the session after the handshake; runs on the connection's thread.
  std::function<void(WebSocket&)> serve;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
using WebSocketHandler = std::function<WebSocketAccept(const HttpRequest&)>;

struct HttpServerOptions {
  // "host:port"; port 0 picks a free one (see HttpServer::port).
  std::string listen = "127.0.0.1:7777";
  // PEM certificate chain and key; both required unless the address is
  // loopback (127.0.0.0/8 or ::1), both optional on loopback.
  std::string tls_cert;
  std::string tls_key;
  // Connections served at once; one more is answered 503 and closed.
  int max_connections = 256;
  // Largest request body read into memory.
  size_t max_body_bytes = 64u << 20;
};

// IsLoopbackListen reports whether "host:port" names a loopback address.
bool IsLoopbackListen(const std::string& listen);

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, HttpHandler handler, WebSocketHandler ws_handler);
  ~HttpServer();

  // Start binds and starts accepting in the background. Refuses a
  // non-loopback address without TLS.
  absl::Status Start();
  // Stop closes the listener and every connection and joins every thread.
  void Stop();

  // port is the bound port once Start succeeded.
  int port() const { return port_; }
  // scheme is "https" with TLS, else "http".
  std::string scheme() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_HTTP_SERVER_H_
