// What the operator of a host says about the network proxyd runs on, read
// from proxyd.conf (never from a guest, a kit or a rule): address ranges
// that names may resolve into although they are protected (split DNS on a
// corporate network), an HTTP proxy upstream connections go through
// (CONNECT) with a no-proxy list, and hosts whose allowed connections proxyd
// terminates TLS for (verifying the upstream against the host's trust
// store, so the guest needs only Airlock's CA when the network re-signs
// TLS with a CA only the host trusts).
#ifndef AIRLOCK_PROXYD_OPERATOR_NETWORK_H_
#define AIRLOCK_PROXYD_OPERATOR_NETWORK_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/policy/rules.h"
#include "proxyd/upstream.h"

namespace airlock::proxyd {

class OperatorNetwork {
 public:
  // Make reads the two lists: CIDRs or addresses (`trusted_ranges`), and
  // host patterns as in rules (`terminate_tls`: "registry.npmjs.org",
  // "*.debian.org", "**.example.com", or "**" for every allowed host).
  // INVALID_ARGUMENT names the bad entry.
  // `upstream_proxy` is "host:port" (or "http://host:port"), empty for
  // none; `no_proxy` are host patterns and address ranges reached directly.
  static absl::StatusOr<OperatorNetwork> Make(const std::vector<std::string>& trusted_ranges,
                                              const std::vector<std::string>& terminate_tls,
                                              const std::string& upstream_proxy = "",
                                              const std::vector<std::string>& no_proxy = {});
  OperatorNetwork();

  // TrustedForNames says a name that a rule allows may lead to `addr`
  // although IsProtected(addr). An IP literal is never helped by this.
  bool TrustedForNames(const Address& addr) const;
  // TerminatesTls says proxyd terminates TLS for allowed connections to
  // the name `host` (never for an IP literal).
  bool TerminatesTls(const std::string& host) const;

  // ProxyFor says whether connections to `host` (a name or an address
  // literal) go through the upstream proxy: one is set and no no-proxy
  // entry matches.
  bool ProxyFor(const std::string& host) const;
  // The upstream proxy: host, port and "host:port" ("" when none).
  const std::string& proxy_host() const { return proxy_host_; }
  uint16_t proxy_port() const { return proxy_port_; }
  std::string proxy() const;

  const std::vector<std::string>& trusted_ranges() const { return ranges_text_; }
  const std::vector<std::string>& terminate_tls() const { return hosts_text_; }

 private:
  std::shared_ptr<const policy::RuleSet> ranges_, hosts_, no_proxy_;
  std::string proxy_host_;
  uint16_t proxy_port_ = 0;
  std::vector<std::string> ranges_text_, hosts_text_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_OPERATOR_NETWORK_H_
