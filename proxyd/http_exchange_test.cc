// The HTTP exchange stage on its own: a client on a socket pair, fake
// peers (policy, connect, secretsd, log), and fake upstreams, each one end
// of a socket pair the exchange gets from Connect.
#include "proxyd/http_exchange.h"

#include <sys/socket.h>
#include <unistd.h>

#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proxyd/fibers.h"

namespace airlock::proxyd {
namespace {

namespace pb = airlock::proxy::v1;

// ReadRequest reads one request (head and a Content-Length body) from fd.
std::string ReadRequest(int fd) {
  std::string got;
  char buf[4096];
  size_t head_end = std::string::npos;
  size_t want = std::string::npos;
  while (want == std::string::npos || got.size() < want) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    got.append(buf, n);
    if (head_end == std::string::npos && (head_end = got.find("\r\n\r\n")) != std::string::npos) {
      size_t length = 0;
      size_t at = got.find("Content-Length: ");
      if (at != std::string::npos && at < head_end) length = std::stoul(got.substr(at + 16));
      want = head_end + 4 + length;
    }
  }
  return got;
}

class FakePeers : public ExchangePeers {
 public:
  ~FakePeers() override { Finish(); }

  // Allows everything but what `deny` names.
  std::function<bool(const std::string& host, const std::string& method,
                     const std::string& path)>
      deny = [](const std::string&, const std::string&, const std::string&) { return false; };
  bool path_rules = false;
  // What each upstream answers ("" closes without an answer).
  std::string response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  absl::Status connect_error;
  bool connect_turns_deny = false;
  std::vector<Placement> placements;
  // How an upstream treats its connection: it answers one request and
  // closes (the default), or answers every request until the client ends
  // (`keep_serving`); with `answers` > 0 it answers that many, then reads
  // one more and closes without answering (a server closing a kept
  // connection just as it is taken).
  bool keep_serving = false;
  int answers = 0;

  Verdict Decide(const std::string& host, const Address*, uint16_t port, bool http,
                 const std::string& method, const std::string& path) override {
    std::lock_guard<std::mutex> lock(mu_);
    decided_.push_back(absl::StrCat(host, ":", port, " ", method, " ", path, http ? "" : " (tcp)"));
    Verdict v;
    v.allow = !deny(host, method, path);
    v.rule_id = v.allow ? "r-allow" : "r-deny";
    v.rule_text = v.allow ? "allow " + host : "deny " + host + " " + path;
    v.path_rules = path_rules;
    return v;
  }
  absl::StatusOr<Destination> Admit(const std::string& host, uint16_t port,
                                    Verdict* v) override {
    if (connect_turns_deny) {
      v->allow = false;
      v->reason = host + " is a protected address";
      return absl::PermissionDeniedError(v->reason);
    }
    Destination d;
    d.host = host;
    d.port = port;
    return d;
  }
  absl::StatusOr<int> Dial(const Destination&) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++connects_;
    if (!connect_error.ok()) return connect_error;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      return absl::InternalError("socketpair");
    }
    upstreams_.emplace_back([this, fd = pair[1], answer = response, keep = keep_serving,
                             limit = answers] {
      for (int served = 0;; ++served) {
        std::string request = ReadRequest(fd);
        if (request.empty()) break;
        {
          std::lock_guard<std::mutex> lock(mu_);
          upstream_requests_.push_back(request);
        }
        if (limit > 0 && served == limit) break;
        if (!answer.empty()) (void)!write(fd, answer.data(), answer.size());
        if (!keep && limit == 0) break;
      }
      close(fd);
    });
    return pair[0];
  }
  std::vector<Placement> Credentials(const std::string&, uint16_t) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++credential_asks_;
    return placements;
  }
  void Record(const std::string& host, uint16_t port, const std::string& method,
              const std::string& path, const Verdict& v, pb::Path) override {
    std::lock_guard<std::mutex> lock(mu_);
    recorded_.push_back(
        absl::StrCat(v.allow ? "allow " : "deny ", host, ":", port, " ", method, " ", path));
  }
  absl::StatusOr<UniqueSsl> UpstreamTls(int, const std::string&) override {
    return absl::UnimplementedError("no TLS in this test");
  }
  SocketSet* Sockets() override { return &sockets_; }
  UpstreamPool* Pool() override { return &pool_; }

  // Closes the kept connections and joins the upstreams, then the lists
  // are final.
  void Finish() {
    pool_.Close();
    for (auto& t : upstreams_) t.join();
    upstreams_.clear();
  }
  size_t kept() const { return pool_.idle(); }
  const std::vector<std::string>& decided() const { return decided_; }
  const std::vector<std::string>& recorded() const { return recorded_; }
  const std::vector<std::string>& upstream_requests() const { return upstream_requests_; }
  int connects() const { return connects_; }
  int credential_asks() const { return credential_asks_; }

 private:
  std::mutex mu_;
  std::vector<std::thread> upstreams_;
  std::vector<std::string> decided_, recorded_, upstream_requests_;
  int connects_ = 0;
  int credential_asks_ = 0;
  SocketSet sockets_;
  UpstreamPool pool_;
};

// Exchange sends `requests` on a client connection (then ends its side),
// serves it as a traffic path would (its first head read, then
// ServeRequests), and returns all the client got back.
std::string Exchange(FakePeers& peers, const std::string& requests,
                     const std::string& conn_host = "", uint16_t conn_port = 0,
                     bool finish = true) {
  int pair[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
  EXPECT_EQ(write(pair[1], requests.data(), requests.size()),
            static_cast<ssize_t>(requests.size()));
  shutdown(pair[1], SHUT_WR);
  // The exchange runs on a fiber, as proxyd's handlers do.
  FiberLoops loops(1, 1);
  bool spawned = loops.Spawn([&peers, fd = pair[0], conn_host, conn_port] {
    Stream client(fd);
    client.set_timeout(std::chrono::seconds(10));
    auto head = ReadHead(client, kMaxHead);
    if (!head.ok()) return;
    ServeRequests(peers, client, *head, conn_host, conn_port,
                  conn_host.empty() ? pb::FORWARD : pb::TRANSPARENT);
  });
  EXPECT_TRUE(spawned);
  if (!spawned) close(pair[0]);
  std::string got;
  char buf[4096];
  for (ssize_t n; (n = read(pair[1], buf, sizeof(buf))) > 0;) got.append(buf, n);
  loops.Stop();
  close(pair[1]);
  if (finish) peers.Finish();
  return got;
}

size_t Count(const std::string& text, const std::string& word) {
  size_t n = 0;
  for (size_t at = text.find(word); at != std::string::npos; at = text.find(word, at + 1)) ++n;
  return n;
}

TEST(HttpExchangeTest, ADeniedRequestGetsA403AndNeverConnects) {
  FakePeers peers;
  peers.deny = [](const std::string&, const std::string&, const std::string&) { return true; };
  std::string got = Exchange(peers, "GET http://example.test/x HTTP/1.1\r\nHost: example.test\r\n\r\n");
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 403 ")) << got;
  EXPECT_EQ(peers.connects(), 0);
  EXPECT_TRUE(peers.upstream_requests().empty());
  EXPECT_EQ(peers.recorded(), std::vector<std::string>{"deny example.test:80 GET /x"});
}

TEST(HttpExchangeTest, AnAllowedRequestGoesUpstreamAloneAndWithoutProxyHeaders) {
  FakePeers peers;
  std::string got = Exchange(peers,
                             "GET http://example.test:8080/a?b=1 HTTP/1.1\r\n"
                             "Host: example.test:8080\r\nProxy-Connection: keep-alive\r\n"
                             "Proxy-Authorization: Basic c2VjcmV0\r\nKeep-Alive: 300\r\n\r\n");
  EXPECT_EQ(got, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  ASSERT_EQ(peers.upstream_requests().size(), 1u);
  const std::string& up = peers.upstream_requests()[0];
  EXPECT_TRUE(absl::StartsWith(up, "GET /a?b=1 HTTP/1.1\r\n")) << up;
  // HTTP/1.1 upstream: kept for the next request, so no Connection.
  EXPECT_FALSE(absl::StrContains(up, "Connection:")) << up;
  EXPECT_FALSE(absl::StrContains(up, "Proxy-")) << up;
  EXPECT_FALSE(absl::StrContains(up, "Keep-Alive")) << up;
  EXPECT_EQ(peers.decided(), std::vector<std::string>{"example.test:8080 GET /a"});
  EXPECT_EQ(peers.recorded(), std::vector<std::string>{"allow example.test:8080 GET /a"});
}

TEST(HttpExchangeTest, EachRequestOnAKeptAliveConnectionIsDecidedAndSentOnItsOwn) {
  FakePeers peers;
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /two HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 3u) << got;
  EXPECT_EQ(peers.decided(),
            (std::vector<std::string>{"example.test:80 GET /one", "example.test:80 GET /two",
                                      "example.test:80 GET /three"}));
  // Upstreams that close after each answer: three connections, each with
  // one request.
  ASSERT_EQ(peers.upstream_requests().size(), 3u);
  for (const auto& up : peers.upstream_requests()) EXPECT_EQ(Count(up, "GET /"), 1u) << up;
  EXPECT_EQ(peers.connects(), 3);
}

TEST(HttpExchangeTest, AnUpstreamThatKeepsItsConnectionCarriesEachDecidedRequest) {
  FakePeers peers;
  peers.keep_serving = true;
  peers.deny = [](const std::string&, const std::string&, const std::string& path) {
    return path == "/secret";
  };
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /two HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80, /*finish=*/false);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 3u) << got;
  EXPECT_EQ(peers.connects(), 1);
  EXPECT_EQ(peers.kept(), 1u);
  // Another client connection of the sandbox to the same destination
  // takes the kept connection; its denied request never reaches it.
  got = Exchange(peers,
                 "GET /four HTTP/1.1\r\nHost: example.test\r\n\r\n"
                 "GET /secret HTTP/1.1\r\nHost: example.test\r\n\r\n",
                 "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 200 OK")) << got;
  EXPECT_EQ(Count(got, "HTTP/1.1 403 "), 1u) << got;
  EXPECT_EQ(peers.connects(), 1);
  EXPECT_EQ(peers.decided(),
            (std::vector<std::string>{"example.test:80 GET /one", "example.test:80 GET /two",
                                      "example.test:80 GET /three", "example.test:80 GET /four",
                                      "example.test:80 GET /secret"}));
  ASSERT_EQ(peers.upstream_requests().size(), 4u);
  EXPECT_TRUE(absl::StartsWith(peers.upstream_requests()[3], "GET /four ")) << got;
}

TEST(HttpExchangeTest, AKeptConnectionTheServerClosesIsReplacedOnceAndTheRequestSentAgain) {
  FakePeers peers;
  peers.answers = 1;  // answers /one, reads /two and closes
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /two HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 2u) << got;
  EXPECT_EQ(peers.connects(), 2);
  // /two was decided once, and reached the second connection.
  EXPECT_EQ(peers.decided(), (std::vector<std::string>{"example.test:80 GET /one",
                                                       "example.test:80 GET /two"}));
  ASSERT_EQ(peers.upstream_requests().size(), 3u);
  EXPECT_TRUE(absl::StartsWith(peers.upstream_requests()[2], "GET /two ")) << got;
}

TEST(HttpExchangeTest, AnUpstreamThatSendsPastItsResponseIsNeverReused) {
  FakePeers peers;
  peers.keep_serving = true;
  // Two bytes announced, more sent: what follows would be read as the
  // answer to the next request.
  peers.response = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                   "HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\nforged";
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /two HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_FALSE(absl::StrContains(got, "forged")) << got;
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 2u) << got;
  EXPECT_EQ(peers.connects(), 2);
}

TEST(HttpExchangeTest, ARequestWithAStreamedBodyTakesANewConnection) {
  FakePeers peers;
  peers.keep_serving = true;
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "POST /up HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n"
                             "\r\nhello",
                             "example.test", 80);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 2u) << got;
  EXPECT_EQ(peers.connects(), 2);
}

TEST(HttpExchangeTest, ARequestThatMustNotBeSentTwiceNeverTakesAKeptConnection) {
  FakePeers peers;
  peers.keep_serving = true;
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "POST /two HTTP/1.1\r\nHost: example.test\r\nContent-Length: 0\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 3u) << got;
  // The POST got a connection of its own; the GET after it took a kept one.
  EXPECT_EQ(peers.connects(), 2);
}

TEST(HttpExchangeTest, AResponseThatSaysCloseOrIsHttpOneZeroIsNotKept) {
  for (const std::string& response :
       {std::string("HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n"
                    "Connection: Keep-Alive, Close\r\n\r\nok"),
        std::string("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")}) {
    FakePeers peers;
    peers.keep_serving = true;
    peers.response = response;
    std::string got = Exchange(peers,
                               "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                               "GET /two HTTP/1.1\r\nHost: example.test\r\n\r\n",
                               "example.test", 80, /*finish=*/false);
    EXPECT_EQ(Count(got, "200 OK"), 2u) << got;
    EXPECT_EQ(peers.connects(), 2) << response;
    EXPECT_EQ(peers.kept(), 0u) << response;
    peers.Finish();
  }
}

TEST(HttpExchangeTest, HttpOneZeroUpstreamRequestsCloseTheirConnection) {
  FakePeers peers;
  peers.keep_serving = true;
  std::string got =
      Exchange(peers, "GET /a HTTP/1.0\r\nHost: example.test\r\n\r\n", "example.test", 80,
               /*finish=*/false);
  EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 1u) << got;
  EXPECT_EQ(peers.kept(), 0u);
  peers.Finish();
  ASSERT_EQ(peers.upstream_requests().size(), 1u);
  EXPECT_TRUE(absl::StrContains(peers.upstream_requests()[0], "Connection: close\r\n"));
}

TEST(HttpExchangeTest, ADenyMidConnectionEndsItAndTheRestIsNeverRead) {
  FakePeers peers;
  peers.deny = [](const std::string&, const std::string&, const std::string& path) {
    return path == "/secret";
  };
  std::string got = Exchange(peers,
                             "GET /one HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /secret HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /three HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 200 OK")) << got;
  EXPECT_EQ(Count(got, "HTTP/1.1 403 "), 1u) << got;
  EXPECT_FALSE(absl::StrContains(got.substr(got.find("HTTP/1.1 403")), "HTTP/1.1 200")) << got;
  EXPECT_EQ(peers.decided(), (std::vector<std::string>{"example.test:80 GET /one",
                                                       "example.test:80 GET /secret"}));
  ASSERT_EQ(peers.upstream_requests().size(), 1u);
  EXPECT_TRUE(absl::StartsWith(peers.upstream_requests()[0], "GET /one "));
}

TEST(HttpExchangeTest, AHostHeaderNamingAnotherHostIsRefusedUndecided) {
  FakePeers peers;
  std::string got =
      Exchange(peers, "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 400 ")) << got;
  EXPECT_TRUE(absl::StrContains(
      got, "airlock: the Host header names other.test but the connection is to example.test"))
      << got;
  EXPECT_TRUE(peers.decided().empty());
  EXPECT_EQ(peers.connects(), 0);
}

TEST(HttpExchangeTest, SmugglingShapesAre400AndUndecided) {
  for (const std::string& head :
       {std::string("POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        std::string("POST / HTTP/1.1\r\nHost: example.test\r\nContent-Length: 5\r\n"
                    "Content-Length: 6\r\n\r\nhello!"),
        std::string("GET / HTTP/1.1\r\nHost: example.test\r\nHost: other.test\r\n\r\n")}) {
    FakePeers peers;
    std::string got = Exchange(peers, head, "example.test", 80);
    EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 400 ")) << head << "\n" << got;
    EXPECT_TRUE(peers.decided().empty()) << head;
    EXPECT_EQ(peers.connects(), 0) << head;
  }
}

TEST(HttpExchangeTest, ClearTextRequestsAreNeverGivenCredentials) {
  FakePeers peers;
  peers.placements = {Placement{"c1", "SENTINEL", "real-value", *ParseFormat("bearer"), ""}};
  std::string got = Exchange(
      peers, "GET /v1 HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer SENTINEL\r\n\r\n",
      "api.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 200 OK")) << got;
  EXPECT_EQ(peers.credential_asks(), 0);
  ASSERT_EQ(peers.upstream_requests().size(), 1u);
  EXPECT_TRUE(absl::StrContains(peers.upstream_requests()[0], "Bearer SENTINEL"));
  EXPECT_FALSE(absl::StrContains(peers.upstream_requests()[0], "real-value"));
}

TEST(HttpExchangeTest, APathAnotherServerCouldReadDifferentlyIsRefusedWherePathRulesApply) {
  FakePeers peers;
  peers.path_rules = true;
  std::string got =
      Exchange(peers, "GET /repos//x HTTP/1.1\r\nHost: example.test\r\n\r\n", "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 400 ")) << got;
  EXPECT_TRUE(absl::StrContains(got, "refused because path rules apply to example.test")) << got;
  EXPECT_EQ(peers.connects(), 0);
  // Without path rules on the host the same path is carried as sent.
  FakePeers plain;
  got = Exchange(plain, "GET /repos//x HTTP/1.1\r\nHost: example.test\r\n\r\n", "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 200 OK")) << got;
  ASSERT_EQ(plain.upstream_requests().size(), 1u);
  EXPECT_TRUE(absl::StartsWith(plain.upstream_requests()[0], "GET /repos//x HTTP/1.1"));
}

TEST(HttpExchangeTest, AProtectedAddressFoundAtConnectIsADeny) {
  FakePeers peers;
  peers.connect_turns_deny = true;
  std::string got =
      Exchange(peers, "GET /x HTTP/1.1\r\nHost: inside.test\r\n\r\n", "inside.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 403 ")) << got;
  EXPECT_EQ(peers.recorded(), std::vector<std::string>{"deny inside.test:80 GET /x"});
  EXPECT_TRUE(peers.upstream_requests().empty());
}

TEST(HttpExchangeTest, AnUnreachableOrSilentUpstreamIsA502) {
  FakePeers down;
  down.connect_error = absl::UnavailableError("connection refused");
  std::string got = Exchange(down, "GET /x HTTP/1.1\r\nHost: example.test\r\n\r\n", "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 502 ")) << got;
  EXPECT_TRUE(absl::StrContains(got, "connection refused")) << got;
  EXPECT_EQ(down.recorded().size(), 1u);

  FakePeers silent;
  silent.response = "";
  got = Exchange(silent, "GET /x HTTP/1.1\r\nHost: example.test\r\n\r\n", "example.test", 80);
  EXPECT_TRUE(absl::StartsWith(got, "HTTP/1.1 502 ")) << got;
  EXPECT_TRUE(absl::StrContains(got, "the upstream sent no response")) << got;
}

TEST(HttpExchangeTest, BodiesAreCarriedWholeBothWays) {
  FakePeers peers;
  peers.response =
      "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
  std::string got = Exchange(peers,
                             "POST /up HTTP/1.1\r\nHost: example.test\r\nContent-Length: 11\r\n\r\n"
                             "hello world",
                             "example.test", 80);
  EXPECT_EQ(got, "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n");
  ASSERT_EQ(peers.upstream_requests().size(), 1u);
  EXPECT_TRUE(absl::EndsWith(peers.upstream_requests()[0], "\r\n\r\nhello world"))
      << peers.upstream_requests()[0];
}

TEST(HttpExchangeTest, AResponseThatEndsByClosingEndsTheClientConnection) {
  FakePeers peers;
  peers.response = "HTTP/1.1 200 OK\r\n\r\nuntil close";
  std::string got = Exchange(peers,
                             "GET /a HTTP/1.1\r\nHost: example.test\r\n\r\n"
                             "GET /b HTTP/1.1\r\nHost: example.test\r\n\r\n",
                             "example.test", 80);
  EXPECT_TRUE(absl::StrContains(got, "Connection: close\r\n")) << got;
  EXPECT_TRUE(absl::EndsWith(got, "until close")) << got;
  // The second request was never read, so never decided.
  EXPECT_EQ(peers.decided(), std::vector<std::string>{"example.test:80 GET /a"});
}

TEST(HttpExchangeTest, HttpOneZeroAndConnectionCloseAreServedOnce) {
  for (const std::string& first : {std::string("GET /a HTTP/1.0\r\nHost: example.test\r\n\r\n"),
                                   std::string("GET /a HTTP/1.1\r\nHost: example.test\r\n"
                                               "Connection: close\r\n\r\n")}) {
    FakePeers peers;
    std::string got =
        Exchange(peers, first + "GET /b HTTP/1.1\r\nHost: example.test\r\n\r\n", "example.test", 80);
    EXPECT_EQ(Count(got, "HTTP/1.1 200 OK"), 1u) << got;
    EXPECT_TRUE(absl::StrContains(got, "Connection: close\r\n")) << got;
    EXPECT_EQ(peers.decided(), std::vector<std::string>{"example.test:80 GET /a"}) << first;
  }
}

}  // namespace
}  // namespace airlock::proxyd
