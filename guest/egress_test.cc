// The agent's egress endpoint without a VM: its listeners on ephemeral
// loopback ports and its Egress API on a Unix socket, driven the way proxyd
// drives it.
#include "guest/egress.h"

#include <arpa/inet.h>
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include <grpcpp/grpcpp.h>

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

class EgressTest : public ::testing::Test {
 protected:
  void SetUp() override {
    service_.set_root(dir_.path());
    ASSERT_TRUE(service_.Listen(0, 0, "127.0.0.1", 0).ok());
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_.path() + "/e.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    stub_ = pb::Egress::NewStub(
        grpc::CreateChannel("unix:" + dir_.path() + "/e.sock", grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    watch_ctx_.TryCancel();
    if (watch_) watch_->Finish();
    server_->Shutdown();
  }
  // Watch starts watching and reads the empty first event.
  void Watch(const std::string& ca = "") {
    pb::EgressWatchRequest req;
    req.set_ca_certificate_pem(ca);
    watch_ = stub_->Watch(&watch_ctx_, req);
    pb::EgressEvent first;
    ASSERT_TRUE(watch_->Read(&first));
    EXPECT_FALSE(first.has_connection() || first.has_dns());
  }
  pb::EgressEvent Next() {
    pb::EgressEvent e;
    EXPECT_TRUE(watch_->Read(&e));
    return e;
  }

  testing::ShortTempDir dir_;
  EgressService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<pb::Egress::Stub> stub_;
  grpc::ClientContext watch_ctx_;
  std::unique_ptr<grpc::ClientReader<pb::EgressEvent>> watch_;
};

TEST_F(EgressTest, ForwardConnectionIsCarriedBothWays) {
  Watch();
  int c = ConnectTo(service_.forward_port());
  pb::EgressEvent e = Next();
  ASSERT_TRUE(e.has_connection());
  EXPECT_EQ(e.connection().via(), pb::EGRESS_FORWARD);
  grpc::ClientContext ctx;
  auto carry = stub_->Carry(&ctx);
  pb::EgressData first;
  first.set_id(e.connection().id());
  first.set_data("hello guest");
  ASSERT_TRUE(carry->Write(first));
  char buf[64];
  ASSERT_EQ(read(c, buf, 11), 11);
  EXPECT_EQ(std::string(buf, 11), "hello guest");
  ASSERT_TRUE(WriteAll(c, "hi proxy"));
  shutdown(c, SHUT_WR);
  std::string got;
  bool eof = false;
  pb::EgressData m;
  while (!eof && carry->Read(&m)) {
    got += m.data();
    eof = m.eof();
  }
  EXPECT_EQ(got, "hi proxy");
  EXPECT_TRUE(eof);
  pb::EgressData done;
  done.set_eof(true);
  carry->Write(done);
  carry->WritesDone();
  EXPECT_TRUE(carry->Finish().ok());
  EXPECT_EQ(read(c, buf, sizeof(buf)), 0) << "the guest sees an orderly close";
  close(c);
}

TEST_F(EgressTest, ResetFromProxydIsATcpReset) {
  Watch();
  int c = ConnectTo(service_.forward_port());
  pb::EgressEvent e = Next();
  grpc::ClientContext ctx;
  auto carry = stub_->Carry(&ctx);
  pb::EgressData first;
  first.set_id(e.connection().id());
  first.set_reset(true);
  carry->Write(first);
  carry->WritesDone();
  pb::EgressData m;
  while (carry->Read(&m)) {
  }
  carry->Finish();
  char buf[8];
  EXPECT_EQ(read(c, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(c);
}

TEST_F(EgressTest, UnknownIdIsNotFoundAndNoWatcherResets) {
  grpc::ClientContext ctx;
  auto carry = stub_->Carry(&ctx);
  pb::EgressData first;
  first.set_id(424242);
  carry->Write(first);
  carry->WritesDone();
  EXPECT_EQ(carry->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  // Nobody watching: the connection is reset at once.
  int c = ConnectTo(service_.forward_port());
  char buf[8];
  EXPECT_EQ(read(c, buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ECONNRESET);
  close(c);
}

TEST_F(EgressTest, DnsQueryAndAnswer) {
  Watch();
  int u = ConnectTo(service_.dns_port(), SOCK_DGRAM);
  ASSERT_EQ(send(u, "query", 5, 0), 5);
  pb::EgressEvent e = Next();
  ASSERT_TRUE(e.has_dns());
  EXPECT_EQ(e.dns().packet(), "query");
  grpc::ClientContext ctx;
  pb::DnsAnswer a;
  a.set_id(e.dns().id());
  a.set_packet("answer");
  airlock::agent::v1::Empty empty;
  ASSERT_TRUE(stub_->AnswerDns(&ctx, a, &empty).ok());
  char buf[16];
  ASSERT_EQ(recv(u, buf, sizeof(buf), 0), 6);
  EXPECT_EQ(std::string(buf, 6), "answer");
  grpc::ClientContext again;
  EXPECT_EQ(stub_->AnswerDns(&again, a, &empty).error_code(), grpc::StatusCode::NOT_FOUND);
  close(u);
}

// What egress.nft redirects from containers reaches the wildcard sockets:
// a query to another address of the guest is answered from the socket it
// came in on, and the guest's own resolver address keeps its own socket.
TEST(EgressForwardedTest, DnsOnEveryAddressAndTransparentOnAny) {
  testing::ShortTempDir dir;
  EgressService service;
  ASSERT_TRUE(service.Listen(0, 0, "127.0.0.9", 0, /*forwarded=*/true).ok());
  grpc::ServerBuilder b;
  b.AddListeningPort("unix:" + dir.path() + "/e.sock", grpc::InsecureServerCredentials());
  b.RegisterService(&service);
  auto server = b.BuildAndStart();
  auto stub = pb::Egress::NewStub(
      grpc::CreateChannel("unix:" + dir.path() + "/e.sock", grpc::InsecureChannelCredentials()));
  grpc::ClientContext watch_ctx;
  auto watch = stub->Watch(&watch_ctx, pb::EgressWatchRequest());
  pb::EgressEvent e;
  ASSERT_TRUE(watch->Read(&e));
  for (const char* to : {"127.0.0.10", "127.0.0.9"}) {
    int u = socket(AF_INET, SOCK_DGRAM, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(service.dns_port());
    inet_pton(AF_INET, to, &sa.sin_addr);
    ASSERT_EQ(sendto(u, "q", 1, 0, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 1);
    ASSERT_TRUE(watch->Read(&e));
    ASSERT_TRUE(e.has_dns()) << to;
    grpc::ClientContext ctx;
    pb::DnsAnswer a;
    a.set_id(e.dns().id());
    a.set_packet(std::string("answer for ") + to);
    airlock::agent::v1::Empty empty;
    ASSERT_TRUE(stub->AnswerDns(&ctx, a, &empty).ok());
    char buf[64];
    ssize_t n = recv(u, buf, sizeof(buf), 0);
    ASSERT_GT(n, 0) << to;
    EXPECT_EQ(std::string(buf, n), a.packet());
    close(u);
  }
  // The transparent listener takes connections on any address of the guest.
  int c = ConnectTo(service.transparent_port(), SOCK_STREAM, "127.0.0.10");
  close(c);
  watch_ctx.TryCancel();
  watch->Finish();
  server->Shutdown();
}

TEST_F(EgressTest, WatchInstallsTheCaOnce) {
  MakeDirs(dir_.path() + "/etc/ssl/certs", 0755).IgnoreError();
  {
    std::ofstream(dir_.path() + kSystemBundle) << "SYSTEM\n";
  }
  const std::string pem = "-----BEGIN CERTIFICATE-----\nX\n-----END CERTIFICATE-----\n";
  Watch(pem);
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
