#include "proxyd/attachment_state.h"

#include <poll.h>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "proxyd/fibers.h"
#include "proxyd/http.h"
#include "proxyd/tls.h"
#include "proxyd/wire.h"

namespace airlock::proxyd {

using std::chrono::milliseconds;
using std::chrono::seconds;

bool Attachment::State::HandleForward(GuestConnection& g) {
  Stream& client = g.client;
  auto head = ReadHead(client, kMaxHead);
  if (!head.ok()) {
    if (head.status().code() == absl::StatusCode::kResourceExhausted) {
      client.WriteAll(
          ErrorResponse(431, "Request Header Fields Too Large", "request head too long"));
    }
    return true;
  }
  auto req = ParseRequestHead(*head);
  if (!req.ok()) {
    client.WriteAll(ErrorResponse(400, "Bad Request", req.status().message()));
    return true;
  }
  if (req->method != "CONNECT") {
    ServeRequests(*this, client, *head, "", 0, pb::FORWARD);
    return true;
  }
  auto target = ParseTarget(*req, false, true);
  if (!target.ok()) {
    client.WriteAll(ErrorResponse(400, "Bad Request", target.status().message()));
    return true;
  }
  Address literal{};
  bool is_ip = policy::ParseAddress(target->host, &literal);
  Verdict v =
      Decide(is_ip ? "" : target->host, is_ip ? &literal : nullptr, target->port, false, "", "");
  InterceptForCredentials(target->host, target->port, &v);
  if (!v.allow && !v.inspect) {
    Record(target->host, target->port, "", "", v, pb::FORWARD);
    client.WriteAll(DenyResponse(target->host, target->port, v.rule_text, v.rule_id, v.reason));
    return true;
  }
  if (v.inspect) {
    // Method/path rules (or a credential) apply to this host: look inside
    // the tunnel.
    if (!client.WriteAll("HTTP/1.1 200 Connection established\r\n\r\n")) return true;
    return HandleInspected(g, target->host, target->port, v, pb::FORWARD);
  }
  auto fd = Connect(target->host, target->port, &v);
  Record(target->host, target->port, "", "", v, pb::FORWARD);
  if (!fd.ok()) {
    if (!v.allow) {
      client.WriteAll(DenyResponse(target->host, target->port, v.rule_text, v.rule_id, v.reason));
    } else {
      client.WriteAll(ErrorResponse(502, "Bad Gateway", fd.status().message()));
    }
    return true;
  }
  Stream upstream(*fd, &sockets);
  if (!client.WriteAll("HTTP/1.1 200 Connection established\r\n\r\n")) return true;
  Carry(g, upstream);
  return true;
}

bool Attachment::State::HandleTransparent(GuestConnection& g, const Address& addr,
                                          uint16_t port) {
  std::string name = names.NameOf(addr);
  std::string shown = name.empty() ? AddressText(addr) : name;
  Verdict v = name.empty() ? Decide("", &addr, port, false, "", "")
                           : Decide(name, nullptr, port, false, "", "");
  if (!name.empty()) InterceptForCredentials(name, port, &v);
  if (v.allow && !v.inspect) {
    if (name.empty() && IsSynthetic(addr)) {
      v.allow = false;
      v.reason = "a synthetic DNS address this proxy did not hand out";
    } else {
      auto fd = Connect(shown, port, &v);
      if (fd.ok() || v.allow) {
        Record(shown, port, "", "", v, pb::TRANSPARENT);
        if (!fd.ok()) return false;
        Stream upstream(*fd, &sockets);
        Carry(g, upstream);
        return true;
      }
      // A protected address the rules do not name: refused like any deny.
    }
  }
  // Denied, or HTTP rules apply: an HTTP or TLS client gets its request
  // decided (and a 403 when refused); anything else is reset, or carried
  // when the host is allowed outright.
  return HandleInspected(g, shown, port, v, pb::TRANSPARENT);
}

Attachment::State::FirstBytes Attachment::State::Classify(Stream& client, milliseconds wait) {
  std::string first = Peek(client, 5, wait);
  if (first.empty()) return FirstBytes::kSilent;
  if (LooksLikeTls(first)) return FirstBytes::kTls;
  if (!LooksLikeHttp(first)) return FirstBytes::kOther;
  // Could be a request: only a complete first line that is not a request
  // line lets it pass as other traffic. Anything unclear goes to the
  // strict HTTP path, never undecided through a tunnel.
  std::string line = Peek(client, 8192, seconds(5), '\n');
  size_t start = line.find_first_not_of("\r\n \t");
  size_t end = line.find('\n', start == std::string::npos ? 0 : start);
  if (start == std::string::npos || end == std::string::npos) return FirstBytes::kHttp;
  return IsRequestLine(absl::string_view(line).substr(start, end - start)) ? FirstBytes::kHttp
                                                                           : FirstBytes::kOther;
}

bool Attachment::State::HandleInspected(GuestConnection& g, const std::string& host,
                                        uint16_t port, Verdict v, pb::Path via) {
  Stream& client = g.client;
  FirstBytes kind = Classify(client, seconds(5));
  std::unique_ptr<Stream> upstream;
  if (kind == FirstBytes::kSilent) {
    if (!v.allow) {
      Record(host, port, "", "", v, via);
      return false;
    }
    // A silent client may be waiting for a server greeting (SSH, SMTP):
    // HTTP and TLS servers never speak first, so a server that does is
    // not one and the connection is carried as it is.
    auto fd = Connect(host, port, &v);
    if (!fd.ok()) {
      Record(host, port, "", "", v, via);
      return false;
    }
    upstream = std::make_unique<Stream>(*fd, &sockets);
    Stream* both[2] = {&client, upstream.get()};
    short events[2] = {POLLIN, POLLIN};
    short ready[2] = {0, 0};
    if (WaitStreams(both, events, ready, 2, static_cast<int>(kStreamTimeout.count())) <= 0) {
      return false;
    }
    if (ready[1] != 0 && ready[0] == 0) {
      Record(host, port, "", "", v, via);
      Carry(g, *upstream);
      return true;
    }
    kind = Classify(client, seconds(5));
  }
  switch (kind) {
    case FirstBytes::kTls:
      upstream.reset();  // each request is decided, then given its connection
      ServeIntercepted(client, host, port, via);
      return true;
    case FirstBytes::kHttp: {
      upstream.reset();
      auto head = ReadHead(client, kMaxHead);
      if (head.ok()) ServeRequests(*this, client, *head, host, port, via);
      return true;
    }
    default:
      break;
  }
  // Neither HTTP nor TLS: allowed only when the host is granted outright
  // (its HTTP rules do not concern this traffic); else reset.
  if (!v.allow) {
    Record(host, port, "", "", v, via);
    return false;
  }
  if (upstream == nullptr) return SpliceAllowed(g, host, port, &v, via);
  Record(host, port, "", "", v, via);
  Carry(g, *upstream);
  return true;
}

bool Attachment::State::SpliceAllowed(GuestConnection& g, const std::string& host,
                                      uint16_t port, Verdict* v, pb::Path via) {
  auto fd = Connect(host, port, v);
  Record(host, port, "", "", *v, via);
  if (!fd.ok()) return false;
  Stream upstream(*fd, &sockets);
  Carry(g, upstream);
  return true;
}

void Attachment::State::Carry(GuestConnection& g, Stream& upstream) {
  if (g.client.tls() || upstream.tls()) {
    Splice(g.client, upstream);
    return;
  }
  // What the client sent past the head its handler read goes first.
  if (!g.client.unread().empty()) {
    if (!upstream.WriteAll(g.client.unread())) return;
    g.client.unread().clear();
  }
  int pair_end = g.client.Release();  // -1: the mux has the pipe
  int fd = upstream.Release();
  g.handed_over = true;
  auto done = [this, mux = g.mux.get(), id = g.id] { EndConnection(mux, id, true); };
  g.mux->Replace(g.id, pair_end, fd, std::move(done), kStreamTimeout);
}

void Attachment::State::ServeIntercepted(Stream& client, const std::string& host, uint16_t port,
                                         pb::Path via) {
  // The handshake reads the socket: bytes already buffered (a ClientHello
  // sent before the CONNECT's answer) would be lost. Such clients close.
  if (!client.unread().empty()) return;
  auto ctx = px->ca->ServerContextFor(host);
  if (!ctx.ok()) return;
  BIO* bio = client.NewBio();
  if (bio == nullptr) return;
  auto ssl = AcceptClientTls(ctx->get(), bio, [&client](short events) { return client.Wait(events); });
  if (!ssl.ok()) {
    AIRLOCK_LOG_INFO(
        "sandbox TLS handshake failed",
        {{"sandbox", sandbox}, {"host", host}, {"error", std::string(ssl.status().message())}});
    return;
  }
  client.StartTls(std::move(*ssl));
  auto head = ReadHead(client, kMaxHead);
  if (!head.ok()) return;
  ServeRequests(*this, client, *head, host, port, via);
}

}  // namespace airlock::proxyd
