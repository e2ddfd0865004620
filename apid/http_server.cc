#include "apid/http_server.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/beast/websocket.hpp>
#include <boost/beast/websocket/ssl.hpp>
#include <condition_variable>
#include <deque>
#include <list>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace airlock::apid {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace websocket = boost::beast::websocket;
using tcp = asio::ip::tcp;

namespace {

int FromHex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool Decode(absl::string_view in, bool plus_is_space, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    char c = in[i];
    if (c == '%') {
      if (i + 2 >= in.size()) return false;
      int hi = FromHex(in[i + 1]), lo = FromHex(in[i + 2]);
      if (hi < 0 || lo < 0) return false;
      out->push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out->push_back(' ');
    } else {
      out->push_back(c);
    }
  }
  return true;
}

bool SplitHostPort(const std::string& listen, std::string* host, int* port) {
  size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return false;
  *host = listen.substr(0, colon);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return absl::SimpleAtoi(listen.substr(colon + 1), port) && *port >= 0 && *port <= 65535 &&
         !host->empty();
}

HttpRequest ToRequest(const http::request<http::string_body>& req, bool* bad_target) {
  HttpRequest out;
  out.method = std::string(req.method_string());
  *bad_target = !SplitTarget(std::string(req.target()), &out.path, &out.query);
  for (const auto& field : req) {
    std::string name = absl::AsciiStrToLower(std::string(field.name_string()));
    std::string value(field.value());
    auto [it, inserted] = out.headers.emplace(name, value);
    if (!inserted) it->second = absl::StrCat(it->second, ", ", value);
  }
  out.body = req.body();
  return out;
}

http::response<http::string_body> ToBeast(const HttpResponse& r, unsigned version, bool keep) {
  http::response<http::string_body> res{static_cast<http::status>(r.status), version};
  res.set(http::field::server, "apid");
  if (!r.body.empty() || r.status != 204) res.set(http::field::content_type, r.content_type);
  for (const auto& [k, v] : r.headers) res.set(k, v);
  res.body() = r.body;
  res.keep_alive(keep);
  res.prepare_payload();
  return res;
}

HttpResponse Plain(int status, const std::string& code, const std::string& message) {
  HttpResponse r;
  r.status = status;
  r.body = absl::StrCat(R"({"code":")", code, R"(","message":")", message, R"(","details":[]})");
  return r;
}

// AsyncWebSocket runs a session on the connection's own io_context:
// one async read at a time, one async write at a time (Beast's rule), and
// Send/Close from other threads posted onto that context.
template <class Stream>
class AsyncWebSocket : public WebSocket {
 public:
  AsyncWebSocket(websocket::stream<Stream>& ws, asio::io_context& io, WebSocketSession* app)
      : ws_(ws), io_(io), app_(app) {}

  void Send(std::string text) override {
    queued_bytes_ += text.size();
    asio::post(io_, [this, text = std::move(text)]() mutable {
      if (closed_ || closing_) {
        queued_bytes_ -= text.size();
        return;
      }
      queue_.push_back(std::move(text));
      if (!writing_) WriteNext();
    });
  }
  size_t Queued() const override { return queued_bytes_; }
  void Close(int code, std::string reason) override {
    asio::post(io_, [this, code, reason = std::move(reason)] {
      if (closed_ || closing_) return;
      closing_ = true;
      close_code_ = code;
      close_reason_ = reason.substr(0, 123);
      if (!writing_) CloseNow();
    });
  }
  void Start() {
    app_->OnOpen(*this);
    ReadNext();
  }

 private:
  void ReadNext() {
    ws_.async_read(buf_, [this](beast::error_code ec, size_t) {
      if (ec) return Finish();
      std::string data = beast::buffers_to_string(buf_.data());
      buf_.consume(buf_.size());
      if (!closed_) app_->OnMessage(*this, data, !ws_.got_text());
      ReadNext();
    });
  }
  void WriteNext() {
    writing_ = true;
    ws_.text(true);
    ws_.async_write(asio::buffer(queue_.front()), [this](beast::error_code ec, size_t) {
      queued_bytes_ -= queue_.front().size();
      queue_.pop_front();
      writing_ = false;
      if (ec) {
        beast::get_lowest_layer(ws_).close(ec);
        return;
      }
      if (!queue_.empty()) return WriteNext();
      if (closing_) CloseNow();
    });
  }
  void CloseNow() {
    websocket::close_reason why(static_cast<websocket::close_code>(close_code_), close_reason_);
    ws_.async_close(why, [this](beast::error_code) {});
  }
  void Finish() {
    if (closed_) return;
    closed_ = true;
    app_->OnClosed();
  }

  websocket::stream<Stream>& ws_;
  asio::io_context& io_;
  WebSocketSession* app_;
  beast::flat_buffer buf_;
  std::deque<std::string> queue_;
  std::atomic<size_t> queued_bytes_{0};
  bool writing_ = false;
  bool closing_ = false;
  bool closed_ = false;
  int close_code_ = 1000;
  std::string close_reason_;
};

// A body without credentials may be at most this large (a token
// exchange is a few hundred bytes).
constexpr uint64_t kAnonymousBodyBytes = 64 * 1024;
// An idle or stalled connection is closed after this long.
constexpr int kIoTimeoutSeconds = 60;

}  // namespace

bool SplitTarget(absl::string_view target, std::string* path,
                 std::vector<std::pair<std::string, std::string>>* query) {
  query->clear();
  size_t q = target.find('?');
  if (!Decode(target.substr(0, q), false, path)) return false;
  if (q == absl::string_view::npos) return true;
  absl::string_view rest = target.substr(q + 1);
  while (!rest.empty()) {
    size_t amp = rest.find('&');
    absl::string_view pair = rest.substr(0, amp);
    rest = amp == absl::string_view::npos ? absl::string_view() : rest.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string k, v;
    if (!Decode(pair.substr(0, eq), true, &k)) return false;
    if (eq != absl::string_view::npos && !Decode(pair.substr(eq + 1), true, &v)) return false;
    query->emplace_back(std::move(k), std::move(v));
  }
  return true;
}

bool IsLoopbackListen(const std::string& listen) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(listen, &host, &port)) return false;
  if (host == "localhost" || host == "::1") return true;
  in_addr a4;
  if (inet_pton(AF_INET, host.c_str(), &a4) == 1) return (ntohl(a4.s_addr) >> 24) == 127;
  return false;
}

struct HttpServer::Impl {
  HttpServerOptions options;
  HttpHandler handler;
  WebSocketHandler ws_handler;
  asio::io_context io;
  std::unique_ptr<asio::ssl::context> tls;
  std::unique_ptr<tcp::acceptor> acceptor;
  std::thread accept_thread;
  std::atomic<bool> stopping{false};

  struct Conn {
    std::thread thread;
    tcp::socket* socket = nullptr;  // valid while the thread runs
    std::atomic<bool> done{false};
    // While reading or writing: when the watchdog cuts the connection
    // (steady-clock ms; 0 while a handler works or a WebSocket runs).
    std::atomic<int64_t> deadline_ms{0};
  };
  std::mutex mu;
  std::list<Conn> conns;
  int live = 0;

  std::thread watchdog;
  std::mutex watchdog_mu;
  std::condition_variable watchdog_cv;

  void AcceptLoop();
  void Watchdog();
  void Reap(bool all);
  template <class Stream>
  void Serve(Stream& stream, asio::io_context& io, std::atomic<int64_t>* deadline);
};

namespace {
int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

void HttpServer::Impl::Watchdog() {
  std::unique_lock<std::mutex> wlock(watchdog_mu);
  while (!stopping) {
    watchdog_cv.wait_for(wlock, std::chrono::milliseconds(500));
    int64_t now = NowMs();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& c : conns) {
      int64_t d = c.deadline_ms;
      // A silent or stalled peer loses its slot: the blocked read fails.
      if (c.socket != nullptr && d > 0 && now > d) ::shutdown(c.socket->native_handle(), SHUT_RDWR);
    }
  }
}

template <class Stream>
void HttpServer::Impl::Serve(Stream& stream, asio::io_context& io,
                             std::atomic<int64_t>* deadline) {
  beast::flat_buffer buf;
  auto arm = [&] { *deadline = NowMs() + kIoTimeoutSeconds * 1000; };
  for (;;) {
    arm();
    http::request_parser<http::string_body> parser;
    parser.body_limit(options.max_body_bytes);
    parser.header_limit(64 * 1024);
    beast::error_code ec;
    // The header first: a large body is read only for a caller that sends
    // credentials, so an anonymous client cannot make apid hold much.
    http::read_header(stream, buf, parser, ec);
    if (!ec) {
      const auto& h = parser.get();
      auto length = parser.content_length();
      bool authed = h.find(http::field::authorization) != h.end();
      if (!authed && (parser.chunked() || (length && *length > kAnonymousBodyBytes))) {
        auto res = ToBeast(Plain(401, "unauthenticated",
                                 "a request body over 64 KiB needs Authorization: Bearer"),
                           h.version(), false);
        http::write(stream, res, ec);
        return;
      }
      // The body in pieces, each renewing the deadline: a slow upload
      // lives as long as it moves.
      while (!ec && !parser.is_done()) {
        http::read_some(stream, buf, parser, ec);
        arm();
      }
    }
    if (ec == http::error::end_of_stream || ec == asio::error::eof) return;
    if (ec) {
      if (ec == http::error::body_limit) {
        HttpResponse r = Plain(413, "invalidArgument",
                               absl::StrCat("request body is over ", options.max_body_bytes,
                                            " bytes"));
        auto res = ToBeast(r, 11, false);
        http::write(stream, res, ec);
      } else if (ec != asio::error::operation_aborted && !stopping) {
        HttpResponse r = Plain(400, "invalidArgument", "malformed HTTP request");
        auto res = ToBeast(r, 11, false);
        http::write(stream, res, ec);
      }
      return;
    }
    http::request<http::string_body> req = parser.release();
    bool bad_target = false;
    HttpRequest hreq = ToRequest(req, &bad_target);
    if (bad_target) {
      auto res = ToBeast(Plain(400, "invalidArgument", "bad percent-encoding in the URL"),
                         req.version(), false);
      http::write(stream, res, ec);
      return;
    }
    if (websocket::is_upgrade(req)) {
      WebSocketAccept accept;
      try {
        if (ws_handler) accept = ws_handler(hreq);
      } catch (const std::exception&) {
        accept.refusal = std::make_unique<HttpResponse>(Plain(500, "internal", "internal error"));
      }
      if (accept.refusal != nullptr || accept.session == nullptr) {
        HttpResponse r = accept.refusal ? *accept.refusal
                                        : Plain(404, "notFound", "no WebSocket at this path");
        auto res = ToBeast(r, req.version(), false);
        http::write(stream, res, ec);
        return;
      }
      websocket::stream<Stream&> ws(stream);
      std::string sub = accept.subprotocol;
      ws.set_option(websocket::stream_base::decorator([sub](websocket::response_type& res) {
        res.set(http::field::server, "apid");
        if (!sub.empty()) res.set(http::field::sec_websocket_protocol, sub);
      }));
      ws.read_message_max(1u << 20);
      // Pings keep a quiet session alive and end a dead one.
      ws.set_option(websocket::stream_base::timeout::suggested(beast::role_type::server));
      ws.accept(req, ec);
      if (ec) return;
      *deadline = 0;  // the session's own timeouts and pings from here
      AsyncWebSocket<Stream&> session(ws, io, accept.session.get());
      session.Start();
      io.run();
      return;
    }
    *deadline = 0;  // a handler may take long (exec, pulls)
    HttpResponse r;
    try {
      r = handler(hreq);
    } catch (const std::exception&) {
      // A handler's bug answers 500; it never takes the daemon down.
      r = Plain(500, "internal", "internal error");
    }
    arm();
    bool keep = req.keep_alive() && !stopping;
    auto res = ToBeast(r, req.version(), keep);
    http::response_serializer<http::string_body> sr(res);
    if (req.method() == http::verb::head) {
      sr.split(true);
      http::write_header(stream, sr, ec);
    } else {
      // In pieces, each renewing the deadline (a large download to a slow
      // reader lives as long as it moves).
      while (!ec && !sr.is_done()) {
        http::write_some(stream, sr, ec);
        arm();
      }
    }
    if (ec || !keep) return;
  }
}

void HttpServer::Impl::Reap(bool all) {
  std::list<Conn> finished;
  {
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = conns.begin(); it != conns.end();) {
      if (all || it->done) {
        auto next = std::next(it);
        finished.splice(finished.end(), conns, it);
        it = next;
      } else {
        ++it;
      }
    }
  }
  for (auto& c : finished) {
    if (c.thread.joinable()) c.thread.join();
  }
}

void HttpServer::Impl::AcceptLoop() {
  while (!stopping) {
    // Each connection has an io_context of its own: sync HTTP needs none,
    // a WebSocket session runs its async reads and writes on it.
    auto conn_io = std::make_unique<asio::io_context>();
    auto socket = std::make_unique<tcp::socket>(*conn_io);
    beast::error_code ec;
    acceptor->accept(*socket, ec);
    if (stopping) break;
    if (ec) {
      if (ec == asio::error::operation_aborted || ec == asio::error::bad_descriptor) break;
      continue;
    }
    Reap(false);
    Conn* conn;
    {
      std::lock_guard<std::mutex> lock(mu);
      if (live >= options.max_connections) {
        // Over the cap: a short answer on this thread (plain HTTP only; a
        // TLS client just sees the close), then closed.
        if (tls == nullptr) {
          auto res = ToBeast(Plain(503, "unavailable", "too many connections; retry later"), 11,
                             false);
          http::write(*socket, res, ec);
        }
        continue;
      }
      ++live;
      conns.emplace_back();
      conn = &conns.back();
      conn->socket = socket.get();
    }
    conn->thread = std::thread([this, conn, cio = std::move(conn_io),
                                s = std::move(socket)]() mutable {
      beast::error_code ec;
      if (tls != nullptr) {
        beast::ssl_stream<tcp::socket&> stream(*s, *tls);
        conn->deadline_ms = NowMs() + kIoTimeoutSeconds * 1000;
        stream.handshake(asio::ssl::stream_base::server, ec);
        if (!ec) Serve(stream, *cio, &conn->deadline_ms);
        stream.shutdown(ec);
      } else {
        Serve(*s, *cio, &conn->deadline_ms);
      }
      {
        std::lock_guard<std::mutex> lock(mu);
        s->shutdown(tcp::socket::shutdown_both, ec);
        s->close(ec);
        conn->socket = nullptr;
        --live;
      }
      s.reset();  // before its io_context
      cio.reset();
      conn->done = true;
    });
  }
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler,
                       WebSocketHandler ws_handler)
    : impl_(std::make_unique<Impl>()) {
  impl_->options = std::move(options);
  impl_->handler = std::move(handler);
  impl_->ws_handler = std::move(ws_handler);
}

HttpServer::~HttpServer() { Stop(); }

std::string HttpServer::scheme() const { return impl_->tls ? "https" : "http"; }

absl::Status HttpServer::Start() {
  if (impl_->acceptor == nullptr) {
    if (absl::Status s = Listen(); !s.ok()) return s;
  }
  impl_->accept_thread = std::thread([this] { impl_->AcceptLoop(); });
  impl_->watchdog = std::thread([this] { impl_->Watchdog(); });
  return absl::OkStatus();
}

absl::Status HttpServer::Listen() {
  const HttpServerOptions& o = impl_->options;
  std::string host;
  int port = 0;
  if (!SplitHostPort(o.listen, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--listen \"", o.listen, "\" is not HOST:PORT (e.g. 127.0.0.1:7777)"));
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) {
    return absl::InvalidArgumentError("--http-tls-cert and --http-tls-key go together");
  }
  if (o.tls_cert.empty() && !IsLoopbackListen(o.listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen ", o.listen,
        " is not a loopback address: give --http-tls-cert and --http-tls-key to serve it with TLS"));
  }
  if (!o.tls_cert.empty()) {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                     asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                     asio::ssl::context::no_tlsv1_1);
    beast::error_code ec;
    ctx->use_certificate_chain_file(o.tls_cert, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--http-tls-cert ", o.tls_cert, ": ", ec.message()));
    ctx->use_private_key_file(o.tls_key, asio::ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("--http-tls-key ", o.tls_key, ": ", ec.message()));
    impl_->tls = std::move(ctx);
  }
  beast::error_code ec;
  tcp::resolver resolver(impl_->io);
  auto results = resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
  if (ec || results.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--listen ", o.listen, ": ", ec.message()));
  }
  tcp::endpoint ep = results.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(impl_->io);
  acceptor->open(ep.protocol(), ec);
  if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor->bind(ep, ec);
  if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", o.listen, ": ", ec.message(),
                                               " (another apid? pick one with --listen)"));
  }
  port_ = acceptor->local_endpoint().port();
  impl_->acceptor = std::move(acceptor);
  return absl::OkStatus();
}

void HttpServer::Stop() {
  if (impl_->acceptor == nullptr || impl_->stopping.exchange(true)) return;
  beast::error_code ec;
  // Closing a socket another thread blocks on does not wake it; shutting
  // its file descriptor down does.
  ::shutdown(impl_->acceptor->native_handle(), SHUT_RDWR);
  if (impl_->accept_thread.joinable()) impl_->accept_thread.join();
  impl_->watchdog_cv.notify_all();
  if (impl_->watchdog.joinable()) impl_->watchdog.join();
  impl_->acceptor->close(ec);
  {
    std::lock_guard<std::mutex> lock(impl_->mu);
    for (auto& c : impl_->conns) {
      if (c.socket != nullptr) ::shutdown(c.socket->native_handle(), SHUT_RDWR);
    }
  }
  impl_->Reap(true);
}

}  // namespace airlock::apid
