#include "proxyd/operator_network.h"

#include "absl/strings/str_cat.h"

namespace airlock::proxyd {

OperatorNetwork::OperatorNetwork()
    : ranges_(std::make_shared<policyd::RuleSet>(std::vector<policyd::Rule>{})),
      hosts_(std::make_shared<policyd::RuleSet>(std::vector<policyd::Rule>{})) {}

absl::StatusOr<OperatorNetwork> OperatorNetwork::Make(
    const std::vector<std::string>& trusted_ranges, const std::vector<std::string>& terminate_tls) {
  OperatorNetwork n;
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
