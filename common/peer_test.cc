#include "common/peer.h"

#include <fstream>

#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

std::shared_ptr<const PeerTls> SomeTls() {
  auto tls = std::make_shared<PeerTls>();
  tls->cert_pem = tls->key_pem = tls->ca_pem = "pem";
  return tls;
}

TEST(PeerTest, AbsolutePathsAndUnixPrefixAreUnixSockets) {
  auto a = ParsePeer("--policyd", "/run/airlock/policyd.sock", nullptr);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->is_tcp());
  EXPECT_EQ(a->unix_path(), "/run/airlock/policyd.sock");
  auto b = ParsePeer("--policyd", "unix:/tmp/p.sock", nullptr);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->unix_path(), "/tmp/p.sock");
  auto rel = ParsePeer("--policyd", "unix:p.sock", nullptr);
  EXPECT_EQ(rel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(rel.status().message().find("must be absolute"), absl::string_view::npos);
}

TEST(PeerTest, TcpNeedsTlsAndNeverFallsBackToPlaintext) {
  auto plain = ParsePeer("--secretsd", "10.0.0.2:7443", nullptr);
  EXPECT_EQ(plain.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(plain.status().message().find(
                "--secretsd=10.0.0.2:7443 is TCP, which is dialed only with mutual TLS"),
            absl::string_view::npos)
      << plain.status();
  for (const char* ok : {"10.0.0.2:7443", "policy.internal:1", "[::1]:65535", "localhost:7443"}) {
    auto p = ParsePeer("--secretsd", ok, SomeTls());
    ASSERT_TRUE(p.ok()) << ok << ": " << p.status();
    EXPECT_TRUE(p->is_tcp());
    EXPECT_EQ(p->address(), ok);
    EXPECT_EQ(p->unix_path(), "");
  }
}

TEST(PeerTest, MalformedAddressesAreRefusedWithTheOption) {
  for (const char* bad : {"policyd", "host:", ":7443", "host:0", "host:65536", "host:x",
                          "::1:7443", "[]:1", "a b:1", "relative/path.sock"}) {
    auto p = ParsePeer("--policyd", bad, SomeTls());
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find("--policyd="), absl::string_view::npos) << bad;
  }
}

TEST(PeerTest, TlsFilesGoTogetherAndMustBeReadable) {
  testing::ShortTempDir dir;
  const std::string f = dir.path() + "/c.pem";
  std::ofstream(f) << "-----BEGIN CERTIFICATE-----\n";
  PeerTlsFiles names{"--peer-tls-cert", "--peer-tls-key", "--peer-tls-ca"};
  auto none = ReadPeerTls({}, names);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  auto two = ReadPeerTls({f, f, ""}, names);
  EXPECT_EQ(two.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(two.status().message().find("go together"), absl::string_view::npos);
  auto missing = ReadPeerTls({f, dir.path() + "/nope.key", f}, names);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find("--peer-tls-key=" + dir.path() + "/nope.key"),
            absl::string_view::npos)
      << missing.status();
  auto all = ReadPeerTls({f, f, f}, names);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ((*all)->ca_pem, "-----BEGIN CERTIFICATE-----\n");
}

TEST(PeerTest, FromConfigDefaultsToTheRuntimeDirAndRefusesBothSpellings) {
  DaemonConfig c;
  c.runtime_dir = "/run/x";
  c.options = {{"policyd", ""}, {"policyd-socket", ""}};
  auto def = PeerFromConfig(c, "policyd");
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(def->unix_path(), "/run/x/policyd.sock");
  c.options["policyd-socket"] = "/other/p.sock";
  auto alias = PeerFromConfig(c, "policyd");
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->unix_path(), "/other/p.sock");
  c.options["policyd"] = "/third/p.sock";
  auto both = PeerFromConfig(c, "policyd");
  EXPECT_EQ(both.status().code(), absl::StatusCode::kInvalidArgument);
  c.options = {{"policyd", "policy.internal:7443"}};
  auto tcp = PeerFromConfig(c, "policyd");
  EXPECT_NE(tcp.status().message().find("--peer-tls-cert, --peer-tls-key and --peer-tls-ca"),
            absl::string_view::npos)
      << tcp.status();
}

TEST(PeerTest, PeerOptionsDeclareEachPeerItsAliasAndTheTlsFiles) {
  auto opts = PeerOptions({"gitd"});
  std::vector<std::string> names;
  for (const auto& o : opts) names.push_back(o.name);
  EXPECT_EQ(names, (std::vector<std::string>{"gitd", "gitd-socket", "peer-tls-cert",
                                             "peer-tls-key", "peer-tls-ca"}));
}

}  // namespace
}  // namespace airlock
