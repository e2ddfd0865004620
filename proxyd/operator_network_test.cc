#include "proxyd/operator_network.h"

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

Address A(const char* text) {
  Address a{};
  EXPECT_TRUE(policy::ParseAddress(text, &a)) << text;
  return a;
}

TEST(OperatorNetworkTest, NothingIsTrustedOrTerminatedByDefault) {
  OperatorNetwork n;
  EXPECT_FALSE(n.TrustedForNames(A("203.0.113.80")));
  EXPECT_FALSE(n.TerminatesTls("registry.npmjs.org"));
}

TEST(OperatorNetworkTest, TrustedRangesAndTerminatedHosts) {
  auto n = OperatorNetwork::Make({"203.0.113.0/24", "fd00::1"},
                                 {"registry.npmjs.org", "**.debian.org"});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_TRUE(n->TrustedForNames(A("203.0.113.80")));
  EXPECT_TRUE(n->TrustedForNames(A("fd00::1")));
  EXPECT_FALSE(n->TrustedForNames(A("203.0.114.1")));
  EXPECT_FALSE(n->TrustedForNames(A("127.0.0.1")));
  EXPECT_TRUE(n->TerminatesTls("registry.npmjs.org"));
  EXPECT_TRUE(n->TerminatesTls("deb.debian.org"));
  EXPECT_FALSE(n->TerminatesTls("debian.org"));
  EXPECT_FALSE(n->TerminatesTls("api.github.com"));
  // Never for an address: only names are terminated.
  auto all = OperatorNetwork::Make({}, {"**"});
  EXPECT_TRUE(all->TerminatesTls("anything.example"));
  EXPECT_FALSE(all->TerminatesTls("203.0.113.80"));
}

TEST(OperatorNetworkTest, BadEntriesAreRefusedByName) {
  auto r = OperatorNetwork::Make({"registry.npmjs.org"}, {});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("trusted-ranges: \"registry.npmjs.org\""),
            std::string::npos);
  auto h = OperatorNetwork::Make({}, {"10.0.0.0/8"});
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find("terminate-tls: \"10.0.0.0/8\""), std::string::npos);
  EXPECT_FALSE(OperatorNetwork::Make({"10.0.0.0/8:443"}, {}).ok());
}

}  // namespace
}  // namespace airlock::proxyd

namespace airlock::proxyd {
namespace {

TEST(OperatorNetworkTest, UpstreamProxyAndNoProxy) {
  auto n = OperatorNetwork::Make({}, {}, "http://proxy.corp:3128",
                                 {"**.corp.example", "10.0.0.0/8", "localhost"});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->proxy(), "proxy.corp:3128");
  EXPECT_EQ(n->proxy_host(), "proxy.corp");
  EXPECT_EQ(n->proxy_port(), 3128);
  EXPECT_TRUE(n->ProxyFor("registry.npmjs.org"));
  EXPECT_FALSE(n->ProxyFor("git.corp.example"));
  EXPECT_FALSE(n->ProxyFor("10.1.2.3"));
  EXPECT_TRUE(n->ProxyFor("203.0.113.5"));
  EXPECT_FALSE(n->ProxyFor("localhost"));
  EXPECT_FALSE(OperatorNetwork().ProxyFor("registry.npmjs.org"));
  EXPECT_EQ(OperatorNetwork::Make({}, {}, "[::1]:8080")->proxy(), "[::1]:8080");
  for (const char* bad : {"proxy.corp", "proxy:0", "proxy:99999", "http://u:p@proxy:1",
                          "proxy:1/path"}) {
    auto b = OperatorNetwork::Make({}, {}, bad);
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("upstream-proxy:"), std::string::npos);
  }
  EXPECT_FALSE(OperatorNetwork::Make({}, {}, "p:1", {"x.com:443"}).ok());
}

}  // namespace
}  // namespace airlock::proxyd
