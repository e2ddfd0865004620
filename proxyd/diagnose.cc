#include "proxyd/diagnose.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {
namespace pb = airlock::proxy::v1;

std::vector<std::string> Nameservers(const std::string& resolv_conf) {
  std::vector<std::string> out;
  for (absl::string_view line : absl::StrSplit(resolv_conf, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "nameserver") || line.empty() ||
        !absl::ascii_isspace(line[0])) {
      continue;
    }
    line = absl::StripAsciiWhitespace(line);
    if (!line.empty()) out.emplace_back(line);
  }
  return out;
}

pb::DiagnoseResponse Diagnose(const ProxyContext& px, const std::vector<std::string>& hosts,
                              uint16_t port) {
  pb::DiagnoseResponse resp;
  for (const auto& ns : Nameservers(ReadFileToString("/etc/resolv.conf"))) resp.add_resolvers(ns);
  for (const auto& r : px.network.trusted_ranges()) resp.add_trusted_ranges(r);
  for (const auto& h : px.network.terminate_tls()) resp.add_terminate_tls(h);
  resp.set_trust_store(px.upstream_trust);
  resp.set_upstream_proxy(px.network.proxy().empty()
                              ? "direct (proxyd connects to upstreams itself)"
                              : absl::StrCat(px.network.proxy(), " (CONNECT)"));
  for (const auto& host : hosts) {
    pb::HostCheck* c = resp.add_hosts();
    c->set_host(host);
    c->set_tls_terminated(px.network.TerminatesTls(host));
    bool via_proxy = px.network.ProxyFor(host);
    auto resolved = px.resolver.Resolve(host);
    if (!resolved.ok() && !via_proxy) {
      c->set_detail(absl::StrCat("does not resolve on this host: ", resolved.status().message()));
      continue;
    }
    // Probe connects (directly or through the proxy) and shakes hands.
    auto probe = [&](const Address* addr, const std::string& ok) {
      auto fd = DialUpstream(px, host, addr, port, std::chrono::seconds(5));
      if (!fd.ok()) {
        c->set_detail(absl::StrCat(via_proxy ? "through the upstream proxy: " : "cannot connect: ",
                                   fd.status().message()));
        return;
      }
      UniqueFd owned(*fd);
      auto tls = StartUpstreamTls(px.upstream_tls.get(), owned.get(), host);
      if (!tls.ok()) {
        c->set_detail(absl::StrCat("TLS does not verify against ", px.upstream_trust, ": ",
                                   tls.status().message()));
        return;
      }
      c->set_reachable(true);
      c->set_detail(ok);
    };
    if (!resolved.ok()) {
      probe(nullptr, "ok: through the upstream proxy, which resolves it");
      continue;
    }
    c->set_address(AddressText(resolved->address));
    c->set_protected_address(IsProtected(resolved->address) && !resolved->from_static_map);
    c->set_trusted_range(px.network.TrustedForNames(resolved->address));
    if (c->protected_address() && !c->trusted_range()) {
      c->set_detail(absl::StrCat(
          "resolves to ", c->address(), ", a protected address: sandboxes are refused unless "
          "proxyd.conf trusts its range (trusted-ranges = ", c->address(), "/32 or its network; "
          "tools/configure_network.sh sets it)"));
      continue;
    }
    probe(&resolved->address,
          c->tls_terminated()
              ? "ok: proxyd terminates TLS (verified here); guests see Airlock's CA"
              : "ok: tunnelled when allowed outright, so the guest verifies this certificate "
                "itself (if this network re-signs TLS, add the host to terminate-tls)");
  }
  return resp;
}

}  // namespace airlock::proxyd
