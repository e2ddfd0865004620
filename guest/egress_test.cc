// The agent's egress endpoint without a VM: its listeners on ephemeral
// loopback ports and its tunnel on a socket pair, driven frame by frame
// the way proxyd drives it.
#include "guest/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <deque>
#include <fstream>
#include <thread>

#include "common/fd_io.h"
#include "common/paths.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

namespace pb = airlock::agent::v1;

int ConnectTo(uint16_t port, int type = SOCK_STREAM, const char* ip = "127.0.0.1") {
  int fd = socket(AF_INET, type, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  inet_pton(AF_INET, ip, &sa.sin_addr);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << strerror(errno);
  return fd;
}

// TunnelClient drives the agent's tunnel the way proxyd does, frame by
// frame, over a socket pair: the agent serves the other end on a thread
// of its own, as it serves the egress port.
class TunnelClient {
 public:
  explicit TunnelClient(EgressService* service, const std::string& ca = "") {
    int sp[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    agent_end_ = std::make_unique<EgressTransport>(sp[1]);
    client_ = std::make_unique<EgressTransport>(sp[0]);
    serving_ = std::thread([service, t = agent_end_.get()] { service->Serve(t); });
    pb::EgressFrames start;
    start.mutable_start()->set_ca_certificate_pem(ca);
    EXPECT_TRUE(client_->Write(start));
    pb::EgressFrames first;
    EXPECT_TRUE(client_->Read(&first));
    EXPECT_EQ(first.frames_size(), 0);
  }
  ~TunnelClient() {
    // Closing this end ends the agent's Serve, as proxyd hanging up does.
    client_.reset();
    serving_.join();
  }
  pb::EgressFrame Next() {
    while (queue_.empty()) {
      pb::EgressFrames batch;
      if (!client_->Read(&batch)) return pb::EgressFrame();
      for (auto& f : batch.frames()) queue_.push_back(f);
    }
    pb::EgressFrame f = queue_.front();
    queue_.pop_front();
    return f;
  }
  bool Send(const pb::EgressFrame& f) {
    pb::EgressFrames batch;
    *batch.add_frames() = f;
    return client_->Write(batch);
  }

 private:
  std::unique_ptr<EgressTransport> agent_end_;
  std::unique_ptr<EgressTransport> client_;
  std::thread serving_;
  std::deque<pb::EgressFrame> queue_;
};

pb::EgressFrame Frame(uint64_t id) {
  pb::EgressFrame f;
  f.set_id(id);
  return f;
}

class EgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_.set_root(dir_.path());
    ASSERT_TRUE(service_.Listen(0, 0, "127.0.0.1", 0).ok());
  }
  void TearDown() override { tunnel_.reset(); }
  void Open(const std::string& ca = "") { tunnel_ = std::make_unique<TunnelClient>(&service_, ca); }

  testing::ShortTempDir dir_;
  EgressService service_;
  std::unique_ptr<TunnelClient> tunnel_;
};

TEST_F(EgressTest, ForwardConnectionIsCarriedBothWays) {
  Open();
  int c = ConnectTo(service_.forward_port());
  pb::EgressFrame open = tunnel_->Next();
  ASSERT_TRUE(open.has_open());
  EXPECT_EQ(open.open().via(), pb::EGRESS_FORWARD);
  EXPECT_EQ(open.id() % 2, 1u);
  pb::EgressFrame data = Frame(open.id());
  data.set_data("hello guest");
  ASSERT_TRUE(tunnel_->Send(data));
  char buf[64];
  ASSERT_EQ(read(c, buf, 11), 11);
  EXPECT_EQ(std::string(buf, 11), "hello guest");
  ASSERT_TRUE(WriteAll(c, "hi proxy"));
  shutdown(c, SHUT_WR);
  std::string got;
  bool eof = false;
  while (!eof) {
    pb::EgressFrame f = tunnel_->Next();
    ASSERT_EQ(f.id(), open.id());
    got += f.data();
    eof = f.eof();
  }
  EXPECT_EQ(got, "hi proxy");
  pb::EgressFrame done = Frame(open.id());
  done.set_eof(true);
  tunnel_->Send(done);
  EXPECT_EQ(read(c, buf, sizeof(buf)), 0) << "the guest sees an orderly close";
  close(c);
}

TEST_F(EgressTest, ResetFromProxydIsATcpReset) {
  Open();
  int c = ConnectTo(service_.forward_port());
  pb::EgressFrame open = tunnel_->Next();
  pb::EgressFrame reset = Frame(open.id());
  reset.set_reset(true);
  tunnel_->Send(reset);
  char buf[8];
  EXPECT_EQ(read(c, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(c);
}

TEST_F(EgressTest, NoTunnelResetsAndANewTunnelEndsTheOld) {
  // Nobody has opened a tunnel: the connection is reset at once.
  int c = ConnectTo(service_.forward_port());
  char buf[8];
  EXPECT_EQ(read(c, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(c);
  Open();
  int carried = ConnectTo(service_.forward_port());
  ASSERT_TRUE(tunnel_->Next().has_open());
  // A second tunnel (proxyd restarted) takes over; what the first carried
  // is reset, and new connections go to the second.
  TunnelClient second(&service_);
  EXPECT_EQ(read(carried, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(carried);
  int next = ConnectTo(service_.forward_port());
  EXPECT_TRUE(second.Next().has_open());
  close(next);
}

TEST_F(EgressTest, DnsQueryAndAnswer) {
  Open();
  int u = ConnectTo(service_.dns_port(), SOCK_DGRAM);
  ASSERT_EQ(send(u, "query", 5, 0), 5);
  pb::EgressFrame q = tunnel_->Next();
  ASSERT_EQ(q.kind_case(), pb::EgressFrame::kDnsQuery);
  EXPECT_EQ(q.dns_query(), "query");
  pb::EgressFrame a = Frame(q.id());
  a.set_dns_answer("answer");
  ASSERT_TRUE(tunnel_->Send(a));
  char buf[16];
  ASSERT_EQ(recv(u, buf, sizeof(buf), 0), 6);
  EXPECT_EQ(std::string(buf, 6), "answer");
  // A second answer to the same query is dropped.
  ASSERT_TRUE(tunnel_->Send(a));
  ASSERT_EQ(send(u, "again", 5, 0), 5);
  pb::EgressFrame q2 = tunnel_->Next();
  ASSERT_EQ(q2.dns_query(), "again");
  pb::EgressFrame a2 = Frame(q2.id());
  a2.set_dns_answer("second");
  ASSERT_TRUE(tunnel_->Send(a2));
  ASSERT_EQ(recv(u, buf, sizeof(buf), 0), 6);
  EXPECT_EQ(std::string(buf, 6), "second");
  close(u);
}

// What egress.nft redirects from containers reaches the wildcard sockets:
// a query to another address of the guest is answered from the socket it
// came in on, and the guest's own resolver address keeps its own socket.
TEST(EgressForwardedTest, DnsOnEveryAddressAndTransparentOnAny) {
  testing::ShortTempDir dir;
  EgressService service;
  ASSERT_TRUE(service.Listen(0, 0, "127.0.0.9", 0, /*forwarded=*/true).ok());
  auto owned = std::make_unique<TunnelClient>(&service);
  TunnelClient& tunnel = *owned;
  for (const char* to : {"127.0.0.10", "127.0.0.9"}) {
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(service.dns_port());
    inet_pton(AF_INET, to, &sa.sin_addr);
    ASSERT_EQ(sendto(u, "q", 1, 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 1);
    pb::EgressFrame q = tunnel.Next();
    ASSERT_EQ(q.kind_case(), pb::EgressFrame::kDnsQuery) << to;
    pb::EgressFrame a = Frame(q.id());
    a.set_dns_answer(std::string("answer for ") + to);
    ASSERT_TRUE(tunnel.Send(a));
    char buf[64];
    ssize_t n = recv(u, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << to;
    EXPECT_EQ(std::string(buf, n), a.dns_answer());
    close(u);
  }
  // The transparent listener takes connections on any address of the guest.
  int c = ConnectTo(service.transparent_port(), SOCK_STREAM, "127.0.0.10");
  close(c);
  owned.reset();
}

TEST_F(EgressTest, TunnelInstallsTheCaOnce) {
  MakeDirs(dir_.path() + "/etc/ssl/certs", 0755).IgnoreError();
  {
    std::ofstream(dir_.path() + kSystemBundle) << "SYSTEM\n";
  }
  const std::string pem = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n";
  Open(pem);
  EXPECT_EQ(ReadFileToString(dir_.path() + kCaPath), pem);
  ASSERT_TRUE(InstallCa(dir_.path(), pem).ok());
  EXPECT_EQ(ReadFileToString(dir_.path() + kSystemBundle), "SYSTEM\n" + pem);
}

TEST(EgressConfigTest, ResolverAndEnvironment) {
  testing::ShortTempDir dir;
  ASSERT_TRUE(MakeDirs(dir.path() + "/etc", 0755).ok());
  std::ofstream(dir.path() + "/etc/environment") << "EDITOR=vi\nHTTP_PROXY=http://old:1\n";
  ASSERT_TRUE(WriteEgressConfig(dir.path()).ok());
  ASSERT_TRUE(WriteEgressConfig(dir.path()).ok());  // idempotent across boots
  std::string env = ReadFileToString(dir.path() + "/etc/environment");
  EXPECT_NE(env.find("EDITOR=vi\n"), std::string::npos) << env;
  EXPECT_EQ(env.find("old:1"), std::string::npos) << env;
  EXPECT_EQ(env.find("HTTP_PROXY="), env.rfind("HTTP_PROXY=")) << env;
  EXPECT_NE(ReadFileToString(dir.path() + "/etc/resolv.conf").find("nameserver 127.0.0.53"),
            std::string::npos);
  EXPECT_NE(ReadFileToString(dir.path() + "/etc/environment").find("HTTPS_PROXY=http://127.0.0.1:3128"),
            std::string::npos);
  EXPECT_NE(ReadFileToString(dir.path() + "/etc/profile.d/airlock-egress.sh")
                .find("export NODE_EXTRA_CA_CERTS="),
            std::string::npos);
}

}  // namespace
}  // namespace airlock::guest
