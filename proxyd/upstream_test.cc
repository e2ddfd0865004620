#include "proxyd/upstream.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "gtest/gtest.h"
#include "common/policy/rules.h"

namespace airlock::proxyd {
namespace {

Address A(const std::string& text) {
  Address a{};
  EXPECT_TRUE(airlock::policy::ParseAddress(text, &a)) << text;
  return a;
}

TEST(IsProtectedTest, PrivateLoopbackLinkLocalAndFriends) {
  for (const char* p : {"127.0.0.1", "127.255.0.9", "10.1.2.3", "172.16.0.1", "172.31.255.255",
                        "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0", "224.0.0.1",
                        "255.255.255.255", "198.18.0.5", "::1", "::", "fe80::1", "fd00::1",
                        "ff02::1", "64:ff9b::7f00:1", "2002:7f00:1::"}) {
    EXPECT_TRUE(IsProtected(A(p))) << p;
  }
  for (const char* p : {"1.1.1.1", "8.8.8.8", "172.32.0.1", "192.169.0.1", "140.82.112.3",
                        "2606:4700::1111"}) {
    EXPECT_FALSE(IsProtected(A(p))) << p;
  }
}

TEST(SyntheticNamesTest, StableAddressesThatMapBack) {
  SyntheticNames names;
  auto a = names.AddressFor("api.github.com");
  auto b = names.AddressFor("pypi.org");
  EXPECT_EQ(a, names.AddressFor("api.github.com"));
  EXPECT_NE(a, b);
  EXPECT_EQ(a[0], 198);
  EXPECT_EQ(a[1] & 0xfe, 18);
  char text[16];
  snprintf(text, sizeof(text), "%d.%d.%d.%d", b[0], b[1], b[2], b[3]);
  EXPECT_EQ(names.NameOf(A(text)), "pypi.org");
  EXPECT_TRUE(IsSynthetic(A(text)));
  // An address it never handed out, and one outside the range.
  EXPECT_EQ(names.NameOf(A("198.19.200.1")), "");
  EXPECT_EQ(names.NameOf(A("1.1.1.1")), "");
}

TEST(ResolverTest, StaticMapIsTrustedAndCheckedForSyntax) {
  auto r = Resolver::Make({"api.example.test=127.0.0.1", "V6.Example.test=::1"});
  ASSERT_TRUE(r.ok()) << r.status();
  auto api = r->Resolve("api.example.test");
  ASSERT_TRUE(api.ok());
  EXPECT_TRUE(api->from_static_map);
  EXPECT_EQ(AddressText(api->address), "127.0.0.1");
  EXPECT_EQ(AddressText(r->Resolve("v6.example.test")->address), "::1");
  auto literal = r->Resolve("10.0.0.1");
  ASSERT_TRUE(literal.ok());
  EXPECT_FALSE(literal->from_static_map);
  for (const char* bad : {"api.example.test", "=1.2.3.4", "x=not-an-ip"}) {
    auto m = Resolver::Make({bad});
    EXPECT_FALSE(m.ok()) << bad;
    EXPECT_NE(m.status().message().find("NAME=ADDRESS"), std::string::npos);
  }
  EXPECT_FALSE(r->Resolve("no-such-name.invalid").ok());
}

TEST(ResolverTest, KeepsAnAnswerForAWhileAndNeverAFailure) {
  std::map<std::string, int> asked;
  std::map<std::string, std::string> answers = {{"registry.example", "203.0.113.80"}};
  Resolver::Clock::time_point now{std::chrono::hours(1)};
  auto r = Resolver::Make(
      {"static.example=127.0.0.1"},
      [&](const std::string& host) -> absl::StatusOr<Address> {
        ++asked[host];
        auto it = answers.find(host);
        if (it == answers.end()) return absl::NotFoundError("cannot resolve " + host);
        return A(it->second);
      },
      [&] { return now; });
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(AddressText(r->Resolve("registry.example")->address), "203.0.113.80");
  EXPECT_EQ(AddressText(r->Resolve("Registry.Example")->address), "203.0.113.80");
  EXPECT_EQ(asked["registry.example"], 1);
  // The name moves: followed once the kept answer is old.
  answers["registry.example"] = "10.1.2.3";
  now += Resolver::kKeepFor - std::chrono::seconds(1);
  EXPECT_EQ(AddressText(r->Resolve("registry.example")->address), "203.0.113.80");
  now += std::chrono::seconds(1);
  auto moved = r->Resolve("registry.example");
  ASSERT_TRUE(moved.ok());
  EXPECT_EQ(AddressText(moved->address), "10.1.2.3");
  EXPECT_FALSE(moved->from_static_map);  // kept answers are checked as any
  EXPECT_EQ(asked["registry.example"], 2);
  // A failure is asked again each time; the static map and literals never.
  EXPECT_FALSE(r->Resolve("gone.example").ok());
  EXPECT_FALSE(r->Resolve("gone.example").ok());
  EXPECT_EQ(asked["gone.example"], 2);
  EXPECT_TRUE(r->Resolve("static.example")->from_static_map);
  EXPECT_TRUE(r->Resolve("192.0.2.1").ok());
  EXPECT_EQ(asked.count("static.example") + asked.count("192.0.2.1"), 0u);
}

TEST(ConnectToTest, ConnectsAndExplainsRefusal) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  listen(l, 1);
  socklen_t len = sizeof(sa);
  getsockname(l, reinterpret_cast<sockaddr*>(&sa), &len);
  uint16_t port = ntohs(sa.sin_port);
  auto fd = ConnectTo(A("127.0.0.1"), port, std::chrono::seconds(5));
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  close(l);
  auto refused = ConnectTo(A("127.0.0.1"), port, std::chrono::seconds(5));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("127.0.0.1 port"), std::string::npos)
      << refused.status();
}

// ProxyTunnel speaks CONNECT to a proxy on the other end of a socketpair.
TEST(ProxyTunnelTest, ConnectsAndLeavesTheTunnelsBytesUnread) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string answer = "HTTP/1.1 200 Connection established\r\nVia: test\r\n\r\nTUNNEL";
  ASSERT_EQ(write(sv[1], answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  ASSERT_TRUE(ProxyTunnel(sv[0], "proxy:3128", "example.com", 443, std::chrono::seconds(2)).ok());
  char req[256] = {0};
  ssize_t n = read(sv[1], req, sizeof(req) - 1);
  ASSERT_GT(n, 0);
  EXPECT_EQ(std::string(req).rfind("CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n", 0),
            0u)
      << req;
  char rest[16] = {0};
  EXPECT_EQ(read(sv[0], rest, 6), 6);
  EXPECT_EQ(std::string(rest), "TUNNEL");
  close(sv[0]);
  close(sv[1]);
}

TEST(ProxyTunnelTest, ARefusalSaysWhatTheProxyAnswered) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  std::string answer = "HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n";
  ASSERT_EQ(write(sv[1], answer.data(), answer.size()), static_cast<ssize_t>(answer.size()));
  absl::Status s = ProxyTunnel(sv[0], "proxy:3128", "::1", 8443, std::chrono::seconds(2));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(s.message(), "upstream proxy proxy:3128 answered CONNECT [::1]:8443 with 403 Forbidden");
  close(sv[1]);
  // A proxy that says nothing in time.
  absl::Status silent = ProxyTunnel(sv[0], "proxy:3128", "x", 1, std::chrono::seconds(1));
  EXPECT_FALSE(silent.ok());
  close(sv[0]);
}

}  // namespace
}  // namespace airlock::proxyd
