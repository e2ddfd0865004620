// Drives a real DaemonRuntime server over a real Unix socket and a real mTLS
// TCP port.
#include "common/daemon_runtime.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "common/client.h"
#include "common/fd_io.h"
#include "common/peer_cred.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "protos/daemon/v1/daemon.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock {
namespace {

namespace secrets = airlock::secrets::v1;

// Reports the caller's peer credentials through Services (test only).
class WhoAmI final : public secrets::Secrets::Service {
 public:
  grpc::Status Services(grpc::ServerContext* ctx, const secrets::ServicesRequest*,
                        secrets::ServicesResponse* out) override {
    auto creds = CallerCredentials(*ctx);
    if (!creds.ok()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no creds");
    auto* s = out->add_services();
    s->set_name(std::to_string(creds->pid) + ":" + std::to_string(creds->uid));
    return grpc::Status::OK;
  }
};

// Socket paths must stay under 108 bytes, so the runtime dirs live in /tmp.
std::string Tmp(const std::string& leaf) {
  static testing::ShortTempDir* dir = new testing::ShortTempDir();
  return dir->path() + "/" + leaf;
}

// Runs a server in a thread for the life of the fixture.
class RuntimeFixture {
 public:
  explicit RuntimeFixture(std::vector<std::string> args) {
    auto config = ParseDaemonConfig("secretsd", args, {});
    EXPECT_TRUE(config.ok()) << config.status();
    auto rt = DaemonRuntime::Create(*config);
    EXPECT_TRUE(rt.ok()) << rt.status();
    rt_ = std::move(*rt);
    thread_ = std::thread([this] { served_ = rt_->Serve({&service_}); });
  }
  ~RuntimeFixture() {
    DaemonRuntime::RequestStop();
    thread_.join();
  }
  const DaemonConfig& config() { return rt_->config(); }
  absl::Status served_;

 private:
  WhoAmI service_;
  std::unique_ptr<DaemonRuntime> rt_;
  std::thread thread_;
};

TEST(DaemonRuntimeTest, ServesHealthInfoAndPeerCredentialsOnUnixSocket) {
  std::string rt = Tmp("rt1");
  RuntimeFixture f({"--runtime-dir=" + rt, "--state-dir=" + Tmp("st1")});
  auto ch = DialUnix(rt + "/secretsd.sock");
  ASSERT_TRUE(WaitHealthy(*ch, std::chrono::seconds(10)).ok());

  auto info = airlock::daemon::v1::Daemon::NewStub(ch);
  grpc::ClientContext c1;
  airlock::daemon::v1::GetInfoResponse ir;
  ASSERT_TRUE(info->GetInfo(&c1, {}, &ir).ok());
  EXPECT_EQ(ir.name(), "secretsd");
  EXPECT_EQ(ir.pid(), getpid());
  EXPECT_EQ(ir.state_file(), Tmp("st1") + "/secretsd.db");

  auto stub = secrets::Secrets::NewStub(ch);
  grpc::ClientContext c2;
  secrets::ServicesResponse sr;
  ASSERT_TRUE(stub->Services(&c2, {}, &sr).ok());
  EXPECT_EQ(sr.services(0).name(), std::to_string(getpid()) + ":" + std::to_string(getuid()));
}

TEST(DaemonRuntimeTest, UnbuiltMethodSaysSo) {
  std::string rt = Tmp("rt2");
  RuntimeFixture f({"--runtime-dir=" + rt, "--state-dir=" + Tmp("st2")});
  auto ch = DialUnix(rt + "/secretsd.sock");
  ASSERT_TRUE(WaitHealthy(*ch, std::chrono::seconds(10)).ok());
  auto stub = secrets::Secrets::NewStub(ch);
  grpc::ClientContext ctx;
  secrets::ListResponse resp;
  grpc::Status s = stub->List(&ctx, {}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(s.error_message().find("/airlock.secrets.v1.Secrets/List is not built yet in secretsd"),
            std::string::npos)
      << s.error_message();
}

TEST(DaemonRuntimeTest, SecondInstanceIsRefused) {
  std::string rt = Tmp("rt3");
  RuntimeFixture f({"--runtime-dir=" + rt, "--state-dir=" + Tmp("st3")});
  auto config = ParseDaemonConfig("secretsd", {"--runtime-dir=" + rt, "--state-dir=" + Tmp("st3")}, {});
  ASSERT_TRUE(config.ok());
  auto second = DaemonRuntime::Create(*config);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists) << second.status();
}

// Makes a CA, a server cert for 127.0.0.1 and a client cert with openssl(1).
void MakeCerts(const std::string& dir) {
  std::string cmd =
      "set -e; cd " + dir +
      "; openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 -subj /CN=test-ca 2>/dev/null"
      "; openssl req -newkey rsa:2048 -nodes -keyout srv.key -out srv.csr -subj /CN=localhost 2>/dev/null"
      "; printf 'subjectAltName=IP:127.0.0.1,DNS:localhost' > ext"
      "; openssl x509 -req -in srv.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out srv.pem -days 2 -extfile ext 2>/dev/null"
      "; openssl req -newkey rsa:2048 -nodes -keyout cli.key -out cli.csr -subj /CN=proxyd 2>/dev/null"
      "; openssl x509 -req -in cli.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out cli.pem -days 2 2>/dev/null";
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(DaemonRuntimeTest, TcpRequiresClientCertificateAndRefusesPlaintext) {
  std::string dir = Tmp("certs");
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  MakeCerts(dir);
  // A free port: bind :0 ourselves would race; ask the kernel through a
  // throwaway socket is enough for a loopback test.
  int port = 20000 + getpid() % 20000;
  std::string addr = "127.0.0.1:" + std::to_string(port);
  RuntimeFixture f({"--runtime-dir=" + Tmp("rt4"), "--state-dir=" + Tmp("st4"),
                    "--listen-tcp=" + addr, "--tls-cert=" + dir + "/srv.pem",
                    "--tls-key=" + dir + "/srv.key", "--tls-client-ca=" + dir + "/ca.pem"});
  ASSERT_TRUE(WaitHealthy(*DialUnix(Tmp("rt4") + "/secretsd.sock"), std::chrono::seconds(10)).ok());

  auto plain = grpc::CreateChannel(addr, grpc::InsecureChannelCredentials());
  EXPECT_FALSE(CheckHealth(*plain, std::chrono::seconds(3)).ok());

  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = ReadFileToString(dir + "/ca.pem");
  auto anon = grpc::CreateChannel(addr, grpc::SslCredentials(no_cert));
  EXPECT_FALSE(CheckHealth(*anon, std::chrono::seconds(3)).ok());

  grpc::SslCredentialsOptions mtls = no_cert;
  mtls.pem_private_key = ReadFileToString(dir + "/cli.key");
  mtls.pem_cert_chain = ReadFileToString(dir + "/cli.pem");
  auto good = grpc::CreateChannel(addr, grpc::SslCredentials(mtls));
  EXPECT_TRUE(CheckHealth(*good, std::chrono::seconds(5)).ok());
  auto info = airlock::daemon::v1::Daemon::NewStub(good);
  grpc::ClientContext ctx;
  airlock::daemon::v1::GetInfoResponse ir;
  ASSERT_TRUE(info->GetInfo(&ctx, {}, &ir).ok());
  ASSERT_EQ(ir.listen_size(), 2);
  EXPECT_EQ(ir.listen(1), "tcp:127.0.0.1:" + std::to_string(port) + " (mTLS)");
}

}  // namespace
}  // namespace airlock
