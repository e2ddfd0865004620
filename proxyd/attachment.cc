#include "proxyd/attachment.h"

#include <sys/socket.h>

#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "common/log.h"
#include "common/policy/rule_wire.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "proxyd/attachment_state.h"

namespace airlock::proxyd {

using airlock::policy::Action;
using std::chrono::milliseconds;
using std::chrono::seconds;

int64_t NowMs() {
  return std::chrono::duration_cast<milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Attachment::Attachment(std::string sandbox, std::string channel_path, ProxyContext* px)
    : state_(std::make_shared<State>(px)) {
  state_->sandbox = std::move(sandbox);
  state_->channel_path = std::move(channel_path);
}

Attachment::~Attachment() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->Stop();
    for (grpc::ClientContext* c : state_->calls) c->TryCancel();
    if (state_->tunnel) state_->tunnel->Shutdown();
  }
  if (policy_thread_.joinable()) policy_thread_.join();
  state_->tunnel_fiber.JoinAll();
  // The tunnel is gone (every guest end closed); end what handlers still
  // wait on upstream, and wait for them: none outlives what it uses.
  state_->sockets.ShutdownAll();
  state_->handlers.JoinAll();
  state_->pool.Close();
}

void Attachment::Start() {
  auto s = state_;
  policy_thread_ = std::thread([s] { s->FollowPolicy(); });
  if (!s->tunnel_fiber.Spawn([s] { s->RunTunnel(); })) {
    std::lock_guard<std::mutex> lock(s->mu);
    s->last_error = "proxyd is stopping";
  }
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

}  // namespace airlock::proxyd
