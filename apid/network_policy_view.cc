#include "apid/network_policy_view.h"

#include <arpa/inet.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "apid/signer.h"

namespace airlock::apid {

namespace pb = airlock::policy::v1;
namespace wire = airlock::api::wire::v1;

std::string LayerOf(const pb::Rule& r) {
  if (absl::StartsWith(r.origin(), "kit:")) return "kit";
  if (absl::StartsWith(r.origin(), "preset:")) return "default";
  return r.sandbox().empty() ? "owner" : "attached";
}

namespace {

bool IsIp(const std::string& s) {
  unsigned char buf[16];
  return inet_pton(AF_INET, s.c_str(), buf) == 1 || inet_pton(AF_INET6, s.c_str(), buf) == 1;
}

// Destination turns a rule resource ("**.example.com", "host:443",
// "10.0.0.0/8") into the exact view's leaf.
wire::ExactDestination Destination(const std::string& resource) {
  wire::ExactDestination d;
  std::string host = resource;
  size_t colon = resource.rfind(':');
  int port = 0;
  if (colon != std::string::npos && resource.find(':') == colon &&
      absl::SimpleAtoi(resource.substr(colon + 1), &port)) {
    host = resource.substr(0, colon);
    d.set_port(port);
  }
  if (host.find('/') != std::string::npos) {
    d.set_kind("cidr");
  } else if (IsIp(host)) {
    d.set_kind("ip");
  } else if (host == "**") {
    d.set_kind("dnsSubtree");
    host = ".";
  } else if (absl::StartsWith(host, "**.")) {
    d.set_kind("dnsSubtree");
    host = host.substr(3);
  } else if (absl::StartsWith(host, "*.")) {
    d.set_kind("dnsLabel");
    host = host.substr(2);
  } else {
    d.set_kind("dns");
  }
  d.set_value(host);
  return d;
}

// Group adds any(leaves) (or the constant false when there are none) and
// returns its index.
int Group(wire::ExactNetworkPolicy* exact, const std::vector<const pb::Rule*>& rules) {
  std::vector<int> leaves;
  for (const pb::Rule* r : rules) {
    wire::ExactPolicyNode* n = exact->add_nodes();
    *n->mutable_destination() = Destination(r->resource());
    n->mutable_source()->set_origin(LayerOf(*r) == "default" ? "default" : LayerOf(*r));
    n->mutable_source()->set_id(r->id());
    leaves.push_back(exact->nodes_size() - 1);
  }
  wire::ExactPolicyNode* g = exact->add_nodes();
  if (leaves.empty()) {
    g->set_constant("false");
    g->mutable_source()->set_origin("default");
    g->mutable_source()->set_id("none");
  } else {
    for (int i : leaves) g->mutable_any()->add_nodes(i);
  }
  return exact->nodes_size() - 1;
}

}  // namespace

wire::GetNetworkPoliciesResponse NetworkPolicies(const std::vector<pb::Rule>& rules) {
  wire::GetNetworkPoliciesResponse out;
  wire::EffectiveNetworkPolicy* eff = out.mutable_effective();
  eff->set_mode("denyAll");
  std::vector<const pb::Rule*> allow, deny;
  std::string fingerprint;
  for (const auto& r : rules) {
    wire::AttributedRule* a =
        r.action() == pb::DENY ? eff->add_deny_networks() : eff->add_allow_networks();
    a->set_network(r.resource());
    a->set_layer(LayerOf(r));
    (r.action() == pb::DENY ? deny : allow).push_back(&r);
    absl::StrAppend(&fingerprint, r.id(), "|", r.action(), "|", r.resource(), "|", r.sandbox(),
                    "\n");
  }
  wire::ExactNetworkPolicy* exact = out.mutable_exact();
  exact->set_selector_version("destination.v1");
  exact->set_revision(Sha256Hex(fingerprint).substr(0, 16));
  int any_allow = Group(exact, allow);
  int any_deny = Group(exact, deny);
  wire::ExactPolicyNode* not_deny = exact->add_nodes();
  not_deny->set_not_node(any_deny);
  wire::ExactPolicyNode* root = exact->add_nodes();
  root->mutable_all()->add_nodes(any_allow);
  root->mutable_all()->add_nodes(exact->nodes_size() - 2);
  return out;
}

std::vector<wire::PolicyLogEntry> PolicyLog(const std::vector<airlock::proxy::v1::Decision>& ds,
                                            int64_t since_ms, int64_t until_ms) {
  using Key = std::tuple<std::string, std::string, int, std::string, std::string>;
  struct Agg {
    wire::PolicyLogEntry entry;
    int64_t first = 0, last = 0;
  };
  std::map<Key, Agg> by_key;
  for (const auto& d : ds) {
    if (since_ms > 0 && d.time_ms() < since_ms) continue;
    if (until_ms > 0 && d.time_ms() > until_ms) continue;
    std::string resource = absl::StrCat(d.host(), ":", d.port());
    bool allowed = d.verdict() == airlock::proxy::v1::ALLOW;
    Key k{d.sandbox(), resource, allowed, d.rule(), airlock::proxy::v1::Path_Name(d.via())};
    Agg& a = by_key[k];
    if (a.entry.count() == 0) {
      a.entry.set_resource(resource);
      a.entry.set_decision(allowed ? "allowed" : "blocked");
      a.entry.set_proxy_type(absl::AsciiStrToLower(airlock::proxy::v1::Path_Name(d.via())));
      a.entry.set_rule(d.rule());
      a.entry.set_sandbox(absl::StrCat("sandboxes/", d.sandbox()));
      a.entry.set_domain("network");
      a.first = d.time_ms();
    }
    a.entry.set_reason(d.reason());
    a.entry.set_count(a.entry.count() + 1);
    a.last = d.time_ms();
  }
  std::vector<Agg> all;
  for (auto& [k, a] : by_key) all.push_back(std::move(a));
  std::stable_sort(all.begin(), all.end(), [](const Agg& x, const Agg& y) { return x.last > y.last; });
  std::vector<wire::PolicyLogEntry> out;
  for (auto& a : all) {
    a.entry.mutable_first_seen()->set_seconds(a.first / 1000);
    a.entry.mutable_first_seen()->set_nanos(static_cast<int32_t>(a.first % 1000) * 1000000);
    a.entry.mutable_last_seen()->set_seconds(a.last / 1000);
    a.entry.mutable_last_seen()->set_nanos(static_cast<int32_t>(a.last % 1000) * 1000000);
    out.push_back(std::move(a.entry));
  }
  return out;
}

}  // namespace airlock::apid
