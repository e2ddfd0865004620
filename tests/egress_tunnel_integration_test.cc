// The real proxyd (with policyd and secretsd) carrying a sandbox's egress
// tunnel whose guest side is this test: it answers proxyd's hello on the
// channel socket and speaks the tunnel's frames itself, so it can do what
// the guest agent never does but a guest that replaced it could (open one
// stream id twice). The upstream is an echo server on 127.0.0.1.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/channel_hello.h"
#include "common/client.h"
#include "common/egress_transport.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/agent/v1/agent.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

namespace airlock {
namespace {

namespace agentpb = agent::v1;
using std::chrono::seconds;
using std::chrono::steady_clock;

// WaitFor polls `done` until it holds or `limit` passes; its last answer.
bool WaitFor(const std::function<bool()>& done, seconds limit = seconds(10)) {
  auto deadline = steady_clock::now() + limit;
  while (!done()) {
    if (steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Readable waits until `fd` can be read, at most `limit`.
bool Readable(int fd, seconds limit) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, static_cast<int>(limit.count() * 1000)) == 1;
}

// LoopbackServer accepts connections on 127.0.0.1 and serves each on a
// thread of its own with `serve`, then closes it; it counts the
// connections it accepted. `serve` must not refer to the server (a
// connection's thread may outlive it).
class LoopbackServer {
 public:
  explicit LoopbackServer(std::function<void(int)> serve) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      return;
    }
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this, serve = std::move(serve)] {
      while (true) {
        int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shut down
        accepted_++;
        std::thread([serve, c] {
          serve(c);
          close(c);
        }).detach();
      }
    });
  }
  ~LoopbackServer() {
    shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

// Echo sends back what a connection sends until its end.
void Echo(int c) {
  char buf[4096];
  ssize_t n;
  while ((n = read(c, buf, sizeof(buf))) > 0) {
    if (!WriteAll(c, std::string(buf, n))) break;
  }
}

// OkServer answers every HTTP request with a kept-alive "200 ok", keeping
// each request line it read.
class OkServer {
 public:
  int port() const { return server_.port(); }
  int accepted() const { return server_.accepted(); }
  std::vector<std::string> requests() {
    std::lock_guard<std::mutex> lock(seen_->mu);
    return seen_->requests;
  }

 private:
  struct Seen {
    std::mutex mu;
    std::vector<std::string> requests;
  };
  std::shared_ptr<Seen> seen_ = std::make_shared<Seen>();
  LoopbackServer server_{[seen = seen_](int c) {
    std::string got;
    char buf[4096];
    ssize_t n;
    while ((n = read(c, buf, sizeof(buf))) > 0) {
      got.append(buf, n);
      for (size_t end; (end = got.find("\r\n\r\n")) != std::string::npos;) {
        {
          std::lock_guard<std::mutex> lock(seen->mu);
          seen->requests.push_back(got.substr(0, got.find("\r\n")));
        }
        got.erase(0, end + 4);
        if (!WriteAll(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")) return;
      }
    }
  }};
};

class EgressTunnelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_GT(echo_.port(), 0);
    ASSERT_GT(http_.port(), 0);
    env_ = testing::AirlockEnv(dir_.path());
    ASSERT_EQ(mkdir((dir_.path() + "/state").c_str(), 0700), 0);
    std::ofstream(dir_.path() + "/state/proxyd.conf") << "resolve = dup.test=127.0.0.1\n";
    ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
    ASSERT_EQ(Airlock({"policy", "init", "deny-all"}).exit_code, 0);
    ASSERT_EQ(Airlock({"policy", "allow", "network", Target(), "--sandbox", "fake"}).exit_code, 0);
    ASSERT_EQ(Airlock({"policy", "allow", "network", HttpTarget(), "--sandbox", "fake"}).exit_code,
              0);
    proxy_ = proxy::v1::Proxy::NewStub(DialUnix(dir_.path() + "/run/proxyd.sock"));
  }
  void TearDown() override {
    if (tunnel_) tunnel_->Shutdown();
    // The Attach call has a deadline of its own; a test that failed midway
    // waits for it here.
    if (attach_.joinable()) attach_.join();
    Airlock({"daemon", "stop"});
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args);
  }
  std::string Target() const { return "dup.test:" + std::to_string(echo_.port()); }
  std::string HttpTarget() const { return "dup.test:" + std::to_string(http_.port()); }

  // Attach listens on the channel socket as QEMU would, attaches it as
  // sandbox "fake", answers proxyd's hello and its tunnel's start as the
  // agent does, and returns when the Attach call has returned and proxyd
  // has the sandbox's policy.
  void Attach() {
    std::string path = dir_.path() + "/egress.sock";
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof(a.sun_path), "%s", path.c_str());
    ASSERT_EQ(bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    ASSERT_EQ(listen(lfd, 1), 0);
    attach_ = std::thread([this, path] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + seconds(60));
      proxy::v1::AttachRequest req;
      req.set_sandbox("fake");
      req.set_channel_path(path);
      proxy::v1::AttachResponse resp;
      attach_status_ = proxy_->Attach(&ctx, req, &resp);
    });
    int fd = Readable(lfd, seconds(30)) ? accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC) : -1;
    close(lfd);
    ASSERT_GE(fd, 0) << "proxyd did not connect to the channel socket";
    std::string line;
    char c;
    while (Readable(fd, seconds(10)) && read(fd, &c, 1) == 1 && c != '\n') line.push_back(c);
    ASSERT_EQ(line.rfind(kHelloPrefix, 0), 0u) << "proxyd's hello: " << line;
    ASSERT_TRUE(WriteAll(fd, kOkPrefix + line.substr(strlen(kHelloPrefix)) + "\n"));
    tunnel_ = std::make_unique<EgressTransport>(fd);
    agentpb::EgressFrames start;
    ASSERT_TRUE(tunnel_->Read(&start, steady_clock::now() + seconds(30)));
    ASSERT_TRUE(start.has_start()) << start.DebugString();
    agentpb::EgressFrames answer;
    answer.mutable_start()->set_max_window(start.start().max_window());
    ASSERT_TRUE(tunnel_->Write(answer));
    attach_.join();
    ASSERT_TRUE(attach_status_.ok()) << attach_status_.error_message();
    // The policy follows from policyd (the request carried none).
    ASSERT_TRUE(WaitFor([this] { return PolicyRevision() != 0; }, seconds(20)))
        << "proxyd got no policy from policyd";
  }

  uint64_t PolicyRevision() {
    grpc::ClientContext ctx;
    proxy::v1::AttachmentsResponse resp;
    if (!proxy_->Attachments(&ctx, {}, &resp).ok()) return 0;
    for (const auto& a : resp.attachments()) {
      if (a.sandbox() == "fake") return a.policy_revision();
    }
    return 0;
  }

  void Send(std::initializer_list<agentpb::EgressFrame> frames) {
    agentpb::EgressFrames m;
    for (const auto& f : frames) *m.add_frames() = f;
    ASSERT_TRUE(tunnel_->Write(m));
  }
  static agentpb::EgressFrame Open(uint64_t id) {
    agentpb::EgressFrame f;
    f.set_id(id);
    f.mutable_open()->set_via(agentpb::EGRESS_FORWARD);
    return f;
  }
  static agentpb::EgressFrame Transparent(uint64_t id, const std::string& address, int port) {
    agentpb::EgressFrame f;
    f.set_id(id);
    f.mutable_open()->set_via(agentpb::EGRESS_TRANSPARENT);
    f.mutable_open()->set_address(address);
    f.mutable_open()->set_port(port);
    return f;
  }
  static agentpb::EgressFrame Data(uint64_t id, const std::string& bytes) {
    agentpb::EgressFrame f;
    f.set_id(id);
    f.set_data(bytes);
    return f;
  }
  static agentpb::EgressFrame Eof(uint64_t id) {
    agentpb::EgressFrame f;
    f.set_id(id);
    f.set_eof(true);
    return f;
  }

  // ReadStream gathers what proxyd sends on stream `id` until the bytes
  // hold `until` (or, with an empty `until`, its end or reset); what other
  // streams get is kept in `others`. "" when nothing came within 20 s.
  std::string ReadStream(uint64_t id, const std::string& until, bool* ended = nullptr) {
    std::string got;
    auto deadline = steady_clock::now() + seconds(20);
    while (steady_clock::now() < deadline) {
      agentpb::EgressFrames in;
      if (!tunnel_->Read(&in, deadline)) break;
      for (const auto& f : in.frames()) {
        if (f.id() != id) {
          others_.push_back(f);
          continue;
        }
        if (f.has_data()) got += f.data();
        if (f.eof() || f.reset()) {
          if (ended) *ended = true;
          return got;
        }
      }
      if (!until.empty() && got.find(until) != std::string::npos) return got;
    }
    return got;
  }

  // AddressOf asks proxyd's DNS (as the guest's resolver does) for the A
  // record of `name`: the synthetic address proxyd maps back to it. "" when
  // no answer came.
  std::string AddressOf(const std::string& name) {
    std::string q("\x12\x34\x01\x00\x00\x01\x00\x00\x00\x00\x00\x00", 12);
    for (absl::string_view label : absl::StrSplit(name, '.')) {
      q.push_back(static_cast<char>(label.size()));
      q.append(label.data(), label.size());
    }
    q.append("\x00\x00\x01\x00\x01", 5);  // root, type A, class IN
    agentpb::EgressFrame f;
    f.set_id(7);
    f.set_dns_query(q);
    Send({f});
    auto deadline = steady_clock::now() + seconds(20);
    while (steady_clock::now() < deadline) {
      agentpb::EgressFrames in;
      if (!tunnel_->Read(&in, deadline)) break;
      for (const auto& a : in.frames()) {
        if (a.id() == 7 && a.has_dns_answer()) return FirstA(a.dns_answer(), q.size());
      }
    }
    return "";
  }

  // FirstA is the address of the first record of `answer` to our query
  // (`question_end`: where its question ends), if that record is an A;
  // "" for anything else (another id, an error, no record).
  static std::string FirstA(const std::string& answer, size_t question_end) {
    const auto* b = reinterpret_cast<const unsigned char*>(answer.data());
    // Id 0x1234, a response, RCODE 0, at least one answer; then the
    // record: a name (a pointer, 2 bytes), type, class, TTL, length.
    if (answer.size() < question_end + 16 || b[0] != 0x12 || b[1] != 0x34 ||
        (b[2] & 0x80) == 0 || (b[3] & 0x0f) != 0 || (b[6] << 8 | b[7]) == 0) {
      return "";
    }
    const unsigned char* r = b + question_end;
    if ((r[0] & 0xc0) != 0xc0 || (r[2] << 8 | r[3]) != 1 || (r[10] << 8 | r[11]) != 4) return "";
    char text[INET_ADDRSTRLEN];
    return inet_ntop(AF_INET, r + 12, text, sizeof(text)) ? text : "";
  }

  // Unexpected lists the frames other streams got that carried bytes or
  // ended them: a duplicate id must not leak into another stream.
  std::string Unexpected() const {
    std::string out;
    for (const auto& f : others_) {
      if (f.has_data() || f.eof() || f.reset()) absl::StrAppend(&out, f.ShortDebugString(), "\n");
    }
    return out;
  }

  uint64_t OpenConnections() {
    grpc::ClientContext ctx;
    proxy::v1::AttachmentsResponse resp;
    if (!proxy_->Attachments(&ctx, {}, &resp).ok()) return UINT64_MAX;
    for (const auto& a : resp.attachments()) {
      if (a.sandbox() == "fake") return a.open_connections();
    }
    return UINT64_MAX;
  }

  LoopbackServer echo_{Echo};
  OkServer http_;
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
  std::unique_ptr<proxy::v1::Proxy::Stub> proxy_;
  std::unique_ptr<EgressTransport> tunnel_;
  std::thread attach_;
  grpc::Status attach_status_;
  std::vector<agentpb::EgressFrame> others_;
};

TEST_F(EgressTunnelTest, AStreamIdOpenedTwiceKeepsTheFirstConnectionAndLeaksNoSlot) {
  ASSERT_NO_FATAL_FAILURE(Attach());
  std::string connect = "CONNECT " + Target() + " HTTP/1.1\r\nHost: " + Target() + "\r\n\r\n";
  Send({Open(1), Data(1, connect)});
  std::string head = ReadStream(1, "\r\n\r\n");
  ASSERT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_EQ(OpenConnections(), 1u);

  // The same id again, with a request of its own: ignored as an open; its
  // bytes are the first connection's, which is a tunnel to the echo server
  // by now, so they come back as they were sent.
  Send({Open(1), Data(1, "after the second open\n")});
  EXPECT_EQ(ReadStream(1, "after the second open\n"), "after the second open\n");
  EXPECT_FALSE(WaitFor([this] { return echo_.accepted() > 1; }, seconds(1)))
      << "the second open made a connection of its own";
  EXPECT_EQ(OpenConnections(), 1u) << "the second open took no slot";

  // The first connection ends as usual, and its slot comes back.
  Send({Eof(1)});
  bool ended = false;
  ReadStream(1, "", &ended);
  EXPECT_TRUE(ended) << "the echo server's end reached the guest";
  EXPECT_TRUE(WaitFor([this] { return OpenConnections() == 0; })) << "every slot is given back";

  // The id may be used again once its connection ended (the agent never
  // does; proxyd serves it as a new connection).
  Send({Open(1), Data(1, connect)});
  head = ReadStream(1, "\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  EXPECT_TRUE(WaitFor([this] { return echo_.accepted() == 2; }));
  EXPECT_EQ(Unexpected(), "");
}

// A transparent connection to a host allowed outright is connected at once
// and handed to the mux: a second open of its id must not connect again,
// nor take the first's stream over when it is handed over in turn.
TEST_F(EgressTunnelTest, ATransparentStreamIdOpenedTwiceConnectsOnce) {
  ASSERT_NO_FATAL_FAILURE(Attach());
  std::string address = AddressOf("dup.test");
  ASSERT_EQ(address.rfind("198.1", 0), 0u) << "a synthetic address: " << address;
  Send({Transparent(5, address, echo_.port()), Data(5, "first\n")});
  EXPECT_EQ(ReadStream(5, "first\n"), "first\n");
  EXPECT_EQ(OpenConnections(), 1u);

  Send({Transparent(5, address, echo_.port())});
  Send({Data(5, "second\n")});
  EXPECT_EQ(ReadStream(5, "second\n"), "second\n") << "the first connection carries on";
  // A second handler would connect on a thread of its own: give it time.
  EXPECT_FALSE(WaitFor([this] { return echo_.accepted() > 1; }, seconds(1)))
      << "the second open connected to the upstream";
  EXPECT_EQ(OpenConnections(), 1u);

  Send({Eof(5)});
  bool ended = false;
  ReadStream(5, "", &ended);
  EXPECT_TRUE(ended);
  EXPECT_TRUE(WaitFor([this] { return OpenConnections() == 0; })) << "every slot is given back";
  EXPECT_EQ(Unexpected(), "");
}

TEST_F(EgressTunnelTest, ADeniedDestinationIsRefusedAndHoldsNoSlot) {
  ASSERT_NO_FATAL_FAILURE(Attach());
  Send({Open(3), Data(3, "CONNECT elsewhere.test:443 HTTP/1.1\r\nHost: elsewhere.test:443\r\n\r\n")});
  std::string head = ReadStream(3, "\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.1 403", 0), 0u) << head;
  EXPECT_EQ(echo_.accepted(), 0);
  EXPECT_TRUE(WaitFor([this] { return OpenConnections() == 0; }));
}

// Plain HTTP through the forward proxy: requests on different guest
// connections of the sandbox share one upstream connection, each one
// decided first, and a denied request between them changes nothing.
// (That a denied request to the same destination never reaches a kept
// connection is http_exchange_test's.)
TEST_F(EgressTunnelTest, DecidedRequestsShareAKeptUpstreamConnection) {
  ASSERT_NO_FATAL_FAILURE(Attach());
  auto get = [this](const std::string& host, const std::string& path) {
    return "GET http://" + host + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n";
  };
  Send({Open(20), Data(20, get(HttpTarget(), "/one"))});
  std::string first = ReadStream(20, "ok");
  EXPECT_EQ(first.rfind("HTTP/1.1 200", 0), 0u) << first;
  Send({Eof(20)});
  bool ended = false;
  ReadStream(20, "", &ended);
  EXPECT_TRUE(ended);

  Send({Open(21), Data(21, get("elsewhere.test", "/x"))});
  std::string denied = ReadStream(21, "\r\n\r\n");
  EXPECT_EQ(denied.rfind("HTTP/1.1 403", 0), 0u) << denied;

  Send({Open(22), Data(22, get(HttpTarget(), "/two") + get(HttpTarget(), "/three"))});
  std::string more = ReadStream(22, "okHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
  EXPECT_EQ(more.find("HTTP/1.1 200"), 0u) << more;
  EXPECT_EQ(http_.accepted(), 1) << "each request took a connection of its own";
  EXPECT_EQ(http_.requests(), (std::vector<std::string>{"GET /one HTTP/1.1", "GET /two HTTP/1.1",
                                                        "GET /three HTTP/1.1"}));
  Send({Eof(22)});
  EXPECT_TRUE(WaitFor([this] { return OpenConnections() == 0; })) << "every slot is given back";
}

}  // namespace
}  // namespace airlock
