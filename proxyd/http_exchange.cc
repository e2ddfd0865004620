#include "proxyd/http_exchange.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/policy/rules.h"
#include "proxyd/http.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {

namespace pb = airlock::proxy::v1;

namespace {

// CopyChunked forwards one chunked body verbatim; bytes read past its end
// go back to `from`.
bool CopyChunked(Stream& from, Stream& to) {
  ChunkedScanner scanner;
  char buf[65536];
  while (!scanner.done()) {
    ssize_t n = from.Read(buf, sizeof(buf));
    if (n <= 0) return false;
    size_t body = scanner.Feed(absl::string_view(buf, n));
    if (!scanner.status().ok()) return false;
    if (!to.WriteAll(absl::string_view(buf, body))) return false;
    if (body < static_cast<size_t>(n)) from.unread().insert(0, buf + body, n - body);
  }
  return true;
}

}  // namespace

std::string ErrorResponse(int status, absl::string_view reason, absl::string_view body) {
  std::string text = absl::StrCat("airlock: ", body, "\n");
  return absl::StrCat(
      "HTTP/1.1 ", status, " ", reason,
      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", text.size(),
      "\r\nConnection: close\r\nX-Airlock-Decision: error\r\n\r\n", text);
}

void ServeRequests(ExchangePeers& peers, Stream& client, std::string head,
                   const std::string& conn_host, uint16_t conn_port, pb::Path via) {
  while (ServeHttp(peers, client, head, conn_host, conn_port, via)) {
    auto next = ReadHead(client, kMaxHead);
    if (!next.ok()) {
      if (next.status().code() == absl::StatusCode::kResourceExhausted) {
        client.WriteAll(
            ErrorResponse(431, "Request Header Fields Too Large", "request head too long"));
      }
      return;
    }
    head = std::move(*next);
  }
}

bool ServeHttp(ExchangePeers& peers, Stream& client, const std::string& head_text,
               const std::string& conn_host, uint16_t conn_port, pb::Path via) {
  auto req = ParseRequestHead(head_text);
  if (!req.ok()) {
    client.WriteAll(ErrorResponse(400, "Bad Request", req.status().message()));
    return false;
  }
  bool forward = conn_host.empty();
  auto target = ParseTarget(*req, client.tls(), forward);
  if (!target.ok()) {
    client.WriteAll(ErrorResponse(400, "Bad Request", target.status().message()));
    return false;
  }
  std::string host = forward ? target->host : conn_host;
  uint16_t port = forward ? target->port : conn_port;
  if (forward) {
    req->Set("Host", HostHeaderValue(*target, false));
    req->target = target->origin_form;
  } else if (absl::AsciiStrToLower(target->host) != absl::AsciiStrToLower(conn_host)) {
    // The host decided (and given credentials) must be the one the server
    // routes to: no virtual-host or domain-fronting games.
    client.WriteAll(ErrorResponse(400, "Bad Request",
                                  absl::StrCat("the Host header names ", target->host,
                                               " but the connection is to ", conn_host)));
    return false;
  }
  auto path = NormalizePath(target->path);
  if (!path.ok()) {
    client.WriteAll(ErrorResponse(400, "Bad Request", path.status().message()));
    return false;
  }
  Address literal{};
  bool is_ip = policy::ParseAddress(host, &literal);
  Verdict v =
      peers.Decide(is_ip ? "" : host, is_ip ? &literal : nullptr, port, true, req->method, path->match);
  if (!path->ambiguity.empty() && v.path_rules) {
    // Forwarded elsewhere; here a path glob decides, and another reading
    // of the path could reach what it did not mean.
    client.WriteAll(ErrorResponse(
        400, "Bad Request",
        absl::StrCat("path \"", target->path, "\" ", path->ambiguity,
                     "; refused because path rules apply to ", host)));
    return false;
  }
  absl::StatusOr<int> fd = absl::PermissionDeniedError("denied");
  if (v.allow) fd = peers.Connect(host, port, &v);
  // Owns the upstream socket from here, whatever return comes next.
  std::unique_ptr<Stream> owned = fd.ok() ? std::make_unique<Stream>(*fd, peers.Sockets()) : nullptr;
  if (!v.allow) {
    peers.Record(host, port, req->method, target->path, v, via);
    client.WriteAll(DenyResponse(host, port, v.rule_text, v.rule_id, v.reason));
    return false;
  }
  // The body is read below (for credentials, or to forward it): a client
  // waiting for "100 Continue" gets it now, from proxyd, since the request
  // is allowed.
  if (absl::AsciiStrToLower(req->Get("Expect")) == "100-continue") {
    req->Remove("Expect");
    if (!client.WriteAll("HTTP/1.1 100 Continue\r\n\r\n")) return false;
  }
  // Allowed: now, and only now, the credentials for this host (asked for
  // each request, so a removed secret is gone from the next one).
  std::vector<std::string> placed;
  std::string body;
  bool body_read = false;
  // Never over cleartext: a credential goes only inside TLS to a verified
  // upstream.
  std::vector<Placement> creds =
      is_ip || !client.tls() ? std::vector<Placement>() : peers.Credentials(host, port);
  if (!creds.empty()) {
    auto head_placed = InjectHead(&*req, creds);
    absl::Status st = head_placed.status();
    uint64_t len = 0;
    if (st.ok()) {
      placed = *head_placed;
      if (RequestBodyKind(*req, &len) == BodyKind::kLength && len <= kMaxInspectedBody) {
        body.resize(len);
        size_t got = 0;
        while (got < len) {
          ssize_t n = client.Read(body.data() + got, len - got);
          if (n <= 0) return false;
          got += n;
        }
        body_read = true;
        st = InjectBody(*req, creds, &body, &placed);
        req->Set("Content-Length", std::to_string(body.size()));
      }
    }
    if (!st.ok()) {
      v.allow = false;
      v.reason = std::string(st.message());
      peers.Record(host, port, req->method, target->path, v, via);
      client.WriteAll(ErrorResponse(422, "Unprocessable Entity", st.message()));
      return false;
    }
  }
  v.credential = absl::StrJoin(placed, ",");
  peers.Record(host, port, req->method, target->path, v, via);
  if (!fd.ok()) {
    client.WriteAll(ErrorResponse(502, "Bad Gateway", fd.status().message()));
    return false;
  }
  Stream& upstream = *owned;
  SetTimeouts(*fd, kIdleTimeout);
  if (client.tls()) {
    auto ssl = peers.UpstreamTls(*fd, host);
    if (!ssl.ok()) {
      client.WriteAll(ErrorResponse(502, "Bad Gateway", ssl.status().message()));
      return false;
    }
    upstream.StartTls(std::move(*ssl));
  }
  // The client may keep its connection for the next request (each one
  // comes back here to be decided); upstream, each request has a
  // connection of its own, so nothing reaches a server undecided.
  std::string client_connection =
      absl::AsciiStrToLower(absl::StrCat(req->Get("Connection"), ",", req->Get("Proxy-Connection")));
  bool keep_alive = req->version == "HTTP/1.1" &&
                    !absl::StrContains(client_connection, "close");
  req->Remove("Proxy-Connection");
  req->Remove("Proxy-Authorization");
  req->Remove("Keep-Alive");
  // A WebSocket upgrade keeps its Connection header (the 101 is spliced);
  // everything else is one request per upstream connection.
  bool websocket = absl::AsciiStrToLower(req->Get("Upgrade")) == "websocket";
  if (!websocket) {
    req->Remove("Upgrade");
    req->Set("Connection", "close");
  }
  if (!upstream.WriteAll(SerializeRequestHead(*req))) return false;
  uint64_t length = 0;
  if (body_read) {
    if (!upstream.WriteAll(body)) return false;
  } else
    switch (RequestBodyKind(*req, &length)) {
      case BodyKind::kLength:
        if (!CopyExactly(client, upstream, length)) return false;
        break;
      case BodyKind::kChunked:
        if (!CopyChunked(client, upstream)) return false;
        break;
      default:
        break;
    }
  auto resp_head = ReadHead(upstream, kMaxHead);
  if (!resp_head.ok()) {
    client.WriteAll(ErrorResponse(
        502, "Bad Gateway",
        absl::StrCat("the upstream sent no response: ", resp_head.status().message())));
    return false;
  }
  auto resp = ParseResponseHead(*resp_head);
  // Interim responses (103 Early Hints, a 100 the upstream sends anyway)
  // pass through; the final one follows.
  while (resp.ok() && resp->status >= 100 && resp->status < 200 && resp->status != 101) {
    if (!client.WriteAll(SerializeResponseHead(*resp))) return false;
    resp_head = ReadHead(upstream, kMaxHead);
    if (!resp_head.ok()) return false;
    resp = ParseResponseHead(*resp_head);
  }
  if (!resp.ok()) {
    client.WriteAll(ErrorResponse(502, "Bad Gateway", resp.status().message()));
    return false;
  }
  bool upgrade = resp->status == 101;
  BodyKind body_kind = upgrade ? BodyKind::kUntilClose
                               : ResponseBodyKind(*resp, req->method, &length);
  // Kept alive only when the response's end is known without a close.
  keep_alive = keep_alive && !upgrade && body_kind != BodyKind::kUntilClose;
  if (!upgrade) {
    resp->Remove("Keep-Alive");
    if (keep_alive) {
      resp->Remove("Connection");
    } else {
      resp->Set("Connection", "close");
    }
  }
  if (!client.WriteAll(SerializeResponseHead(*resp))) return false;
  if (upgrade) {
    Splice(client, upstream);
    return false;
  }
  switch (body_kind) {
    case BodyKind::kLength:
      return CopyExactly(upstream, client, length) && keep_alive;
    case BodyKind::kChunked:
      return CopyChunked(upstream, client) && keep_alive;
    case BodyKind::kUntilClose:
      CopyUntilEnd(upstream, client);
      return false;
    case BodyKind::kNone:
      return keep_alive;
  }
  return false;
}

}  // namespace airlock::proxyd
