// Private to proxyd's attachment: one sandbox's egress state
// (Attachment::State) and what its stages share. The stages, each in a file
// of its own:
//   attachment.cc      the public Attachment, following the policy, Decide
//   tunnel.cc          the egress tunnel: connections in (caps, handler
//                      fibers) and DNS questions answered
//   outbound.cc        connecting an allowed destination (protected ranges,
//                      the operator's proxy), credentials, the decision log
//   traffic_paths.cc   forward, transparent and inspected connections
//   http_exchange.h    one HTTP exchange: request -> decide -> inject ->
//                      upstream -> response, and kept-alive connections
//                      (a stage of its own: State is its ExchangePeers)
#ifndef AIRLOCK_PROXYD_ATTACHMENT_STATE_H_
#define AIRLOCK_PROXYD_ATTACHMENT_STATE_H_

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/egress_mux.h"
#include "common/egress_transport.h"
#include "common/policy/rules.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "protos/proxy/v1/proxy.pb.h"
#include "proxyd/attachment.h"
#include "proxyd/connections.h"
#include "proxyd/fibers.h"
#include "proxyd/http_exchange.h"
#include "proxyd/inject.h"
#include "proxyd/stream.h"
#include "proxyd/upstream.h"
#include "proxyd/upstream_pool.h"

namespace airlock::proxyd {

namespace agentpb = airlock::agent::v1;
namespace pb = airlock::proxy::v1;

inline constexpr auto kUpstreamConnectTimeout = std::chrono::seconds(15);

// GuestConnection is one guest connection as its handler holds it: its
// end of the pipe the mux carries, and the connection's stream there, so
// that a connection left only to copy bytes is handed to the mux (Carry)
// and the handler ends.
struct GuestConnection {
  GuestConnection(std::shared_ptr<EgressPipe> pipe, std::shared_ptr<EgressMux> mux, uint64_t id)
      : client(std::move(pipe)), mux(std::move(mux)), id(id) {}
  Stream client;
  std::shared_ptr<EgressMux> mux;
  uint64_t id;
  // The mux carries the connection now: it ends it and gives its slot
  // of the caps back.
  bool handed_over = false;
};

// NowMs is the wall clock in milliseconds.
int64_t NowMs();

struct Attachment::State : ExchangePeers, std::enable_shared_from_this<Attachment::State> {
  explicit State(ProxyContext* px)
      : px(px),
        loop(px->loops->PickLoop()),
        stop_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
        tunnel_fiber(px->loops, loop),
        handlers(px->loops, loop) {}
  ~State() override {
    if (stop_fd >= 0) close(stop_fd);
  }

  std::string sandbox;
  std::string channel_path;
  ProxyContext* px;
  // The fiber loop the sandbox's mux and its connections' handlers share.
  size_t loop;
  SyntheticNames names;

  mutable std::mutex mu;
  std::condition_variable cv;
  bool stopping = false;
  // Readable once stopping: what Sleep waits on besides its time.
  const int stop_fd;
  bool ready = false;
  std::string last_error;
  std::shared_ptr<const policy::RuleSet> rules;
  std::string policy_error;  // why the last snapshot was refused
  uint64_t revision = 0;
  std::set<grpc::ClientContext*> calls;  // cancelled on Stop
  std::shared_ptr<EgressTransport> tunnel;  // the live tunnel, shut down on Stop
  std::atomic<uint64_t> open{0};  // connections holding a slot of px->caps
  // Streams (of which tunnel's mux, which id) with a handler or carried
  // by the mux now (mu).
  std::set<std::pair<const EgressMux*, uint64_t>> live_ids;
  Handlers tunnel_fiber;  // RunTunnel's, on `loop`
  Handlers handlers;  // each connection's, a fiber on `loop`
  SocketSet sockets;
  // After `sockets`: a kept connection is tracked there until it closes.
  UpstreamPool pool;
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
  // Stop marks the state stopping and wakes what sleeps.
  void Stop() {
    stopping = true;  // under mu
    uint64_t one = 1;
    (void)!write(stop_fd, &one, sizeof(one));
    cv.notify_all();
  }
  // Sleep waits `d`, or less when stopping; on a fiber it parks only the
  // fiber.
  void Sleep(std::chrono::milliseconds d) {
    pollfd p = {stop_fd, POLLIN, 0};
    Poll(&p, 1, static_cast<int>(d.count()));
  }

  void FollowPolicy();
  // RunTunnel keeps the egress tunnel to the guest open (reopening it when
  // it breaks) and hands each guest connection and DNS query it carries
  // to Accept and AnswerDns. A fiber on `loop`, beside the mux it feeds
  // and the handlers it starts.
  void RunTunnel();
  // Accept takes a slot for guest connection `id` and starts its handler,
  // or resets it (over a cap).
  void Accept(const std::shared_ptr<EgressMux>& mux, uint64_t id,
              const agentpb::EgressConnection& c);
  // Serve decides and carries one guest connection, `pipe` its end of
  // the stream the mux carries.
  void Serve(const std::shared_ptr<EgressMux>& mux, uint64_t id,
             const agentpb::EgressConnection& c, std::shared_ptr<EgressPipe> pipe);
  // EndConnection forgets stream `id`'s connection, giving its slot of
  // the caps back when it took one.
  void EndConnection(const EgressMux* mux, uint64_t id, bool release_slot);
  void AnswerDns(EgressMux* mux, uint64_t id, const std::string& packet);
  // Credentials is what to place in a request to `host`:`port`, kept or
  // asked of secretsd (SecretsClient); none when secretsd has none or
  // cannot be reached (the request then carries only the sentinel, never
  // anything else).
  std::vector<Placement> Credentials(const std::string& host, uint16_t port) override;
  // InterceptForCredentials turns an outright allow into an inspected one
  // when a credential applies to the host, so it can be placed, or when the
  // operator has proxyd terminate TLS for it.
  void InterceptForCredentials(const std::string& host, uint16_t port, Verdict* v);

  // Decide asks the current snapshot. `host` is a name, or "" with `addr`.
  Verdict Decide(const std::string& host, const Address* addr, uint16_t port, bool http,
                 const std::string& method, const std::string& path) override;
  // Admit resolves for an allowed verdict, refusing a protected address
  // the rules do not name (the verdict turns deny); Dial connects there;
  // Connect is both.
  absl::StatusOr<Destination> Admit(const std::string& host, uint16_t port, Verdict* v) override;
  absl::StatusOr<int> Dial(const Destination& d) override;
  absl::StatusOr<int> Connect(const std::string& host, uint16_t port, Verdict* v);
  void Record(const std::string& host, uint16_t port, const std::string& method,
              const std::string& path, const Verdict& v, pb::Path via) override;
  absl::StatusOr<UniqueSsl> UpstreamTls(int fd, const std::string& host) override {
    return StartUpstreamTls(px->upstream_tls.get(), fd, host);
  }
  SocketSet* Sockets() override { return &sockets; }
  UpstreamPool* Pool() override { return &pool; }

  bool HandleForward(GuestConnection& g);
  bool HandleTransparent(GuestConnection& g, const Address& addr, uint16_t port);
  enum class FirstBytes { kTls, kHttp, kOther, kSilent };
  // Classify looks at what a client sent first (without consuming it).
  FirstBytes Classify(Stream& client, std::chrono::milliseconds wait);
  // HandleInspected serves a connection whose requests are decided one by
  // one (TLS intercepted, HTTP parsed), or which is denied: HTTP and TLS
  // get answers (403 when refused), other traffic is carried when `v`
  // allows the host outright, else reset.
  bool HandleInspected(GuestConnection& g, const std::string& host, uint16_t port, Verdict v,
                       pb::Path via);
  // SpliceAllowed connects an allowed connection and copies both ways;
  // false (reset) when the upstream cannot be reached.
  bool SpliceAllowed(GuestConnection& g, const std::string& host, uint16_t port, Verdict* v,
                     pb::Path via);
  // Carry copies a decided connection's bytes both ways until both ends
  // are done: the mux does it, without the pair, when neither side has
  // TLS; this handler when one has.
  void Carry(GuestConnection& g, Stream& upstream);
  void ServeIntercepted(Stream& client, const std::string& host, uint16_t port, pb::Path via);
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_ATTACHMENT_STATE_H_
