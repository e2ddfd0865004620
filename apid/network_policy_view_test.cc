#include "apid/network_policy_view.h"

#include "apid/wire_json.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock::apid {
namespace {

namespace pb = airlock::policy::v1;

pb::Rule R(const std::string& id, pb::Action a, const std::string& res, const std::string& sbx,
           const std::string& origin) {
  pb::Rule r;
  r.set_id(id);
  r.set_action(a);
  r.set_resource(res);
  r.set_sandbox(sbx);
  r.set_origin(origin);
  return r;
}

TEST(NetworkPolicyViewTest, EffectiveAndExact) {
  std::vector<pb::Rule> rules = {R("r1", pb::ALLOW, "**.npmjs.org", "", "preset:balanced"),
                                 R("r2", pb::ALLOW, "api.example.com:443", "box", "user"),
                                 R("r3", pb::DENY, "10.0.0.0/8", "", "user")};
  auto j = nlohmann::json::parse(ToJson(NetworkPolicies(rules)));
  EXPECT_EQ(j["effective"]["mode"], "denyAll");
  EXPECT_EQ(j["effective"]["allowNetworks"][0]["layer"], "default");
  EXPECT_EQ(j["effective"]["allowNetworks"][1]["layer"], "attached");
  EXPECT_EQ(j["effective"]["denyNetworks"][0]["network"], "10.0.0.0/8");
  EXPECT_EQ(j["effective"]["denyNetworks"][0]["layer"], "owner");
  auto nodes = j["exact"]["nodes"];
  EXPECT_EQ(j["exact"]["selectorVersion"], "destination.v1");
  EXPECT_EQ(nodes[0]["destination"]["kind"], "dnsSubtree");
  EXPECT_EQ(nodes[0]["destination"]["value"], "npmjs.org");
  EXPECT_EQ(nodes[1]["destination"]["kind"], "dns");
  EXPECT_EQ(nodes[1]["destination"]["port"], 443);
  EXPECT_EQ(nodes[2]["any"]["nodes"], nlohmann::json({0, 1}));
  EXPECT_EQ(nodes[3]["destination"]["kind"], "cidr");
  EXPECT_EQ(nodes[5]["not"], 4);
  // The root is last: allowed and not denied.
  EXPECT_EQ(nodes.back()["all"]["nodes"], nlohmann::json({2, 5}));
  // Every reference points at an earlier node.
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const char* op : {"all", "any"}) {
      if (!nodes[i].contains(op)) continue;
      for (int ref : nodes[i][op]["nodes"]) EXPECT_LT(ref, static_cast<int>(i));
    }
  }
  std::string rev = j["exact"]["revision"];
  rules.pop_back();
  EXPECT_NE(NetworkPolicies(rules).exact().revision(), rev);
  // No rules at all: both groups are the constant false (never empty).
  auto none = nlohmann::json::parse(ToJson(NetworkPolicies({})));
  EXPECT_EQ(none["exact"]["nodes"][0]["constant"], "false");
}

TEST(NetworkPolicyViewTest, PolicyLogCoalesces) {
  std::vector<airlock::proxy::v1::Decision> ds;
  for (int i = 0; i < 3; ++i) {
    airlock::proxy::v1::Decision d;
    d.set_time_ms(1000 + i * 1000);
    d.set_sandbox("box");
    d.set_host("example.com");
    d.set_port(443);
    d.set_verdict(airlock::proxy::v1::DENY);
    d.set_rule("default deny");
    d.set_via(airlock::proxy::v1::FORWARD);
    ds.push_back(d);
  }
  ds[2].set_verdict(airlock::proxy::v1::ALLOW);
  auto entries = PolicyLog(ds, 0, 0);
  ASSERT_EQ(entries.size(), 2u);
  EXPECT_EQ(entries[0].decision(), "allowed") << "newest first";
  EXPECT_EQ(entries[1].decision(), "blocked");
  EXPECT_EQ(entries[1].count(), 2);
  EXPECT_EQ(entries[1].first_seen().seconds(), 1);
  EXPECT_EQ(entries[1].last_seen().seconds(), 2);
  EXPECT_EQ(entries[1].resource(), "example.com:443");
  EXPECT_EQ(entries[1].proxy_type(), "forward");
  EXPECT_EQ(entries[1].sandbox(), "sandboxes/box");
  EXPECT_EQ(PolicyLog(ds, 2500, 0).size(), 1u);
  EXPECT_EQ(PolicyLog(ds, 0, 1500).size(), 1u);
}

}  // namespace
}  // namespace airlock::apid
