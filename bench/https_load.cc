// https_load: HTTPS load for bench/egress_bench.py's intercepted case, in
// place of a Python client that was the ceiling (wrk cannot speak TLS
// through a CONNECT). Each of --connections threads, until --duration has
// passed: connects (to the upstream, or to a forward proxy and CONNECTs
// through it), makes a TLS connection verified against --cafile for
// --host, and GETs --path, either once per connection (a full handshake
// per request, no session reuse) or, with --keep-alive, again and again on
// one connection. Prints one JSON line: requests, requests/s, p50 and p99
// latency (seconds), errors and the first error.
//
// A request counts when its status is 200 and its body (Content-Length)
// came whole; anything else is an error, and the thread starts a new
// connection.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <arpa/inet.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  int port = 0;        // the upstream's, on 127.0.0.1
  int proxy_port = 0;  // a forward proxy's, or 0: direct
  std::string host;
  std::string cafile;
  std::string path = "/small";
  int connections = 8;
  double duration = 5;
  bool keep_alive = false;
};

void Usage() {
  fprintf(stderr,
          "usage: https_load --port N --host NAME --cafile PEM [--proxy-port N] [--path P]\n"
          "                  [--connections N] [--duration SECONDS] [--keep-alive]\n"
          "GETs https://NAME:N/P from 127.0.0.1:N (or through the forward proxy on\n"
          "127.0.0.1:--proxy-port by CONNECT) and prints one JSON line of figures.\n");
}

bool Parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "https_load: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    if (a == "--help" || a == "-h") {
      Usage();
      exit(0);
    } else if (a == "--keep-alive") {
      o->keep_alive = true;
    } else if (a == "--port" || a == "--proxy-port" || a == "--connections") {
      if ((v = value(a.c_str())) == nullptr) return false;
      int n = atoi(v);
      if (n <= 0) {
        fprintf(stderr, "https_load: %s wants a positive number, not %s\n", a.c_str(), v);
        return false;
      }
      (a == "--port" ? o->port : a == "--proxy-port" ? o->proxy_port : o->connections) = n;
    } else if (a == "--duration") {
      if ((v = value("--duration")) == nullptr) return false;
      o->duration = atof(v);
      if (o->duration <= 0) {
        fprintf(stderr, "https_load: --duration wants seconds, not %s\n", v);
        return false;
      }
    } else if (a == "--host" || a == "--cafile" || a == "--path") {
      if ((v = value(a.c_str())) == nullptr) return false;
      (a == "--host" ? o->host : a == "--cafile" ? o->cafile : o->path) = v;
    } else {
      fprintf(stderr, "https_load: unknown argument %s (see --help)\n", a.c_str());
      return false;
    }
  }
  if (o->port == 0 || o->host.empty() || o->cafile.empty()) {
    Usage();
    return false;
  }
  return true;
}

int Dial(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  // A stalled connection is an error, not a thread hung past --duration.
  timeval limit = {10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof(limit));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof(limit));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// ReadHead reads up to the end of a message head; `rest` gets what came
// after it.
template <typename ReadFn>
bool ReadHead(ReadFn read_some, std::string* head, std::string* rest) {
  std::string buf;
  char chunk[4096];
  while (true) {
    size_t end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      *head = buf.substr(0, end + 4);
      *rest = buf.substr(end + 4);
      return true;
    }
    if (buf.size() > 65536) return false;
    int n = read_some(chunk, sizeof(chunk));
    if (n <= 0) return false;
    buf.append(chunk, n);
  }
}

int Status(const std::string& head) {
  // "HTTP/1.1 200 ..."
  size_t sp = head.find(' ');
  return sp == std::string::npos ? 0 : atoi(head.c_str() + sp + 1);
}

long ContentLength(const std::string& head) {
  std::string lower(head);
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  size_t at = lower.find("\r\ncontent-length:");
  if (at == std::string::npos) return -1;
  return atol(lower.c_str() + at + 17);
}

struct Conn {
  int fd = -1;
  SSL* ssl = nullptr;
  ~Conn() {
    if (ssl != nullptr) SSL_free(ssl);
    if (fd >= 0) close(fd);
  }
};

// Open makes a verified TLS connection to the upstream; "" or why not.
std::string Open(const Options& o, SSL_CTX* ctx, Conn* c) {
  c->fd = Dial(o.proxy_port != 0 ? o.proxy_port : o.port);
  if (c->fd < 0) return std::string("connect: ") + strerror(errno);
  if (o.proxy_port != 0) {
    std::string authority = o.host + ":" + std::to_string(o.port);
    std::string req = "CONNECT " + authority + " HTTP/1.1\r\nHost: " + authority + "\r\n\r\n";
    if (send(c->fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
      return "CONNECT: the proxy did not take the request";
    }
    std::string head, rest;
    auto read_some = [&](char* b, size_t n) { return static_cast<int>(recv(c->fd, b, n, 0)); };
    if (!ReadHead(read_some, &head, &rest)) return "CONNECT: no answer";
    if (Status(head) != 200) return "CONNECT answered: " + head.substr(0, head.find('\r'));
    if (!rest.empty()) return "CONNECT: bytes after the answer";
  }
  c->ssl = SSL_new(ctx);
  SSL_set_tlsext_host_name(c->ssl, o.host.c_str());
  SSL_set1_host(c->ssl, o.host.c_str());
  SSL_set_fd(c->ssl, c->fd);
  if (SSL_connect(c->ssl) != 1) {
    char why[256];
    ERR_error_string_n(ERR_get_error(), why, sizeof(why));
    return std::string("TLS: ") + why;
  }
  return "";
}

// Get sends one GET and reads its answer whole; "" or why not.
std::string Get(const Options& o, Conn* c, bool last) {
  std::string req = "GET " + o.path + " HTTP/1.1\r\nHost: " + o.host + ":" +
                    std::to_string(o.port) + "\r\n" + (last ? "Connection: close\r\n" : "") +
                    "\r\n";
  if (SSL_write(c->ssl, req.data(), static_cast<int>(req.size())) !=
      static_cast<int>(req.size())) {
    return "the request could not be sent";
  }
  auto read_some = [&](char* b, size_t n) { return SSL_read(c->ssl, b, static_cast<int>(n)); };
  std::string head, body;
  if (!ReadHead(read_some, &head, &body)) return "no response head";
  int status = Status(head);
  if (status != 200) return "status " + std::to_string(status);
  long length = ContentLength(head);
  if (length < 0) return "no Content-Length";
  char chunk[16384];
  while (static_cast<long>(body.size()) < length) {
    int n = read_some(chunk, sizeof(chunk));
    if (n <= 0) return "the body was cut short";
    body.append(chunk, n);
  }
  if (static_cast<long>(body.size()) != length) return "more bytes than Content-Length";
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!Parse(argc, argv, &o)) return 2;
  // A peer that resets between requests fails the write (an error counted),
  // not the process.
  signal(SIGPIPE, SIG_IGN);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr || SSL_CTX_load_verify_locations(ctx, o.cafile.c_str(), nullptr) != 1) {
    fprintf(stderr, "https_load: cannot load %s\n", o.cafile.c_str());
    return 2;
  }
  SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  // Every connection a full handshake, as a client that keeps no sessions.
  SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET);

  std::mutex mu;
  std::vector<double> latencies;
  long errors = 0;
  std::string first_error;
  auto start = Clock::now();
  auto deadline = start + std::chrono::duration<double>(o.duration);
  std::vector<std::thread> threads;
  for (int t = 0; t < o.connections; ++t) {
    threads.emplace_back([&] {
      std::vector<double> mine;
      long errs = 0;
      std::string why;
      while (Clock::now() < deadline) {
        Conn c;
        auto t0 = Clock::now();
        std::string err = Open(o, ctx, &c);
        // Kept alive, a request's time starts when it is sent (the
        // connection's handshake is not one request's).
        if (o.keep_alive) t0 = Clock::now();
        while (err.empty()) {
          bool last = !o.keep_alive || Clock::now() >= deadline;
          err = Get(o, &c, last);
          if (!err.empty()) break;
          auto t1 = Clock::now();
          mine.push_back(std::chrono::duration<double>(t1 - t0).count());
          t0 = t1;
          if (last) break;
        }
        if (!err.empty() && Clock::now() < deadline) {
          ++errs;
          if (why.empty()) why = err;
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies.insert(latencies.end(), mine.begin(), mine.end());
      errors += errs;
      if (first_error.empty()) first_error = why;
    });
  }
  for (auto& t : threads) t.join();
  double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    if (latencies.empty()) return 0.0;
    size_t i = std::min(latencies.size() - 1, static_cast<size_t>(p / 100 * latencies.size()));
    return latencies[i];
  };
  std::string escaped;
  for (char ch : first_error) {
    if (ch == '"' || ch == '\\') escaped += '\\';
    if (static_cast<unsigned char>(ch) >= 0x20) escaped += ch;
  }
  printf("{\"n\": %zu, \"rps\": %.1f, \"p50\": %.6f, \"p99\": %.6f, \"errors\": %ld, "
         "\"first_error\": \"%s\", \"elapsed\": %.3f}\n",
         latencies.size(), latencies.size() / elapsed, pct(50), pct(99), errors, escaped.c_str(),
         elapsed);
  SSL_CTX_free(ctx);
  return 0;
}
