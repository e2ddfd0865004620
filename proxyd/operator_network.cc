#include "proxyd/operator_network.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock::proxyd {

OperatorNetwork::OperatorNetwork()
    : ranges_(std::make_shared<policyd::RuleSet>(std::vector<policyd::Rule>{})),
      hosts_(std::make_shared<policyd::RuleSet>(std::vector<policyd::Rule>{})),
      no_proxy_(std::make_shared<policyd::RuleSet>(std::vector<policyd::Rule>{})) {}

absl::StatusOr<OperatorNetwork> OperatorNetwork::Make(
    const std::vector<std::string>& trusted_ranges, const std::vector<std::string>& terminate_tls,
    const std::string& upstream_proxy, const std::vector<std::string>& no_proxy) {
  OperatorNetwork n;
  if (!upstream_proxy.empty()) {
    absl::string_view p = upstream_proxy;
    absl::ConsumePrefix(&p, "http://");
    absl::ConsumeSuffix(&p, "/");
    size_t colon = p.rfind(':');
    uint32_t port = 0;
    if (colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(p.substr(colon + 1), &port) || port == 0 || port > 65535 ||
        p.find('/') != absl::string_view::npos || p.find('@') != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "upstream-proxy: \"", upstream_proxy, "\" is not host:port (or http://host:port)"));
    }
    n.proxy_host_ = std::string(p.substr(0, colon));
    if (n.proxy_host_.size() > 2 && n.proxy_host_.front() == '[' && n.proxy_host_.back() == ']') {
      n.proxy_host_ = n.proxy_host_.substr(1, n.proxy_host_.size() - 2);
    }
    n.proxy_port_ = static_cast<uint16_t>(port);
  }
  std::vector<policyd::Rule> direct;
  for (const auto& text : no_proxy) {
    auto r = policyd::ParseResource(text);
    if (!r.ok() || r->port != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "no-proxy: \"", text, "\" is not a host pattern or address range"));
    }
    policyd::Rule rule;
    rule.action = policyd::Action::kAllow;
    rule.resource = *r;
    direct.push_back(rule);
  }
  n.no_proxy_ = std::make_shared<policyd::RuleSet>(std::move(direct));
  std::vector<policyd::Rule> ranges, hosts;
  for (const auto& text : trusted_ranges) {
    auto r = policyd::ParseResource(text);
    if (!r.ok() || r->kind != policyd::Resource::Kind::kAddress || r->port != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "trusted-ranges: \"", text, "\" is not an address or CIDR range (e.g. 203.0.113.0/24)"));
    }
    policyd::Rule rule;
    rule.action = policyd::Action::kAllow;
    rule.resource = *r;
    ranges.push_back(rule);
    n.ranges_text_.push_back(r->text);
  }
  for (const auto& text : terminate_tls) {
    auto r = policyd::ParseResource(text);
    if (!r.ok() || r->kind == policyd::Resource::Kind::kAddress || r->port != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "terminate-tls: \"", text, "\" is not a host pattern (a name, *.name, **.name or **)"));
    }
    policyd::Rule rule;
    rule.action = policyd::Action::kAllow;
    rule.resource = *r;
    hosts.push_back(rule);
    n.hosts_text_.push_back(r->text);
  }
  n.ranges_ = std::make_shared<policyd::RuleSet>(std::move(ranges));
  n.hosts_ = std::make_shared<policyd::RuleSet>(std::move(hosts));
  return n;
}

std::string OperatorNetwork::proxy() const {
  if (proxy_host_.empty()) return "";
  return absl::StrContains(proxy_host_, ':') ? absl::StrCat("[", proxy_host_, "]:", proxy_port_)
                                             : absl::StrCat(proxy_host_, ":", proxy_port_);
}

bool OperatorNetwork::ProxyFor(const std::string& host) const {
  if (proxy_host_.empty()) return false;
  policyd::Request req;
  Address literal{};
  if (policyd::ParseAddress(host, &literal)) {
    req.has_address = true;
    req.address = literal;
  } else {
    req.host = host;
  }
  return no_proxy_->Decide(req).action != policyd::Action::kAllow;
}

bool OperatorNetwork::TrustedForNames(const Address& addr) const {
  policyd::Request req;
  req.has_address = true;
  req.address = addr;
  return ranges_->Decide(req).action == policyd::Action::kAllow;
}

bool OperatorNetwork::TerminatesTls(const std::string& host) const {
  Address literal{};
  if (host.empty() || policyd::ParseAddress(host, &literal)) return false;
  policyd::Request req;
  req.host = host;
  return hosts_->Decide(req).action == policyd::Action::kAllow;
}

}  // namespace airlock::proxyd
