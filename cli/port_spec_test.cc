#include "cli/port_spec.h"

#include "gtest/gtest.h"

namespace airlock::cli {
namespace {

TEST(ParsePortSpecTest, Forms) {
  auto a = ParsePortSpec("80");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->host_ip(), "127.0.0.1");
  EXPECT_EQ(a->host_port(), 0u);
  EXPECT_EQ(a->sandbox_port(), 80u);
  auto b = ParsePortSpec("8080:80/tcp");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host_port(), 8080u);
  auto c = ParsePortSpec("0.0.0.0:9000:3000");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->host_ip(), "0.0.0.0");
  EXPECT_EQ(c->host_port(), 9000u);
  EXPECT_EQ(c->sandbox_port(), 3000u);
  auto d = ParsePortSpec("127.0.0.2::3000");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->host_port(), 0u);
  auto e = ParsePortSpec("[::1]:8443:443");
  ASSERT_TRUE(e.ok());
  EXPECT_EQ(e->host_ip(), "::1");
  EXPECT_EQ(FormatPortMapping(*e), "[::1]:8443->443/tcp");
  EXPECT_EQ(FormatPortMapping(*b), "127.0.0.1:8080->80/tcp");
}

TEST(ParsePortSpecTest, BadSpecsSayWhy) {
  for (const char* s : {"", "http", "0", "70000", "80/udp", "1:2:3:4", "x:80", "[::1]80",
                        "99999:80"}) {
    auto r = ParsePortSpec(s);
    EXPECT_FALSE(r.ok()) << s;
    EXPECT_NE(r.status().message().find("invalid port"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace airlock::cli
