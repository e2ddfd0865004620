#include "proxyd/attachment.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/agent_link.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/policy/rule_wire.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "proxyd/http.h"
#include "proxyd/inject.h"
#include "proxyd/stream.h"
#include "proxyd/wire.h"

namespace airlock::proxyd {

namespace agentpb = airlock::agent::v1;
namespace pb = airlock::proxy::v1;
using airlock::policy::Action;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

constexpr size_t kMaxHead = 64 * 1024;
constexpr auto kUpstreamConnectTimeout = seconds(15);
constexpr auto kIdleTimeout = seconds(600);

// Verdict is a decision plus what the log and a 403 need.
struct Verdict {
  bool allow = false;
  bool inspect = false;
  std::string rule_id;
  std::string rule_text;  // "" for the default deny
  std::string reason;
  // Ids of the credentials placed in the request, comma-separated.
  std::string credential;
  // The deciding rule names an address or range (not a host name or "**").
  bool address_rule = false;
  // Path rules apply to the host (policy::Decision::path_rules).
  bool path_rules = false;
  // The deciding rule is "**" (any host), not one naming this host.
  bool any_host_rule = false;
};

std::string ErrorResponse(int status, absl::string_view reason, absl::string_view body) {
  std::string text = absl::StrCat("airlock: ", body, "\n");
  return absl::StrCat(
      "HTTP/1.1 ", status, " ", reason,
      "\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: ", text.size(),
      "\r\nConnection: close\r\nX-Airlock-Decision: error\r\n\r\n", text);
}

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

struct Attachment::State : std::enable_shared_from_this<Attachment::State> {
  std::string sandbox;
  std::string channel_path;
  ProxyContext* px;
  SyntheticNames names;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  bool ready = false;
  std::string last_error;
  std::shared_ptr<const policy::RuleSet> rules;
  std::string policy_error;  // why the last snapshot was refused
  uint64_t revision = 0;
  std::set<grpc::ClientContext*> calls;  // cancelled on Stop
  std::atomic<uint64_t> open{0};  // connections holding a slot of px->caps
  HandlerThreads handlers;
  SocketSet sockets;
  std::atomic<int64_t> last_secrets_warning{0};
  std::atomic<int64_t> last_cap_warning{0};

  bool Stopping() const {
    std::lock_guard<std::mutex> lock(mu);
    return stopping;
  }
  bool Track(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mu);
    if (stopping) return false;
    calls.insert(ctx);
    return true;
  }
  void Untrack(grpc::ClientContext* ctx) {
    std::lock_guard<std::mutex> lock(mu);
    calls.erase(ctx);
  }
  void Sleep(milliseconds d) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, d, [&] { return stopping; });
  }

  void FollowPolicy();
  // RunTunnel keeps the egress tunnel to the guest open (reopening it when
  // it breaks) and hands each guest connection and DNS query it carries
  // to Accept and AnswerDns.
  void RunTunnel();
  // Accept takes a slot for guest connection `id` and starts its handler,
  // or resets it (over a cap).
  void Accept(const std::shared_ptr<EgressMux>& mux, uint64_t id,
              const agentpb::EgressConnection& c);
  // Serve decides and carries one guest connection, `fd` its end of the
  // pair the mux carries.
  void Serve(const std::shared_ptr<EgressMux>& mux, uint64_t id,
             const agentpb::EgressConnection& c, int fd);
  void AnswerDns(EgressMux* mux, uint64_t id, const std::string& packet);
  // Credentials asks secretsd what to place in a request to `host`:`port`; none
  // when secretsd has none or cannot be reached (the request then carries
  // only the sentinel, never anything else).
  std::vector<Placement> Credentials(const std::string& host, uint16_t port);
  // InterceptForCredentials turns an outright allow into an inspected one
  // when a credential applies to the host, so it can be placed, or when the
  // operator has proxyd terminate TLS for it.
  void InterceptForCredentials(const std::string& host, uint16_t port, Verdict* v);

  // Decide asks the current snapshot. `host` is a name, or "" with `addr`.
  Verdict Decide(const std::string& host, const Address* addr, uint16_t port, bool http,
                 const std::string& method, const std::string& path);
  // Connect resolves and connects for an allowed verdict, refusing a
  // protected address the rules do not name (the verdict turns deny).
  absl::StatusOr<int> Connect(const std::string& host, uint16_t port, Verdict* v);
  void Record(const std::string& host, uint16_t port, const std::string& method,
              const std::string& path, const Verdict& v, pb::Path via);

  bool HandleForward(Stream& client);
  bool HandleTransparent(Stream& client, const Address& addr, uint16_t port);
  enum class FirstBytes { kTls, kHttp, kOther, kSilent };
  // Classify looks at what a client sent first (without consuming it).
  FirstBytes Classify(Stream& client, milliseconds wait);
  // HandleInspected serves a connection whose requests are decided one by
  // one (TLS intercepted, HTTP parsed), or which is denied: HTTP and TLS
  // get answers (403 when refused), other traffic is carried when `v`
  // allows the host outright, else reset.
  bool HandleInspected(Stream& client, const std::string& host, uint16_t port, Verdict v,
                       pb::Path via);
  // SpliceAllowed connects an allowed connection and copies both ways;
  // false (reset) when the upstream cannot be reached.
  bool SpliceAllowed(Stream& client, const std::string& host, uint16_t port, Verdict* v,
                     pb::Path via);
  void ServeIntercepted(Stream& client, const std::string& host, uint16_t port, pb::Path via);
  // ServeRequests serves the request whose head is `head` and every
  // later one the client sends on the same connection, each parsed,
  // decided, given its credentials and sent upstream on its own (a new
  // upstream connection each), as long as both sides keep it alive.
  void ServeRequests(Stream& client, std::string head, const std::string& conn_host,
                     uint16_t conn_port, pb::Path via);
  // ServeHttp serves one request; true when the client connection may
  // carry the next one (HTTP/1.1 without "Connection: close", a response
  // whose end is known, all of both bodies carried).
  bool ServeHttp(Stream& client, const std::string& head, const std::string& conn_host,
                 uint16_t conn_port, pb::Path via);
};

Attachment::Attachment(std::string sandbox, std::string channel_path, ProxyContext* px)
    : state_(std::make_shared<State>()) {
  state_->sandbox = std::move(sandbox);
  state_->channel_path = std::move(channel_path);
  state_->px = px;
}

Attachment::~Attachment() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stopping = true;
    for (grpc::ClientContext* c : state_->calls) c->TryCancel();
  }
  state_->cv.notify_all();
  if (policy_thread_.joinable()) policy_thread_.join();
  if (egress_thread_.joinable()) egress_thread_.join();
  // The tunnel is gone (every guest end closed); end what handlers still
  // wait on upstream, and wait for them: none outlives what it uses.
  state_->sockets.ShutdownAll();
  state_->handlers.JoinAll();
}

void Attachment::Start() {
  auto s = state_;
  policy_thread_ = std::thread([s] { s->FollowPolicy(); });
  egress_thread_ = std::thread([s] { s->RunTunnel(); });
}

absl::Status Attachment::WaitReady(seconds timeout) {
  std::unique_lock<std::mutex> lock(state_->mu);
  if (state_->cv.wait_for(lock, timeout, [&] { return state_->ready; })) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "the sandbox's egress port ", state_->channel_path, " did not answer within ",
      timeout.count(), " s", state_->last_error.empty() ? "" : ": ", state_->last_error));
}

const std::string& Attachment::sandbox() const { return state_->sandbox; }
const std::string& Attachment::channel_path() const { return state_->channel_path; }
uint64_t Attachment::policy_revision() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->revision;
}
uint64_t Attachment::open_connections() const { return state_->open.load(); }

void Attachment::State::FollowPolicy() {
  while (!Stopping()) {
    auto stub = airlock::policy::v1::Policy::NewStub(px->policyd.Dial());
    grpc::ClientContext ctx;
    if (!Track(&ctx)) return;
    airlock::policy::v1::SnapshotRequest req;
    req.set_sandbox(sandbox);
    req.set_follow(true);
    auto reader = stub->Snapshot(&ctx, req);
    airlock::policy::v1::CompiledPolicy policy;
    while (reader->Read(&policy)) {
      auto compiled = airlock::policy::CompileSnapshot(policy);
      std::lock_guard<std::mutex> lock(mu);
      revision = policy.revision();
      if (!compiled.ok()) {
        // Keeping the old rules could keep a grant the new policy removed:
        // deny everything until a snapshot compiles.
        AIRLOCK_LOG_ERROR(
            "refusing a policy snapshot; denying all egress until the next",
            {{"sandbox", sandbox}, {"error", std::string(compiled.status().message())}});
        rules = std::make_shared<const policy::RuleSet>(std::vector<policy::Rule>());
        policy_error = std::string(compiled.status().message());
        continue;
      }
      rules = *compiled;
      policy_error.clear();
    }
    grpc::Status s = reader->Finish();
    Untrack(&ctx);
    if (!Stopping()) {
      AIRLOCK_LOG_WARN("policy stream ended; keeping the last snapshot and retrying",
                       {{"sandbox", sandbox}, {"error", s.error_message()}});
      Sleep(milliseconds(500));
    }
  }
}

void Attachment::State::RunTunnel() {
  while (!Stopping()) {
    AgentLink link(channel_path);
    auto channel = link.Channel(seconds(5));
    if (!channel.ok()) {
      {
        std::lock_guard<std::mutex> lock(mu);
        last_error = std::string(channel.status().message());
      }
      Sleep(milliseconds(300));
      continue;
    }
    auto stub = agentpb::Egress::NewStub(*channel);
    grpc::ClientContext ctx;
    if (!Track(&ctx)) return;
    auto stream = stub->Tunnel(&ctx);
    agentpb::EgressFrames in;
    agentpb::EgressFrames start;
    start.mutable_start()->set_ca_certificate_pem(px->ca->certificate_pem());
    // The agent's first (empty) message: the CA is installed, the tunnel live.
    if (stream->Write(start) && stream->Read(&in)) {
      {
        std::lock_guard<std::mutex> lock(mu);
        ready = true;
        cv.notify_all();
      }
      auto* writer = stream.get();
      auto mux = std::make_shared<EgressMux>(
          [writer](const agentpb::EgressFrames& batch) { return writer->Write(batch); });
      while (stream->Read(&in)) {
        for (agentpb::EgressFrame& f : *in.mutable_frames()) {
          switch (f.kind_case()) {
            case agentpb::EgressFrame::kOpen:
              Accept(mux, f.id(), f.open());
              break;
            case agentpb::EgressFrame::kDnsQuery:
              AnswerDns(mux.get(), f.id(), f.dns_query());
              break;
            default:
              mux->Deliver(std::move(f));
          }
        }
      }
      // Writes fail from here, so the mux's writer cannot hang; its stop
      // closes every connection's pair end (their handlers see the end).
      ctx.TryCancel();
      mux->Stop();
    }
    grpc::Status s = stream->Finish();
    Untrack(&ctx);
    {
      std::lock_guard<std::mutex> lock(mu);
      last_error = s.error_message();
    }
    Sleep(milliseconds(200));
  }
}

void Attachment::State::Accept(const std::shared_ptr<EgressMux>& mux, uint64_t id,
                               const agentpb::EgressConnection& c) {
  // A guest cannot exhaust proxyd's threads and descriptors, for itself or
  // for other sandboxes: the slot is taken before any work, and past a cap
  // the connection is reset.
  if (!px->caps->Reserve(&open)) {
    int64_t now = NowMs();
    int64_t last = last_cap_warning.load();
    if (now - last > 10000 && last_cap_warning.compare_exchange_strong(last, now)) {
      AIRLOCK_LOG_WARN("connection cap reached; new connections are reset",
                       {{"sandbox", sandbox},
                        {"sandbox_open", std::to_string(open.load())},
                        {"proxyd_open", std::to_string(px->caps->open())}});
    }
    mux->Reset(id);
    return;
  }
  int sp[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp) != 0) {
    px->caps->Release(&open);
    mux->Reset(id);
    return;
  }
  mux->Open(id, sp[1]);
  if (!handlers.Spawn([this, mux, id, c, fd = sp[0]] { Serve(mux, id, c, fd); })) {
    AIRLOCK_LOG_ERROR("cannot start a connection thread", {{"sandbox", sandbox}});
    mux->Reset(id);
    close(sp[0]);
    px->caps->Release(&open);
  }
}

void Attachment::State::Serve(const std::shared_ptr<EgressMux>& mux, uint64_t id,
                              const agentpb::EgressConnection& c, int fd) {
  {
    Stream client(fd, &sockets);
    SetTimeouts(fd, kIdleTimeout);
    bool ok = c.via() == agentpb::EGRESS_FORWARD ? HandleForward(client) : [&] {
      Address addr{};
      if (!policy::ParseAddress(c.address(), &addr) || c.port() == 0 || c.port() > 65535) {
        return false;
      }
      return HandleTransparent(client, addr, static_cast<uint16_t>(c.port()));
    }();
    // A reset is asked for before the end closes, so the guest sees a
    // reset, never an end of stream.
    if (!ok) mux->Reset(id);
    client.ShutdownWrite();
  }  // closes fd
  px->caps->Release(&open);
}

Verdict Attachment::State::Decide(const std::string& host, const Address* addr, uint16_t port,
                                  bool http, const std::string& method, const std::string& path) {
  std::shared_ptr<const policy::RuleSet> current;
  {
    std::lock_guard<std::mutex> lock(mu);
    current = rules;
  }
  Verdict v;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(mu);
    error = policy_error;
  }
  if (current == nullptr) {
    v.reason = "no policy from policyd yet (is policyd running?)";
    return v;
  }
  if (!error.empty()) {
    v.reason = "the sandbox's policy could not be compiled (" + error + ")";
    return v;
  }
  policy::Request req;
  req.sandbox = sandbox;
  req.host = host;
  if (addr != nullptr) {
    req.has_address = true;
    req.address = *addr;
  }
  req.port = port;
  req.http = http;
  req.method = method;
  req.path = path;
  policy::Decision d = current->Decide(req);
  v.allow = d.action == Action::kAllow;
  v.inspect = d.inspect;
  v.path_rules = d.path_rules;
  v.reason = d.reason;
  if (d.rule != nullptr) {
    v.rule_id = d.rule->id;
    v.rule_text = d.rule->Text();
    v.address_rule = d.rule->resource.kind == policy::Resource::Kind::kAddress;
    v.any_host_rule = d.rule->resource.kind == policy::Resource::Kind::kAny;
  }
  return v;
}

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

absl::StatusOr<int> Attachment::State::Connect(const std::string& host, uint16_t port, Verdict* v) {
  auto resolved = px->resolver.Resolve(host);
  if (!resolved.ok()) {
    // Through an upstream proxy a name this host cannot resolve is the
    // proxy's to resolve (as on networks without outside DNS).
    if (!px->network.ProxyFor(host)) return resolved.status();
    return DialUpstream(*px, host, nullptr, port, kUpstreamConnectTimeout);
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
  return DialUpstream(*px, host, &resolved->address, port, kUpstreamConnectTimeout);
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
  std::vector<Placement> out;
  if (px->secretsd == nullptr) return out;
  auto stub = airlock::secrets::v1::Secrets::NewStub(px->secretsd);
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, seconds(5));
  airlock::secrets::v1::ResolveRequest req;
  req.set_sandbox(sandbox);
  req.set_host(host);
  req.set_port(port);
  airlock::secrets::v1::ResolveResponse resp;
  grpc::Status s = stub->Resolve(&ctx, req, &resp);
  if (!s.ok()) {
    // Once every 10 s at most: a secretsd that is down must not flood the log.
    int64_t now = NowMs();
    int64_t last = last_secrets_warning.load();
    if (now - last > 10000 && last_secrets_warning.compare_exchange_strong(last, now)) {
      AIRLOCK_LOG_WARN("cannot resolve credentials; requests go without them",
                       {{"sandbox", sandbox}, {"host", host}, {"error", s.error_message()}});
    }
    return out;
  }
  for (const auto& c : resp.credentials()) {
    out.push_back(Placement{c.id(), c.sentinel(), c.value(), c.format()});
  }
  return out;
}

void Attachment::State::InterceptForCredentials(const std::string& host, uint16_t port,
                                                Verdict* v) {
  Address literal{};
  if (!v->allow || v->inspect || policy::ParseAddress(host, &literal)) return;
  if (px->network.TerminatesTls(host) || !Credentials(host, port).empty()) v->inspect = true;
}

void Attachment::State::AnswerDns(EgressMux* mux, uint64_t id, const std::string& packet) {
  std::string answer;
  auto question = ParseDnsQuery(packet);
  if (!question.ok()) {
    answer = DnsFormatError(packet);
  } else if (Address literal{}; !CanonicalHost(question->name).ok() ||
                                policy::ParseAddress(question->name, &literal)) {
    // An address spelled as a name ("93.184.216.34", "0x5d.0xb8...") would
    // be decided as a name and then connected to as an address.
    answer = DnsEmptyAnswer(*question, kDnsNxDomain);
  } else if (question->qtype == kDnsTypeA && question->qclass == kDnsClassIn &&
             !question->name.empty()) {
    // Every name gets an address: a denied one is refused when connected
    // to, the same way as any other denied destination.
    answer = DnsAnswerA(*question, names.AddressFor(question->name), 60);
    Verdict v = Decide(question->name, nullptr, 0, false, "", "");
    v.allow = v.allow || v.inspect;
    Record(question->name, 0, "", "", v, pb::DNS);
  } else {
    // No AAAA (the guest has no IPv6 route) or other records.
    answer = DnsEmptyAnswer(*question, kDnsNoError);
  }
  if (answer.empty()) return;
  agentpb::EgressFrame a;
  a.set_id(id);
  a.set_dns_answer(std::move(answer));
  mux->Post(std::move(a));
}

bool Attachment::State::HandleForward(Stream& client) {
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
    ServeRequests(client, *head, "", 0, pb::FORWARD);
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
    return HandleInspected(client, target->host, target->port, v, pb::FORWARD);
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
  SetTimeouts(*fd, kIdleTimeout);
  if (!client.WriteAll("HTTP/1.1 200 Connection established\r\n\r\n")) return true;
  Splice(client, upstream);
  return true;
}

bool Attachment::State::HandleTransparent(Stream& client, const Address& addr, uint16_t port) {
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
        SetTimeouts(*fd, kIdleTimeout);
        Splice(client, upstream);
        return true;
      }
      // A protected address the rules do not name: refused like any deny.
    }
  }
  // Denied, or HTTP rules apply: an HTTP or TLS client gets its request
  // decided (and a 403 when refused); anything else is reset, or carried
  // when the host is allowed outright.
  return HandleInspected(client, shown, port, v, pb::TRANSPARENT);
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

bool Attachment::State::HandleInspected(Stream& client, const std::string& host, uint16_t port,
                                        Verdict v, pb::Path via) {
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
    SetTimeouts(*fd, kIdleTimeout);
    pollfd p[2] = {{client.fd(), POLLIN, 0}, {*fd, POLLIN, 0}};
    if (poll(p, 2, static_cast<int>(kIdleTimeout.count() * 1000)) <= 0) return false;
    if (p[1].revents != 0 && p[0].revents == 0) {
      Record(host, port, "", "", v, via);
      Splice(client, *upstream);
      return true;
    }
    kind = Classify(client, seconds(5));
  }
  switch (kind) {
    case FirstBytes::kTls:
      ServeIntercepted(client, host, port, via);
      return true;
    case FirstBytes::kHttp: {
      auto head = ReadHead(client, kMaxHead);
      if (head.ok()) ServeRequests(client, *head, host, port, via);
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
  if (upstream == nullptr) return SpliceAllowed(client, host, port, &v, via);
  Record(host, port, "", "", v, via);
  Splice(client, *upstream);
  return true;
}

bool Attachment::State::SpliceAllowed(Stream& client, const std::string& host, uint16_t port,
                                      Verdict* v, pb::Path via) {
  auto fd = Connect(host, port, v);
  Record(host, port, "", "", *v, via);
  if (!fd.ok()) return false;
  Stream upstream(*fd, &sockets);
  SetTimeouts(*fd, kIdleTimeout);
  Splice(client, upstream);
  return true;
}

void Attachment::State::ServeIntercepted(Stream& client, const std::string& host, uint16_t port,
                                         pb::Path via) {
  // The handshake reads the socket: bytes already buffered (a ClientHello
  // sent before the CONNECT's answer) would be lost. Such clients close.
  if (!client.unread().empty()) return;
  auto ctx = px->ca->ServerContextFor(host);
  if (!ctx.ok()) return;
  auto ssl = AcceptClientTls(ctx->get(), client.fd());
  if (!ssl.ok()) {
    AIRLOCK_LOG_INFO(
        "sandbox TLS handshake failed",
        {{"sandbox", sandbox}, {"host", host}, {"error", std::string(ssl.status().message())}});
    return;
  }
  client.StartTls(std::move(*ssl));
  auto head = ReadHead(client, kMaxHead);
  if (!head.ok()) return;
  ServeRequests(client, *head, host, port, via);
}

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

void Attachment::State::ServeRequests(Stream& client, std::string head,
                                      const std::string& conn_host, uint16_t conn_port,
                                      pb::Path via) {
  while (ServeHttp(client, head, conn_host, conn_port, via)) {
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

bool Attachment::State::ServeHttp(Stream& client, const std::string& head_text,
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
      Decide(is_ip ? "" : host, is_ip ? &literal : nullptr, port, true, req->method, path->match);
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
  if (v.allow) fd = Connect(host, port, &v);
  // Owns the upstream socket from here, whatever return comes next.
  std::unique_ptr<Stream> owned = fd.ok() ? std::make_unique<Stream>(*fd, &sockets) : nullptr;
  if (!v.allow) {
    Record(host, port, req->method, target->path, v, via);
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
      is_ip || !client.tls() ? std::vector<Placement>() : Credentials(host, port);
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
      Record(host, port, req->method, target->path, v, via);
      client.WriteAll(ErrorResponse(422, "Unprocessable Entity", st.message()));
      return false;
    }
  }
  v.credential = absl::StrJoin(placed, ",");
  Record(host, port, req->method, target->path, v, via);
  if (!fd.ok()) {
    client.WriteAll(ErrorResponse(502, "Bad Gateway", fd.status().message()));
    return false;
  }
  Stream& upstream = *owned;
  SetTimeouts(*fd, kIdleTimeout);
  if (client.tls()) {
    auto ssl = StartUpstreamTls(px->upstream_tls.get(), *fd, host);
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
