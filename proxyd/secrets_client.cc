#include "proxyd/secrets_client.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::proxyd {

namespace pb = airlock::secrets::v1;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

SecretsClient::SecretsClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(pb::Secrets::NewStub(std::move(channel))) {}

SecretsClient::~SecretsClient() { Stop(); }

void SecretsClient::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || stopping_) return;
  thread_ = std::thread([this] { Watch(); });
}

void SecretsClient::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (stream_ctx_ != nullptr) stream_ctx_->TryCancel();
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

std::optional<std::vector<Placement>> SecretsClient::Cached(const std::string& sandbox,
                                                            const std::string& host,
                                                            uint16_t port) {
  return cache_.Lookup(sandbox, host, port);
}

absl::StatusOr<std::vector<Placement>> SecretsClient::Resolve(grpc::ClientContext* ctx,
                                                              const std::string& sandbox,
                                                              const std::string& host,
                                                              uint16_t port) {
  pb::ResolveRequest req;
  req.set_sandbox(sandbox);
  req.set_host(host);
  req.set_port(port);
  pb::ResolveResponse resp;
  uint64_t generation = cache_.Generation();
  grpc::Status s = stub_->Resolve(ctx, req, &resp);
  if (!s.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("secretsd: ", s.error_message()));
  }
  std::vector<Placement> out;
  for (const auto& c : resp.credentials()) out.push_back(PlacementFromWire(c));
  cache_.Store(sandbox, host, port, resp.instance(), resp.revision(), generation, out);
  return out;
}

void SecretsClient::Forget(const std::string& sandbox) { cache_.Forget(sandbox); }

void SecretsClient::Watch() {
  milliseconds pause(100);
  bool warned = false;
  while (true) {
    grpc::Status ended;
    bool answered = WatchOnce(&ended);
    watching_ = false;
    cache_.Lost();
    if (answered) {
      pause = milliseconds(100);
      warned = false;
    } else if (!warned && pause >= milliseconds(3200)) {
      // Requests still get their credentials, a call each.
      AIRLOCK_LOG_WARN("cannot watch secretsd's revisions; every request asks secretsd",
                       {{"error", ended.error_message()}});
      warned = true;
    }
    std::unique_lock<std::mutex> lock(mu_);
    if (wake_.wait_for(lock, pause, [this] { return stopping_; })) return;
    pause = std::min(pause * 2, milliseconds(5000));
  }
}

bool SecretsClient::WatchOnce(grpc::Status* ended_with) {
  grpc::ClientContext ctx;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return false;
    stream_ctx_ = &ctx;
  }
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::Revision>> stream =
      stub_->WatchRevisions(&ctx);
  // Pings (the pinger) and acknowledgements (this thread) share the
  // stream's one writer.
  std::mutex write_mu;
  std::mutex ping_mu;
  std::condition_variable ping_wake;
  bool ended = false;
  milliseconds every(250);
  std::map<uint64_t, Clock::time_point> sent;  // guarded by ping_mu
  std::thread pinger([&] {
    uint64_t seq = 0;
    std::unique_lock<std::mutex> lock(ping_mu);
    while (!ended) {
      pb::WatchRequest ping;
      ping.set_ping(++seq);
      // The lease runs from before the ping leaves.
      sent[seq] = Clock::now();
      lock.unlock();
      bool ok;
      {
        std::lock_guard<std::mutex> w(write_mu);
        ok = stream->Write(ping);
      }
      lock.lock();
      if (!ok) break;
      ping_wake.wait_for(lock, every, [&] { return ended; });
    }
  });
  bool answered = false;
  pb::Revision m;
  while (stream->Read(&m)) {
    if (m.ping() != 0) {
      std::optional<Clock::time_point> lease_until;
      {
        std::lock_guard<std::mutex> lock(ping_mu);
        auto it = sent.find(m.ping());
        if (it != sent.end()) lease_until = it->second + milliseconds(m.lease_ms());
        sent.erase(sent.begin(), sent.upper_bound(m.ping()));
        if (m.lease_ms() >= 40) every = milliseconds(m.lease_ms() / 4);
      }
      cache_.Known(m.instance(), m.revision(), lease_until);
      answered = true;
      watching_ = true;
    } else {
      cache_.Known(m.instance(), m.revision(), std::nullopt);
      // Only now: secretsd lets the change's caller return on this.
      pb::WatchRequest ack;
      ack.set_ack(m.revision());
      std::lock_guard<std::mutex> w(write_mu);
      if (!stream->Write(ack)) break;
    }
  }
  // Nothing kept is trusted from here (the lease would also run out).
  watching_ = false;
  cache_.Lost();
  {
    std::lock_guard<std::mutex> lock(ping_mu);
    ended = true;
  }
  ping_wake.notify_all();
  ctx.TryCancel();
  pinger.join();
  *ended_with = stream->Finish();
  {
    std::lock_guard<std::mutex> lock(mu_);
    stream_ctx_ = nullptr;
  }
  return answered;
}

}  // namespace airlock::proxyd
