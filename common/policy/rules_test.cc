#include "common/policy/rules.h"

#include "gtest/gtest.h"

namespace airlock::policy {
namespace {

Rule R(Action a, const std::string& res, const std::string& methods = "",
       std::vector<std::string> paths = {}, const std::string& sandbox = "") {
  Rule r;
  r.action = a;
  auto parsed = ParseResource(res);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  r.resource = *parsed;
  r.methods = *ParseMethods(methods);
  r.paths = std::move(paths);
  r.sandbox = sandbox;
  return r;
}

Request Host(const std::string& host, uint16_t port = 443) {
  Request q;
  q.host = host;
  q.port = port;
  return q;
}

Request Http(const std::string& host, const std::string& method, const std::string& path) {
  Request q = Host(host);
  q.http = true;
  q.method = method;
  q.path = path;
  return q;
}

Request Ip(const std::string& ip, uint16_t port = 80) {
  Request q;
  q.has_address = ParseAddress(ip, &q.address);
  q.port = port;
  return q;
}

constexpr Action kA = Action::kAllow;
constexpr Action kD = Action::kDeny;

TEST(ParseResourceTest, Forms) {
  EXPECT_EQ(ParseResource("API.GitHub.com")->domain, "api.github.com");
  EXPECT_EQ(ParseResource("*.example.com")->kind, Resource::Kind::kOneLabel);
  EXPECT_EQ(ParseResource("**.example.com")->kind, Resource::Kind::kAnyDepth);
  EXPECT_EQ(ParseResource("**")->kind, Resource::Kind::kAny);
  EXPECT_EQ(ParseResource("example.com:8443")->port, 8443);
  EXPECT_EQ(ParseResource("10.0.0.0/8")->prefix, 104);
  EXPECT_EQ(ParseResource("::1")->kind, Resource::Kind::kAddress);
  EXPECT_EQ(ParseResource("[::1]:22")->port, 22);
  EXPECT_EQ(ParseResource("fd00::/8")->prefix, 8);
}

TEST(ParseResourceTest, BadResourcesSayWhatIsWrong) {
  struct Case {
    const char* text;
    const char* why;
  } cases[] = {{"", "empty"},
               {"a.*.com", "first label"},
               {"exa mple.com", "valid domain"},
               {"-x.com", "valid domain"},
               {"x.com:0", "1..65535"},
               {"x.com:http", "1..65535"},
               {"10.0.0.0/33", "0..32"},
               {"10.0.0.0/x", "ADDRESS/PREFIX"},
               {"[::1", "']'"}};
  for (const auto& c : cases) {
    auto r = ParseResource(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.why), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("invalid resource"), std::string::npos);
  }
}

TEST(MethodsAndPathsTest, Parse) {
  EXPECT_EQ(*ParseMethods("get, POST"), (std::vector<std::string>{"GET", "POST"}));
  EXPECT_TRUE(ParseMethods("ANY")->empty());
  EXPECT_FALSE(ParseMethods("GET;rm").ok());
  EXPECT_TRUE(ValidatePathGlob("/repos/**").ok());
  EXPECT_FALSE(ValidatePathGlob("repos").ok());
  EXPECT_FALSE(ValidatePathGlob("/a?b=1").ok());
  EXPECT_FALSE(ValidatePathGlob("/a#x").ok());
  EXPECT_FALSE(ValidatePathGlob("/a/../b").ok());
}

TEST(PathMatchesTest, Globs) {
  EXPECT_TRUE(PathMatches("/repos/**", "/repos/a/b/c"));
  EXPECT_TRUE(PathMatches("/repos/**", "/repos"));
  EXPECT_FALSE(PathMatches("/repos/**", "/reposx/a"));
  EXPECT_TRUE(PathMatches("/repos/*/issues", "/repos/x/issues"));
  EXPECT_FALSE(PathMatches("/repos/*/issues", "/repos/x/y/issues"));
  EXPECT_TRUE(PathMatches("/v1/messages", "/v1/messages"));
  EXPECT_FALSE(PathMatches("/v1/messages", "/v1/messages/x"));
  EXPECT_TRUE(PathMatches("/files/*.txt", "/files/a.txt"));
  EXPECT_TRUE(PathMatches("/files/*.txt", "/files/.txt"));
  EXPECT_FALSE(PathMatches("/files/*.txt", "/files/a.txt.gz"));
  EXPECT_TRUE(PathMatches("/a/*b*c*/d", "/a/xbycbzc/d"));
  EXPECT_FALSE(PathMatches("/a/*b*c*/d", "/a/xcyb/d"));
  EXPECT_TRUE(PathMatches("/**/x/**/y", "/x/y"));
  EXPECT_TRUE(PathMatches("/**/x/**/y", "/a/x/b/c/x/y"));
  EXPECT_FALSE(PathMatches("/**/x/**/y", "/a/x/b/c/y/z"));
  EXPECT_TRUE(PathMatches("/**", "/"));
  EXPECT_TRUE(PathMatches("/*", "/"));
}

// Found by //fuzz:policy_rule: each star tried every split, so many stars
// against a long path took exponential time; the guest chooses the path.
TEST(PathMatchesTest, ManyStarsStayFast) {
  std::string stars(60, '*');
  std::string segment(4000, 'a');
  EXPECT_FALSE(PathMatches("/v2/" + stars + "b" + stars, "/v2/" + segment));
  std::string deep = "/**";
  std::string path;
  for (int i = 0; i < 30; ++i) deep += "/a/**";
  for (int i = 0; i < 2000; ++i) path += "/a";
  EXPECT_FALSE(PathMatches(deep + "/b", path));
  EXPECT_TRUE(PathMatches(deep, path));
}

TEST(DecideTest, DefaultDenyAndExactDomain) {
  RuleSet rs({R(kA, "api.github.com")});
  EXPECT_EQ(rs.Decide(Host("api.github.com")).action, kA);
  EXPECT_EQ(rs.Decide(Host("github.com")).action, kD);
  EXPECT_EQ(rs.Decide(Host("github.com")).rule, nullptr);
  EXPECT_NE(rs.Decide(Host("evil.com")).reason.find("default deny"), std::string::npos);
}

TEST(DecideTest, OneLabelAndAnyDepthWildcards) {
  RuleSet rs({R(kA, "*.one.com"), R(kA, "**.deep.com")});
  EXPECT_EQ(rs.Decide(Host("a.one.com")).action, kA);
  EXPECT_EQ(rs.Decide(Host("a.b.one.com")).action, kD);
  EXPECT_EQ(rs.Decide(Host("one.com")).action, kD);
  EXPECT_EQ(rs.Decide(Host("a.deep.com")).action, kA);
  EXPECT_EQ(rs.Decide(Host("a.b.c.deep.com")).action, kA);
  EXPECT_EQ(rs.Decide(Host("deep.com")).action, kD);
}

TEST(DecideTest, PortsAndAddresses) {
  RuleSet rs({R(kA, "db.internal:5432"), R(kA, "10.1.0.0/16"), R(kA, "[::1]:8080")});
  EXPECT_EQ(rs.Decide(Host("db.internal", 5432)).action, kA);
  EXPECT_EQ(rs.Decide(Host("db.internal", 22)).action, kD);
  EXPECT_EQ(rs.Decide(Ip("10.1.2.3")).action, kA);
  EXPECT_EQ(rs.Decide(Ip("10.2.0.1")).action, kD);
  EXPECT_EQ(rs.Decide(Ip("::1", 8080)).action, kA);
  EXPECT_EQ(rs.Decide(Ip("::1", 80)).action, kD);
}

TEST(DecideTest, DenyBeatsAllowWhateverTheOrder) {
  RuleSet a({R(kA, "**"), R(kD, "**.evil.com")});
  RuleSet b({R(kD, "**.evil.com"), R(kA, "**")});
  for (const RuleSet* rs : {&a, &b}) {
    Decision d = rs->Decide(Host("x.evil.com"));
    EXPECT_EQ(d.action, kD);
    EXPECT_NE(d.reason.find("deny beats allow"), std::string::npos);
    EXPECT_EQ(rs->Decide(Host("good.com")).action, kA);
  }
}

TEST(DecideTest, MethodAndPathRules) {
  RuleSet rs({R(kA, "api.github.com", "GET,POST", {"/repos/**"}),
              R(kD, "api.github.com", "DELETE", {"/repos/**"})});
  EXPECT_EQ(rs.Decide(Http("api.github.com", "POST", "/repos/a/b/issues")).action, kA);
  EXPECT_EQ(rs.Decide(Http("api.github.com", "PUT", "/repos/a")).action, kD);
  EXPECT_EQ(rs.Decide(Http("api.github.com", "GET", "/user")).action, kD);
  EXPECT_EQ(rs.Decide(Http("api.github.com", "DELETE", "/repos/a/b")).action, kD);
  // Granted only by HTTP rules: raw TCP or an uninspected tunnel is refused.
  Decision raw = rs.Decide(Host("api.github.com"));
  EXPECT_EQ(raw.action, kD);
  EXPECT_NE(raw.reason.find("only for HTTP"), std::string::npos) << raw.reason;
}

TEST(DecideTest, HttpDenyBeatsHostAllow) {
  RuleSet rs({R(kA, "api.github.com"), R(kD, "api.github.com", "DELETE")});
  EXPECT_EQ(rs.Decide(Http("api.github.com", "GET", "/x")).action, kA);
  EXPECT_EQ(rs.Decide(Http("api.github.com", "DELETE", "/x")).action, kD);
}

TEST(DecideTest, SandboxScope) {
  RuleSet rs({R(kA, "pypi.org", "", {}, "box1"), R(kD, "**.ads.com", "", {}, "")});
  Request q = Host("pypi.org");
  q.sandbox = "box1";
  EXPECT_EQ(rs.Decide(q).action, kA);
  q.sandbox = "box2";
  EXPECT_EQ(rs.Decide(q).action, kD);
  Request ads = Host("x.ads.com");
  ads.sandbox = "box1";
  EXPECT_EQ(rs.Decide(ads).action, kD);
}

TEST(DecideTest, InspectWhenHttpRulesApplyToAHost) {
  // Allowed outright but with an HTTP-level deny: inspect, allow the rest.
  RuleSet both({R(kA, "api.github.com"), R(kD, "api.github.com", "DELETE")});
  Decision d = both.Decide(Host("api.github.com"));
  EXPECT_EQ(d.action, kA);
  EXPECT_TRUE(d.inspect);
  // Granted only for HTTP: refused as raw traffic, but inspectable.
  RuleSet http_only({R(kA, "api.github.com", "GET")});
  d = http_only.Decide(Host("api.github.com"));
  EXPECT_EQ(d.action, kD);
  EXPECT_TRUE(d.inspect);
  // No HTTP rule for the host: nothing to inspect.
  RuleSet plain({R(kA, "api.github.com"), R(kD, "other.com", "DELETE")});
  EXPECT_FALSE(plain.Decide(Host("api.github.com")).inspect);
  // A host-wide deny wins outright: no inspection can allow anything.
  RuleSet denied({R(kA, "api.github.com", "GET"), R(kD, "api.github.com")});
  d = denied.Decide(Host("api.github.com"));
  EXPECT_EQ(d.action, kD);
  EXPECT_FALSE(d.inspect);
  // An HTTP request is decided for itself; inspect is only for connections.
  EXPECT_FALSE(http_only.Decide(Http("api.github.com", "GET", "/")).inspect);
}

TEST(DecideTest, PathRulesSaysWhetherAPathGlobAppliesToTheHost) {
  RuleSet rs({R(kA, "registry.npmjs.org"), R(kD, "api.github.com", "DELETE", {"/repos/**"}),
              R(kA, "api.github.com"), R(kD, "**", "DELETE")});
  // A method-only rule does not care about the path.
  EXPECT_FALSE(rs.Decide(Http("registry.npmjs.org", "GET", "/@a%2Fb")).path_rules);
  // A path glob on the host counts whether or not it matched.
  EXPECT_TRUE(rs.Decide(Http("api.github.com", "GET", "/user")).path_rules);
  EXPECT_TRUE(rs.Decide(Http("api.github.com", "DELETE", "/repos/o/r")).path_rules);
  EXPECT_FALSE(rs.Decide(Http("example.com", "GET", "/")).path_rules);
}

TEST(DecideTest, PortZeroMeansAnyPort) {
  // A DNS question has no port yet: a rule on any port of the host counts.
  RuleSet rs({R(kA, "db.example.com:5432")});
  EXPECT_EQ(rs.Decide(Host("db.example.com", 0)).action, kA);
  EXPECT_EQ(rs.Decide(Host("db.example.com", 443)).action, kD);
}

}  // namespace
}  // namespace airlock::policy
