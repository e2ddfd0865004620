// `airlock daemon doctor` against real daemons (no VM): a real HTTPS
// upstream on loopback with a test CA stands in for an allowed host, and
// proxyd.conf carries the operator settings the doctor reports.
#include <signal.h>

#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

TEST(DoctorIntegrationTest, ReportsTheNetworkAndEachHost) {
  testing::ShortTempDir dir;
  const std::string d = dir.path();
  auto env = testing::AirlockEnv(d);
  ASSERT_EQ(testing::MakeTestCerts(d, {"up.example.test"}).exit_code, 0);
  auto up = testing::StartFixtureServer(
      d, "https",
      {"python3", BinaryPath("tests/fixtures/upstream.py"), "--tls", d + "/up.pem", d + "/up.key"});
  ASSERT_GT(up.port, 0);
  ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
  std::ofstream(d + "/state/proxyd.conf")
      << "resolve = up.example.test=127.0.0.1\nupstream-ca = " << d << "/ca.pem\n"
      << "trusted-ranges = 203.0.113.0/24\nterminate-tls = up.example.test\n";
  std::string port = std::to_string(up.port);
  auto r = testing::RunAirlock(env, {"daemon", "doctor", "--json", "--port", port, "--host",
                                     "up.example.test", "--host", "localhost", "--host",
                                     "no-such-host.invalid"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["trusted_ranges"], nlohmann::json::array({"203.0.113.0/24"}));
  EXPECT_EQ(j["terminate_tls"], nlohmann::json::array({"up.example.test"}));
  EXPECT_FALSE(j["resolvers"].empty());
  ASSERT_EQ(j["hosts"].size(), 3u);
  const auto& ok = j["hosts"][0];
  EXPECT_TRUE(ok["reachable"]) << ok;
  EXPECT_TRUE(ok["tls_terminated"]);
  EXPECT_EQ(ok["address"], "127.0.0.1");
  // localhost comes from the host resolver: loopback is protected and no
  // trusted range covers it.
  const auto& lo = j["hosts"][1];
  EXPECT_FALSE(lo["reachable"]);
  EXPECT_TRUE(lo["protected_address"]);
  EXPECT_FALSE(lo["trusted_range"]);
  EXPECT_NE(lo["detail"].get<std::string>().find("trusted-ranges"), std::string::npos) << lo;
  const auto& none = j["hosts"][2];
  EXPECT_FALSE(none["reachable"]);
  EXPECT_NE(none["detail"].get<std::string>().find("does not resolve"), std::string::npos);
  // Only the reachable host: exit 0, and a table for people.
  auto one = testing::RunAirlock(env, {"daemon", "doctor", "--port", port, "--host",
                                       "up.example.test"});
  EXPECT_EQ(one.exit_code, 0) << one.err;
  EXPECT_NE(one.out.find("terminate TLS:   up.example.test"), std::string::npos) << one.out;
  EXPECT_NE(one.out.find("up.example.test   127.0.0.1   yes"), std::string::npos) << one.out;
  testing::RunAirlock(env, {"daemon", "stop"});
  kill(up.pid, SIGTERM);
}

// With an upstream proxy, proxyd reaches hosts through it (CONNECT), and
// the no-proxy entries directly.
TEST(DoctorIntegrationTest, GoesThroughTheUpstreamProxy) {
  testing::ShortTempDir dir;
  const std::string d = dir.path();
  auto env = testing::AirlockEnv(d);
  ASSERT_EQ(
      testing::MakeTestCerts(d, {"up.example.test", "hidden.example.test", "direct.example.test"})
          .exit_code,
      0);
  auto up = testing::StartFixtureServer(
      d, "https",
      {"python3", BinaryPath("tests/fixtures/upstream.py"), "--tls", d + "/up.pem", d + "/up.key"});
  ASSERT_GT(up.port, 0);
  auto proxy = testing::StartFixtureServer(
      d, "proxy",
      {"python3", BinaryPath("tests/fixtures/connect_proxy.py"), "--log", d + "/proxy.targets",
       "--map", "up.example.test=127.0.0.1", "hidden.example.test=127.0.0.1", "--deny",
       "denied.example.test"});
  ASSERT_GT(proxy.port, 0);
  ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
  // hidden.example.test resolves nowhere on this host: only the proxy
  // knows it.
  std::ofstream(d + "/state/proxyd.conf")
      << "resolve = up.example.test=127.0.0.1,direct.example.test=127.0.0.1\nupstream-ca = "
      << d << "/ca.pem\nupstream-proxy = 127.0.0.1:" << proxy.port
      << "\nno-proxy = direct.example.test\n";
  std::string port = std::to_string(up.port);
  auto r = testing::RunAirlock(env, {"daemon", "doctor", "--json", "--port", port, "--host",
                                     "up.example.test", "--host", "hidden.example.test", "--host",
                                     "denied.example.test"});
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out << r.err;
  EXPECT_EQ(j["upstream_proxy"], absl::StrCat("127.0.0.1:", proxy.port, " (CONNECT)"));
  EXPECT_TRUE(j["hosts"][0]["reachable"]) << j["hosts"][0];
  EXPECT_TRUE(j["hosts"][1]["reachable"]) << j["hosts"][1];
  EXPECT_NE(j["hosts"][1]["detail"].get<std::string>().find("through the upstream proxy"),
            std::string::npos);
  EXPECT_FALSE(j["hosts"][2]["reachable"]);
  EXPECT_NE(j["hosts"][2]["detail"].get<std::string>().find(
                absl::StrCat("answered CONNECT denied.example.test:", port, " with 403 Forbidden")),
            std::string::npos)
      << j["hosts"][2];
  std::string targets = ReadFileToString(d + "/proxy.targets");
  EXPECT_NE(targets.find("up.example.test:" + port), std::string::npos) << targets;
  EXPECT_NE(targets.find("hidden.example.test:" + port), std::string::npos) << targets;
  // A no-proxy host is reached directly: the proxy never sees it.
  auto direct = testing::RunAirlock(env, {"daemon", "doctor", "--json", "--port", port, "--host",
                                          "direct.example.test"});
  EXPECT_EQ(direct.exit_code, 0) << direct.out << direct.err;
  EXPECT_EQ(ReadFileToString(d + "/proxy.targets").find("direct.example.test"),
            std::string::npos);
  testing::RunAirlock(env, {"daemon", "stop"});
  kill(up.pid, SIGTERM);
  kill(proxy.pid, SIGTERM);
}

}  // namespace
}  // namespace airlock
