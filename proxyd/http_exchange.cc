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

// IsIdempotent is true for the methods RFC 9110 (9.2.2) lets a proxy
// send again on its own.
bool IsIdempotent(const std::string& method) {
  return method == "GET" || method == "HEAD" || method == "OPTIONS" || method == "TRACE" ||
         method == "PUT" || method == "DELETE";
}

// OpenUpstream connects an admitted destination, with TLS to it when the
// client's side has TLS.
absl::StatusOr<std::unique_ptr<Stream>> OpenUpstream(ExchangePeers& peers, const Destination& d,
                                                     bool tls) {
  auto fd = peers.Dial(d);
  if (!fd.ok()) return fd.status();
  auto upstream = std::make_unique<Stream>(*fd, peers.Sockets());
  if (tls) {
    auto ssl = peers.UpstreamTls(*fd, d.host);
    if (!ssl.ok()) return ssl.status();
    upstream->StartTls(std::move(*ssl));
  }
  return upstream;
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
    // A client sends its next request once it has this response, most
    // often.
    client.ExpectWait();
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
  absl::StatusOr<Destination> dest = absl::PermissionDeniedError("denied");
  if (v.allow) dest = peers.Admit(host, port, &v);
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
  // Allowed: now, and only now, the credentials for this host (as of the
  // store's latest change: a removed secret is gone from the next one).
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
  if (!dest.ok()) {
    client.WriteAll(ErrorResponse(502, "Bad Gateway", dest.status().message()));
    return false;
  }
  // The client may keep its connection for the next request (each one
  // comes back here to be decided).
  std::string client_connection =
      absl::AsciiStrToLower(absl::StrCat(req->Get("Connection"), ",", req->Get("Proxy-Connection")));
  bool keep_alive = req->version == "HTTP/1.1" &&
                    !absl::StrContains(client_connection, "close");
  req->Remove("Proxy-Connection");
  req->Remove("Proxy-Authorization");
  req->Remove("Keep-Alive");
  // A WebSocket upgrade keeps its Connection header (the 101 is spliced).
  // Everything else asks the upstream to keep the connection (HTTP/1.1's
  // default) so that it can carry this sandbox's next decided request to
  // the same destination; an HTTP/1.0 request closes it.
  bool websocket = absl::AsciiStrToLower(req->Get("Upgrade")) == "websocket";
  bool http11 = req->version == "HTTP/1.1";
  if (!websocket) {
    req->Remove("Upgrade");
    if (http11) {
      req->Remove("Connection");
    } else {
      req->Set("Connection", "close");
    }
  }
  std::string request_head = SerializeRequestHead(*req);
  uint64_t length = 0;
  BodyKind request_body = body_read ? BodyKind::kLength : RequestBodyKind(*req, &length);
  // A kept connection is used only for a request that may be sent again
  // (RFC 9110 9.2.2: an idempotent method, with no body or one read
  // whole): a server may close a kept connection just as it is taken, and
  // then the request goes once more on a new one. Other requests get a
  // new connection, so they are never sent twice.
  bool replayable = IsIdempotent(req->method) &&
                    (body_read || request_body == BodyKind::kNone ||
                     (request_body == BodyKind::kLength && length == 0));
  std::string pool_key = dest->PoolKey(client.tls());
  std::unique_ptr<Stream> upstream = replayable ? peers.Pool()->Take(pool_key) : nullptr;
  absl::StatusOr<std::string> resp_head;
  while (true) {
    bool kept = upstream != nullptr;
    if (!kept) {
      auto made = OpenUpstream(peers, *dest, client.tls());
      if (!made.ok()) {
        client.WriteAll(ErrorResponse(502, "Bad Gateway", made.status().message()));
        return false;
      }
      upstream = std::move(*made);
    }
    bool sent = upstream->WriteAll(request_head);
    if (sent && body_read) {
      sent = upstream->WriteAll(body);
    } else if (sent) {
      switch (request_body) {
        case BodyKind::kLength:
          if (!CopyExactly(client, *upstream, length)) return false;
          break;
        case BodyKind::kChunked:
          if (!CopyChunked(client, *upstream)) return false;
          break;
        default:
          break;
      }
    }
    // Sent again only when the kept connection refused the request or
    // ended cleanly before a byte of the answer: not after an error or a
    // timeout, where the server may be working on it.
    bool none_read = !sent;
    if (sent) {
      upstream->ExpectWait();  // the answer is seldom there yet
      resp_head = ReadHead(*upstream, kMaxHead, &none_read);
    }
    if (kept && none_read) {
      upstream.reset();  // closed by the server while kept: a new one
      continue;
    }
    if (!sent) return false;
    break;
  }
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
    resp_head = ReadHead(*upstream, kMaxHead);
    if (!resp_head.ok()) return false;
    resp = ParseResponseHead(*resp_head);
  }
  if (!resp.ok()) {
    client.WriteAll(ErrorResponse(502, "Bad Gateway", resp.status().message()));
    return false;
  }
  bool upgrade = resp->status == 101;
  // The upstream keeps the connection (HTTP/1.1, no "close") for the next
  // request, once this response has been carried whole.
  bool reusable = http11 && !websocket && resp->version == "HTTP/1.1" &&
                  !HasConnectionOption(resp->headers, "close");
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
  std::string head = SerializeResponseHead(*resp);
  if (!upgrade && body_kind == BodyKind::kLength && upstream->unread().size() >= length) {
    // The whole body came with the head (a small response): it goes out in
    // the same write, so the client's side is woken once for it.
    head.append(upstream->unread(), 0, length);
    upstream->unread().erase(0, length);
    length = 0;
  }
  if (!client.WriteAll(head)) return false;
  if (upgrade) {
    Splice(client, *upstream);
    return false;
  }
  bool whole = false;
  switch (body_kind) {
    case BodyKind::kLength:
      whole = CopyExactly(*upstream, client, length);
      break;
    case BodyKind::kChunked:
      whole = CopyChunked(*upstream, client);
      break;
    case BodyKind::kUntilClose:
      CopyUntilEnd(*upstream, client);
      return false;
    case BodyKind::kNone:
      whole = true;
      break;
  }
  if (whole && reusable) peers.Pool()->Keep(pool_key, std::move(upstream));
  return whole && keep_alive;
}

}  // namespace airlock::proxyd
