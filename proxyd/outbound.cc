#include "proxyd/attachment_state.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "common/log.h"
#include "proxyd/fibers.h"

namespace airlock::proxyd {

using std::chrono::seconds;

absl::StatusOr<int> DialUpstream(const ProxyContext& px, const std::string& host,
                                 const Address* addr, uint16_t port,
                                 std::chrono::seconds timeout) {
  if (!px.network.ProxyFor(host)) {
    if (addr == nullptr) return absl::InternalError("no address to connect to");
    return ConnectTo(*addr, port, timeout);
  }
  auto proxy = px.resolver.Resolve(px.network.proxy_host());
  if (!proxy.ok()) {
    return absl::UnavailableError(absl::StrCat("cannot resolve the upstream proxy ",
                                               px.network.proxy(), ": ",
                                               proxy.status().message()));
  }
  auto fd = ConnectTo(proxy->address, px.network.proxy_port(), timeout);
  if (!fd.ok()) {
    return absl::UnavailableError(
        absl::StrCat("upstream proxy ", px.network.proxy(), ": ", fd.status().message()));
  }
  if (absl::Status s = ProxyTunnel(*fd, px.network.proxy(), host, port, timeout); !s.ok()) {
    close(*fd);
    return s;
  }
  return fd;
}

absl::StatusOr<Destination> Attachment::State::Admit(const std::string& host, uint16_t port,
                                                      Verdict* v) {
  Destination d;
  d.host = host;
  d.port = port;
  d.via_proxy = px->network.ProxyFor(host);
  auto resolved = px->resolver.Resolve(host);
  if (!resolved.ok()) {
    // Through an upstream proxy a name this host cannot resolve is the
    // proxy's to resolve (as on networks without outside DNS).
    if (!d.via_proxy) return resolved.status();
    return d;
  }
  // An operator's trusted range lets names reach a protected address
  // (split DNS), when a rule names the host: an IP literal the guest gave,
  // or any name under "**" (which a guest can point anywhere with its own
  // DNS), never counts.
  Address literal{};
  bool trusted = px->network.TrustedForNames(resolved->address) &&
                 !policy::ParseAddress(host, &literal) && !v->any_host_rule;
  if (IsProtected(resolved->address) && !resolved->from_static_map && !trusted) {
    // Only a rule on the address itself opens a protected range: "**" or a
    // name that resolves there does not.
    Verdict by_address = Decide("", &resolved->address, port, false, "", "");
    if (!by_address.allow || !by_address.address_rule) {
      v->allow = false;
      v->reason = absl::StrCat(host, " is ", AddressText(resolved->address),
                               ", a protected address (loopback, private, link-local or "
                               "similar); only a rule naming that address or its range allows it");
      // Name the rule that denies the address, if one does.
      v->rule_id = by_address.allow ? "" : by_address.rule_id;
      v->rule_text = by_address.allow ? "" : by_address.rule_text;
      return absl::PermissionDeniedError(v->reason);
    }
  }
  d.resolved = true;
  d.address = resolved->address;
  return d;
}

absl::StatusOr<int> Attachment::State::Dial(const Destination& d) {
  return DialUpstream(*px, d.host, d.resolved ? &d.address : nullptr, d.port,
                      kUpstreamConnectTimeout);
}

absl::StatusOr<int> Attachment::State::Connect(const std::string& host, uint16_t port, Verdict* v) {
  auto d = Admit(host, port, v);
  if (!d.ok()) return d.status();
  return Dial(*d);
}

void Attachment::State::Record(const std::string& host, uint16_t port, const std::string& method,
                               const std::string& path, const Verdict& v, pb::Path via) {
  pb::Decision d;
  d.set_time_ms(NowMs());
  d.set_sandbox(sandbox);
  d.set_host(host);
  d.set_port(port);
  d.set_method(method);
  d.set_path(path);
  d.set_verdict(v.allow ? pb::ALLOW : pb::DENY);
  d.set_rule_id(v.rule_id);
  d.set_rule(v.rule_text.empty() ? "default deny" : v.rule_text);
  d.set_via(via);
  d.set_reason(v.reason);
  d.set_credential(v.credential);
  px->log->Record(std::move(d));
}

std::vector<Placement> Attachment::State::Credentials(const std::string& host, uint16_t port) {
  if (px->secrets == nullptr) return {};
  if (auto kept = px->secrets->Cached(sandbox, host, port)) return *std::move(kept);
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, seconds(5));
  // Cancelled when the attachment stops (its handlers then end without
  // waiting out the deadline); none made once it is stopping.
  if (!Track(&ctx)) return {};
  absl::StatusOr<std::vector<Placement>> resolved;
  // A gRPC call blocks its thread: a handler's fiber waits for it aside.
  RunBlocking([&] { resolved = px->secrets->Resolve(&ctx, sandbox, host, port); });
  Untrack(&ctx);
  if (!resolved.ok()) {
    if (Stopping()) return {};
    // Once every 10 s at most: a secretsd that is down must not flood the log.
    int64_t now = NowMs();
    int64_t last = last_secrets_warning.load();
    if (now - last > 10000 && last_secrets_warning.compare_exchange_strong(last, now)) {
      AIRLOCK_LOG_WARN("cannot resolve credentials; requests go without them",
                       {{"sandbox", sandbox},
                        {"host", host},
                        {"error", std::string(resolved.status().message())}});
    }
    return {};
  }
  return *std::move(resolved);
}

void Attachment::State::InterceptForCredentials(const std::string& host, uint16_t port,
                                                Verdict* v) {
  Address literal{};
  if (!v->allow || v->inspect || policy::ParseAddress(host, &literal)) return;
  if (px->network.TerminatesTls(host) || !Credentials(host, port).empty()) v->inspect = true;
}

}  // namespace airlock::proxyd
