#include "common/config.h"

#include <fstream>

#include "gtest/gtest.h"

namespace airlock {
namespace {

TEST(ConfigFileTest, ParsesKeyValueLinesCommentsAndQuotes) {
  auto m = ParseConfigFile("# comment\n\nstate-dir = /var/x\n  log-level=debug \nsocket = \"/a b\"\n");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ((*m)["state-dir"], "/var/x");
  EXPECT_EQ((*m)["log-level"], "debug");
  EXPECT_EQ((*m)["socket"], "/a b");
}

TEST(ConfigFileTest, RejectsLineWithoutEqualsNamingTheLine) {
  auto m = ParseConfigFile("state-dir = /x\njunk\n");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("line 2"), std::string::npos) << m.status();
}

TEST(ConfigFileTest, RejectsDuplicateKey) {
  auto m = ParseConfigFile("a = 1\na = 2\n");
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("set twice"), std::string::npos);
}

TEST(DaemonConfigTest, DefaultsDeriveSocketFromRuntimeDir) {
  auto c = ParseDaemonConfig("gitd", {"--runtime-dir=/tmp/rt", "--state-dir", "/tmp/st"}, {});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->socket_path, "/tmp/rt/gitd.sock");
  EXPECT_EQ(c->StateFile(), "/tmp/st/gitd.db");
  EXPECT_EQ(c->log_level, LogLevel::kInfo);
}

TEST(DaemonConfigTest, FlagsWinOverConfigFile) {
  std::string path = std::string(getenv("TEST_TMPDIR")) + "/d.conf";
  std::ofstream(path) << "state-dir = /from/file\nlog-level = error\nimage-dir = /img\n";
  auto c = ParseDaemonConfig("vmmd", {"--config", path, "--state-dir=/from/flag"},
                             {{"image-dir", "guest images", "/default"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->state_dir, "/from/flag");
  EXPECT_EQ(c->log_level, LogLevel::kError);
  EXPECT_EQ(c->options["image-dir"], "/img");
}

TEST(DaemonConfigTest, ExtraOptionDefaultApplies) {
  auto c = ParseDaemonConfig("vmmd", {}, {{"image-dir", "guest images", "/default"}});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->options["image-dir"], "/default");
}

TEST(DaemonConfigTest, UnknownFlagAndUnknownFileKeyAreErrors) {
  auto a = ParseDaemonConfig("gitd", {"--no-such=1"}, {});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("--no-such"), std::string::npos);

  std::string path = std::string(getenv("TEST_TMPDIR")) + "/bad.conf";
  std::ofstream(path) << "bogus = 1\n";
  auto b = ParseDaemonConfig("gitd", {"--config=" + path}, {});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("bogus"), std::string::npos);
}

TEST(DaemonConfigTest, MissingValueAndBadLogLevelAreErrors) {
  EXPECT_FALSE(ParseDaemonConfig("gitd", {"--state-dir"}, {}).ok());
  auto c = ParseDaemonConfig("gitd", {"--log-level=loud"}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("loud"), std::string::npos);
}

TEST(DaemonConfigTest, HelpAndVersionAreReportedAsCancelled) {
  auto h = ParseDaemonConfig("proxyd", {"--help"}, {});
  ASSERT_EQ(h.status().code(), absl::StatusCode::kCancelled);
  EXPECT_NE(h.status().message().find("--listen-tcp"), std::string::npos);
  auto v = ParseDaemonConfig("proxyd", {"--version"}, {});
  ASSERT_EQ(v.status().code(), absl::StatusCode::kCancelled);
}

TEST(ListenConfigTest, PlaintextTcpIsRefused) {
  auto c = ParseDaemonConfig("secretsd", {"--listen-tcp=127.0.0.1:7443"}, {});
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("mutual TLS"), std::string::npos);
}

TEST(ListenConfigTest, PartialTlsIsRefused) {
  auto c = ParseDaemonConfig(
      "secretsd", {"--listen-tcp=127.0.0.1:7443", "--tls-cert=c", "--tls-key=k"}, {});
  EXPECT_FALSE(c.ok());
}

TEST(ListenConfigTest, TlsFilesWithoutTcpAreRefused) {
  EXPECT_FALSE(ParseDaemonConfig("secretsd", {"--tls-cert=c"}, {}).ok());
}

TEST(ListenConfigTest, FullMtlsIsAccepted) {
  auto c = ParseDaemonConfig("secretsd",
                             {"--listen-tcp=127.0.0.1:0", "--tls-cert=c", "--tls-key=k",
                              "--tls-client-ca=ca"},
                             {});
  EXPECT_TRUE(c.ok()) << c.status();
}

}  // namespace
}  // namespace airlock
