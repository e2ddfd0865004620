#include "proxyd/operator_network.h"

#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock::proxyd {

namespace {

// MatchSet parses an option's entries as rule resources without a port
// that `accept` takes, into a set of allow rules to match against; the
// canonical texts go to `texts` when given. The error names the option
// and the entry.
absl::StatusOr<std::shared_ptr<const policy::RuleSet>> MatchSet(
    const std::vector<std::string>& entries, const char* option, const char* what,
    const std::function<bool(const policy::Resource&)>& accept,
    std::vector<std::string>* texts) {
  std::vector<policy::Rule> rules;
  for (const auto& text : entries) {
    auto r = policy::ParseResource(text);
    if (!r.ok() || r->port != 0 || !accept(*r)) {
      return absl::InvalidArgumentError(
          absl::StrCat(option, ": \"", text, "\" is not ", what));
    }
    policy::Rule rule;
    rule.action = policy::Action::kAllow;
    rule.resource = *r;
    rules.push_back(rule);
    if (texts != nullptr) texts->push_back(r->text);
  }
  return std::make_shared<const policy::RuleSet>(std::move(rules));
}

}  // namespace

OperatorNetwork::OperatorNetwork()
    : ranges_(std::make_shared<policy::RuleSet>(std::vector<policy::Rule>{})),
      hosts_(std::make_shared<policy::RuleSet>(std::vector<policy::Rule>{})),
      no_proxy_(std::make_shared<policy::RuleSet>(std::vector<policy::Rule>{})) {}

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
  auto no_proxy_set = MatchSet(no_proxy, "no-proxy", "a host pattern or address range",
                               [](const policy::Resource&) { return true; }, nullptr);
  if (!no_proxy_set.ok()) return no_proxy_set.status();
  n.no_proxy_ = *no_proxy_set;
  auto ranges = MatchSet(trusted_ranges, "trusted-ranges",
                         "an address or CIDR range (e.g. 203.0.113.0/24)",
                         [](const policy::Resource& r) {
                           return r.kind == policy::Resource::Kind::kAddress;
                         },
                         &n.ranges_text_);
  if (!ranges.ok()) return ranges.status();
  n.ranges_ = *ranges;
  auto hosts = MatchSet(terminate_tls, "terminate-tls",
                        "a host pattern (a name, *.name, **.name or **)",
                        [](const policy::Resource& r) {
                          return r.kind != policy::Resource::Kind::kAddress;
                        },
                        &n.hosts_text_);
  if (!hosts.ok()) return hosts.status();
  n.hosts_ = *hosts;
  return n;
}

std::string OperatorNetwork::proxy() const {
  if (proxy_host_.empty()) return "";
  return absl::StrContains(proxy_host_, ':') ? absl::StrCat("[", proxy_host_, "]:", proxy_port_)
                                             : absl::StrCat(proxy_host_, ":", proxy_port_);
}

bool OperatorNetwork::ProxyFor(const std::string& host) const {
  if (proxy_host_.empty()) return false;
  policy::Request req;
  Address literal{};
  if (policy::ParseAddress(host, &literal)) {
    req.has_address = true;
    req.address = literal;
  } else {
    req.host = host;
  }
  return no_proxy_->Decide(req).action != policy::Action::kAllow;
}

bool OperatorNetwork::TrustedForNames(const Address& addr) const {
  policy::Request req;
  req.has_address = true;
  req.address = addr;
  return ranges_->Decide(req).action == policy::Action::kAllow;
}

bool OperatorNetwork::TerminatesTls(const std::string& host) const {
  Address literal{};
  if (host.empty() || policy::ParseAddress(host, &literal)) return false;
  policy::Request req;
  req.host = host;
  return hosts_->Decide(req).action == policy::Action::kAllow;
}

}  // namespace airlock::proxyd
