// Daemons deployed apart: policyd and secretsd serve on loopback TCP with
// mutual TLS, and vmmd, proxyd and the CLI dial them there (the rest stay
// on Unix sockets). A sandbox gets its rules and an injected credential
// through them; a client certificate from another CA, a certificate for
// another daemon, a server certificate for another name, and plaintext TCP
// are each refused.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/peer.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock {
namespace {

using testing::BinaryPath;

constexpr char kAnthropicKey[] = "sk-ant-REMOTE-7d3b1f";

// FreeLoopbackPort is a port nothing listens on right now.
int FreeLoopbackPort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(a.sin_port);
}

// MakePeerCerts writes, under dir: ca.pem (the deployment's CA), a server
// certificate for "localhost" only (srv), client certificates with common
// names proxyd, vmmd and cli, and a foreign CA's certificate also named
// proxyd (foreign).
CommandResult MakePeerCerts(const std::string& dir) {
  const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes";
  std::string script = "set -e; cd " + dir + ";";
  for (const char* ca : {"ca", "foreignca"}) {
    absl::StrAppend(&script, "openssl req -x509 ", ec, " -keyout ", ca, ".key -out ", ca,
                    ".pem -days 2 -subj '/CN=", ca, "' 2>/dev/null;");
  }
  auto leaf = [&](const std::string& name, const std::string& cn, const std::string& ca,
                  const std::string& ext) {
    absl::StrAppend(&script, "openssl req ", ec, " -keyout ", name, ".key -out ", name,
                    ".csr -subj '/CN=", cn, "' 2>/dev/null;", "printf '", ext, "\\n' > ",
                    name, ".ext;", "openssl x509 -req -in ", name, ".csr -CA ", ca,
                    ".pem -CAkey ", ca, ".key -CAcreateserial -out ", name, ".pem -days 2 -extfile ",
                    name, ".ext 2>/dev/null;");
  };
  leaf("srv", "localhost", "ca", "subjectAltName=DNS:localhost");
  for (const char* cn : {"proxyd", "vmmd", "cli"}) leaf(cn, cn, "ca", "basicConstraints=CA:FALSE");
  leaf("foreign", "proxyd", "foreignca", "basicConstraints=CA:FALSE");
  return RunCommand({"sh", "-c", script});
}

class RemotePeersE2ETest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::ShortTempDir();
    const std::string d = dir_->path();
    env_ = new std::map<std::string, std::string>(testing::AirlockEnv(d));
    pki_ = new std::string(d + "/pki");
    ASSERT_TRUE(MakeDirs(*pki_, 0700).ok());
    auto pki = MakePeerCerts(*pki_);
    ASSERT_EQ(pki.exit_code, 0) << pki.err;
    auto certs = testing::MakeTestCerts(d, {"api.anthropic.com", "other.example.test"});
    ASSERT_EQ(certs.exit_code, 0) << certs.err;
    https_ = testing::StartFixtureServer(d, "https",
                                         {"python3", BinaryPath("tests/fixtures/upstream.py"),
                                          "--tls", d + "/up.pem", d + "/up.key"});
    ASSERT_GT(https_.port, 0);
    policyd_port_ = FreeLoopbackPort();
    secretsd_port_ = FreeLoopbackPort();
    ASSERT_GT(policyd_port_, 0);
    ASSERT_GT(secretsd_port_, 0);
    ASSERT_NE(policyd_port_, secretsd_port_);

    const std::string& p = *pki_;
    auto serve_tcp = [&](int port) {
      return absl::StrCat("listen-tcp = 127.0.0.1:", port, "\ntls-cert = ", p,
                          "/srv.pem\ntls-key = ", p, "/srv.key\ntls-client-ca = ", p, "/ca.pem\n");
    };
    auto dial_tcp = [&](const std::string& client) {
      return absl::StrCat("policyd = localhost:", policyd_port_, "\nsecretsd = localhost:",
                          secretsd_port_, "\npeer-tls-cert = ", p, "/", client,
                          ".pem\npeer-tls-key = ", p, "/", client, ".key\npeer-tls-ca = ", p,
                          "/ca.pem\n");
    };
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    std::ofstream(d + "/state/policyd.conf") << serve_tcp(policyd_port_);
    std::ofstream(d + "/state/secretsd.conf") << serve_tcp(secretsd_port_);
    std::ofstream(d + "/state/proxyd.conf")
        << dial_tcp("proxyd")
        << "resolve = api.anthropic.com=127.0.0.1, other.example.test=127.0.0.1\n"
        << "upstream-ca = " << d << "/ca.pem\n";
    std::ofstream(d + "/state/vmmd.conf") << dial_tcp("vmmd");
    auto started = Local({"daemon", "start"});
    ASSERT_EQ(started.exit_code, 0) << started.err;

    // From here the CLI reaches policyd and secretsd over TCP too.
    (*env_)["AIRLOCK_POLICYD"] = absl::StrCat("localhost:", policyd_port_);
    (*env_)["AIRLOCK_SECRETSD"] = absl::StrCat("localhost:", secretsd_port_);
    (*env_)["AIRLOCK_TLS_CERT"] = p + "/cli.pem";
    (*env_)["AIRLOCK_TLS_KEY"] = p + "/cli.key";
    (*env_)["AIRLOCK_TLS_CA"] = p + "/ca.pem";
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"policy", "init", "deny-all"},
          {"policy", "allow", "network", "api.anthropic.com"},
          {"secret", "set", "-g", "anthropic", "-t", kAnthropicKey}}) {
      auto r = Airlock(cmd);
      ASSERT_EQ(r.exit_code, 0) << cmd[0] << " " << cmd[1] << ": " << r.err;
    }
    auto c = Airlock({"create", "--name", "far", "-m", "1g", "shell"});
    ASSERT_EQ(c.exit_code, 0) << c.err;
  }
  static void TearDownTestSuite() {
    Airlock({"rm", "-f", "--all"});
    Local({"daemon", "stop"});
    if (https_.pid > 0) kill(https_.pid, SIGTERM);
    delete env_;
    delete pki_;
    delete dir_;
  }
  // Airlock runs the CLI as a user of the remote policyd and secretsd.
  static CommandResult Airlock(const std::vector<std::string>& args,
                               const std::map<std::string, std::string>& extra = {}) {
    auto env = *env_;
    for (const auto& [k, v] : extra) env[k] = v;
    return testing::RunAirlock(env, args);
  }
  // Local runs the CLI without the remote endpoints, to start and stop
  // every daemon of this test on this host.
  static CommandResult Local(const std::vector<std::string>& args) {
    auto env = *env_;
    for (const char* k : {"AIRLOCK_POLICYD", "AIRLOCK_SECRETSD", "AIRLOCK_TLS_CERT",
                          "AIRLOCK_TLS_KEY", "AIRLOCK_TLS_CA"}) {
      env.erase(k);
    }
    return testing::RunAirlock(env, args);
  }
  static CommandResult Guest(const std::string& script) {
    return Airlock({"exec", "far", "--", "bash", "-c", script});
  }
  // Secretsd dials secretsd's TCP endpoint `address` with client
  // certificate `client` (a name under pki/) and the deployment's CA.
  static std::unique_ptr<secrets::v1::Secrets::Stub> Secretsd(const std::string& address,
                                                              const std::string& client) {
    const std::string& p = *pki_;
    auto tls = ReadPeerTls({p + "/" + client + ".pem", p + "/" + client + ".key", p + "/ca.pem"},
                           {"cert", "key", "ca"});
    EXPECT_TRUE(tls.ok()) << tls.status();
    auto peer = ParsePeer("secretsd", address, *tls);
    EXPECT_TRUE(peer.ok()) << peer.status();
    return secrets::v1::Secrets::NewStub(peer->Dial());
  }
  static grpc::Status Resolve(secrets::v1::Secrets::Stub& stub) {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, std::chrono::seconds(5));
    secrets::v1::ResolveRequest req;
    req.set_sandbox("far");
    req.set_host("api.anthropic.com");
    secrets::v1::ResolveResponse resp;
    return stub.Resolve(&ctx, req, &resp);
  }

  static testing::ShortTempDir* dir_;
  static std::map<std::string, std::string>* env_;
  static std::string* pki_;
  static testing::FixtureServer https_;
  static int policyd_port_, secretsd_port_;
};

testing::ShortTempDir* RemotePeersE2ETest::dir_;
std::map<std::string, std::string>* RemotePeersE2ETest::env_;
std::string* RemotePeersE2ETest::pki_;
testing::FixtureServer RemotePeersE2ETest::https_;
int RemotePeersE2ETest::policyd_port_, RemotePeersE2ETest::secretsd_port_;

TEST_F(RemotePeersE2ETest, TheSandboxGetsItsRulesAndCredentialThroughTcpPeers) {
  const std::string port = std::to_string(https_.port);
  // Allowed by the rule stored in the TCP policyd; proxyd placed the key it
  // resolved from the TCP secretsd.
  auto api = Guest("curl -sS -m 20 -H \"x-api-key: $ANTHROPIC_API_KEY\" https://api.anthropic.com:" +
                   port + "/v1/messages -d '{}'");
  EXPECT_NE(api.out.find(absl::StrCat("auth=", kAnthropicKey)), std::string::npos)
      << api.out << api.err;
  // The guest itself holds only the sentinel vmmd got from that secretsd.
  auto env = Airlock({"exec", "far", "--", "printenv", "ANTHROPIC_API_KEY"});
  EXPECT_EQ(env.out, "proxy-managed\n") << env.err;
  // deny-all came from the TCP policyd too: a host without a rule is refused.
  auto other = Guest("curl -s -o /dev/null -w '%{http_code}' -m 20 http://other.example.test:" +
                     port + "/x");
  EXPECT_EQ(other.out, "403") << other.err;
}

TEST_F(RemotePeersE2ETest, TheCliUsesRemoteDaemonsAndNeverStartsThem) {
  auto status = Airlock({"daemon", "status", "--json"});
  EXPECT_EQ(status.exit_code, 0) << status.out << status.err;
  auto all = nlohmann::json::parse(status.out, nullptr, false);
  ASSERT_TRUE(all.is_array()) << status.out;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& d : all) by_name[d.at("name").get<std::string>()] = d;
  EXPECT_EQ(by_name.at("policyd").at("remote"), true);
  EXPECT_EQ(by_name.at("policyd").at("state"), "running");
  EXPECT_EQ(by_name.at("policyd").at("socket"), absl::StrCat("localhost:", policyd_port_));
  EXPECT_EQ(by_name.at("vmmd").at("remote"), false);
  auto ls = Airlock({"secret", "ls", "--json"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_NE(ls.out.find("\"anthropic\""), std::string::npos) << ls.out;
  EXPECT_EQ(ls.out.find(kAnthropicKey), std::string::npos);
  // A remote daemon that does not answer is reported, not started here.
  auto gone = Airlock({"policy", "ls"}, {{"AIRLOCK_POLICYD", "localhost:1"}});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("policyd at localhost:1 (AIRLOCK_POLICYD) does not answer"),
            std::string::npos)
      << gone.err;
}

TEST_F(RemotePeersE2ETest, AClientCertificateOfAnotherCaIsRefused) {
  auto r = Airlock({"policy", "ls"}, {{"AIRLOCK_TLS_CERT", *pki_ + "/foreign.pem"},
                                      {"AIRLOCK_TLS_KEY", *pki_ + "/foreign.key"}});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("policyd at localhost:" + std::to_string(policyd_port_) +
                       " (AIRLOCK_POLICYD) does not answer"),
            std::string::npos)
      << r.err;
  // Named proxyd but signed by another CA: the handshake fails before any
  // call, so secretsd never sees a Resolve.
  auto stub = Secretsd(absl::StrCat("localhost:", secretsd_port_), "foreign");
  EXPECT_EQ(Resolve(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RemotePeersE2ETest, OnlyProxydsCertificateResolvesOverTcp) {
  const std::string addr = absl::StrCat("localhost:", secretsd_port_);
  auto cli = Secretsd(addr, "cli");
  grpc::Status s = Resolve(*cli);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::PERMISSION_DENIED) << s.error_message();
  auto vmmd = Secretsd(addr, "vmmd");
  EXPECT_EQ(Resolve(*vmmd).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  auto proxyd = Secretsd(addr, "proxyd");
  grpc::Status ok = Resolve(*proxyd);
  EXPECT_TRUE(ok.ok()) << ok.error_message();
}

TEST_F(RemotePeersE2ETest, TheTcpServerRefusesPlaintextAndClientsWithoutACertificate) {
  const std::string addr = absl::StrCat("localhost:", secretsd_port_);
  auto plain = secrets::v1::Secrets::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  EXPECT_EQ(Resolve(*plain).error_code(), grpc::StatusCode::UNAVAILABLE);
  grpc::SslCredentialsOptions no_cert;
  no_cert.pem_root_certs = ReadFileToString(*pki_ + "/ca.pem");
  auto anonymous = secrets::v1::Secrets::NewStub(
      grpc::CreateChannel(addr, grpc::SslCredentials(no_cert)));
  EXPECT_EQ(Resolve(*anonymous).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RemotePeersE2ETest, TheServerNameIsChecked) {
  // The server's certificate names localhost only.
  auto stub = Secretsd(absl::StrCat("127.0.0.1:", secretsd_port_), "proxyd");
  EXPECT_EQ(Resolve(*stub).error_code(), grpc::StatusCode::UNAVAILABLE);
}

TEST_F(RemotePeersE2ETest, PlaintextTcpIsNeverDialed) {
  auto cli = Airlock({"policy", "ls"}, {{"AIRLOCK_TLS_CERT", ""}});
  EXPECT_EQ(cli.exit_code, 1);
  EXPECT_NE(cli.err.find("AIRLOCK_TLS_CERT, AIRLOCK_TLS_KEY and AIRLOCK_TLS_CA go together"),
            std::string::npos)
      << cli.err;
  auto none = Airlock({"policy", "ls"},
                      {{"AIRLOCK_TLS_CERT", ""}, {"AIRLOCK_TLS_KEY", ""}, {"AIRLOCK_TLS_CA", ""}});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("is TCP, which is dialed only with mutual TLS"), std::string::npos)
      << none.err;
  // A daemon refuses to start with a TCP peer and no client certificate.
  const std::string d = dir_->path();
  auto vmmd = RunCommand({BinaryPath("vmmd/vmmd"), "--runtime-dir=" + d + "/run2",
                          "--state-dir=" + d + "/state2",
                          absl::StrCat("--secretsd=localhost:", secretsd_port_)});
  EXPECT_NE(vmmd.exit_code, 0);
  EXPECT_NE(vmmd.err.find(absl::StrCat("--secretsd=localhost:", secretsd_port_,
                                       " is TCP, which is dialed only with mutual TLS")),
            std::string::npos)
      << vmmd.err;
}

}  // namespace
}  // namespace airlock
