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

// WebSocket is the server side of one WebSocket session after the
// handshake. Send and Close may be called from any thread (they are queued
// onto the connection's own event loop); messages arrive through the
// WebSocketSession on that loop's thread.
class WebSocket {
 public:
  virtual ~WebSocket() = default;
  // Send queues one text message.
  virtual void Send(std::string text) = 0;
  // Close sends a close frame with `code` (1000 normal, 1008 policy, ...)
  // after every queued message.
  virtual void Close(int code, std::string reason) = 0;
  // Queued is how many bytes Send has queued and not yet written (a
  // producer waits while it is large).
  virtual size_t Queued() const = 0;
};

// WebSocketSession is what the application does with a session.
class WebSocketSession {
 public:
  virtual ~WebSocketSession() = default;
  // OnOpen runs once, after the handshake.
  virtual void OnOpen(WebSocket& ws) = 0;
  // OnMessage runs for each inbound message; `binary` for binary frames.
  virtual void OnMessage(WebSocket& ws, const std::string& data, bool binary) = 0;
  // OnClosed runs once when the session is over (either side closed or the
  // connection broke); no call on `ws` has any effect after it.
  virtual void OnClosed() = 0;
};

// WebSocketAccept is the answer to an upgrade request: a refusal (an HTTP
// response), or the subprotocol to echo and the session to run.
struct WebSocketAccept {
  std::unique_ptr<HttpResponse> refusal;
  std::string subprotocol;
  std::unique_ptr<WebSocketSession> session;
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

  // Listen binds (so port() is known) without accepting yet. Refuses a
  // non-loopback address without TLS.
  absl::Status Listen();
  // Start accepts in the background (listening first if Listen was not
  // called).
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
