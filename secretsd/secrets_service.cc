#include "secretsd/secrets_service.h"

#include <grpc/grpc_security_constants.h>

#include <condition_variable>
#include <deque>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/inject_format.h"
#include "common/log.h"
#include "common/peer_cred.h"
#include "common/status.h"
#include "secretsd/services.h"

namespace airlock::secretsd {

namespace pb = airlock::secrets::v1;

namespace {

Scope FromProto(pb::Scope s) {
  switch (s) {
    case pb::GLOBAL:
      return Scope::kGlobal;
    case pb::SANDBOX:
      return Scope::kSandbox;
    default:
      return Scope::kUnspecified;
  }
}

void ToProto(const SecretInfo& info, pb::SecretInfo* out) {
  out->set_id(info.id);
  out->set_scope(info.scope == Scope::kGlobal ? pb::GLOBAL : pb::SANDBOX);
  out->set_sandbox(info.sandbox);
  out->set_service(info.service);
  // SecretInfo.env holds one variable; a service with several (github)
  // reports its first, and Services lists them all.
  out->set_env(info.env.empty() ? "" : info.env.front());
  for (const auto& h : info.hosts) out->add_hosts(h);
  out->set_sentinel(info.sentinel);
  out->set_created_at(info.created_at);
  out->set_registry(info.registry);
}

}  // namespace

CallerIdentity IdentifyCaller(const grpc::ServerContext& ctx) {
  CallerIdentity id;
  if (auto creds = CallerCredentials(ctx); creds.ok()) {
    id.transport = CallerIdentity::Transport::kUnix;
    id.pid = creds->pid;
    id.uid = creds->uid;
    return id;
  }
  std::shared_ptr<const grpc::AuthContext> auth = ctx.auth_context();
  if (auth == nullptr || !auth->IsPeerAuthenticated()) return id;
  auto type = auth->FindPropertyValues(GRPC_TRANSPORT_SECURITY_TYPE_PROPERTY_NAME);
  if (type.size() != 1 || type[0] != GRPC_SSL_TRANSPORT_SECURITY_TYPE) return id;
  for (const auto& cn : auth->FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
    id.tls_common_names.emplace_back(cn.data(), cn.size());
  }
  if (!id.tls_common_names.empty()) id.transport = CallerIdentity::Transport::kTls;
  return id;
}

namespace {

uint64_t NewInstance() {
  std::random_device rd;
  uint64_t v = 0;
  while (v == 0) v = (static_cast<uint64_t>(rd()) << 32) | rd();
  return v;
}

}  // namespace

SecretsService::SecretsService(SecretStore* store, ResolverPolicy policy,
                               std::chrono::milliseconds lease)
    : store_(store),
      policy_(std::move(policy)),
      instance_(NewInstance()),
      // The margin covers the two clocks' drift over a lease.
      board_(lease, lease / 10 + std::chrono::milliseconds(10)) {}

void SecretsService::Changed(uint64_t before) {
  uint64_t now = store_->Revision();
  if (now == before) return;  // nothing Resolve answers changed
  int late = board_.Changed(now);
  if (late > 0) {
    AIRLOCK_LOG_WARN("a secrets watcher did not acknowledge a change; waited out its lease",
                     {{"watchers", std::to_string(late)},
                      {"lease_ms", std::to_string(board_.lease().count())}});
  }
}

grpc::Status SecretsService::Set(grpc::ServerContext*, const pb::SetRequest* req,
                                 pb::SecretInfo* resp) {
  SecretSpec spec;
  spec.scope = FromProto(req->scope());
  spec.sandbox = req->sandbox();
  spec.service = req->service();
  spec.value = req->value();
  spec.env = req->env();
  spec.hosts.assign(req->hosts().begin(), req->hosts().end());
  spec.placeholder = req->placeholder();
  spec.registry = req->registry();
  uint64_t before = store_->Revision();
  auto info = store_->Set(spec);
  Changed(before);
  if (!info.ok()) return ToGrpc(info.status());
  AIRLOCK_LOG_INFO("secret set", {{"id", info->id}});
  ToProto(*info, resp);
  return grpc::Status::OK;
}

grpc::Status SecretsService::List(grpc::ServerContext*, const pb::ListRequest* req,
                                  pb::ListResponse* resp) {
  auto secrets = store_->List(req->sandbox());
  if (!secrets.ok()) return ToGrpc(secrets.status());
  for (const auto& s : *secrets) ToProto(s, resp->add_secrets());
  return grpc::Status::OK;
}

grpc::Status SecretsService::Delete(grpc::ServerContext*, const pb::DeleteRequest* req,
                                    pb::DeleteResponse*) {
  uint64_t before = store_->Revision();
  absl::Status deleted = store_->Delete(req->id());
  Changed(before);
  if (!deleted.ok()) return ToGrpc(deleted);
  AIRLOCK_LOG_INFO("secret deleted", {{"id", req->id()}});
  return grpc::Status::OK;
}

grpc::Status SecretsService::Sentinels(grpc::ServerContext*, const pb::SentinelsRequest* req,
                                       pb::SentinelsResponse* resp) {
  uint64_t before = store_->Revision();
  auto env = store_->Sentinels(req->sandbox(), req->without_globals(),
                               req->registry_credentials());
  Changed(before);
  if (!env.ok()) return ToGrpc(env.status());
  for (const auto& [name, sentinel] : *env) (*resp->mutable_env())[name] = sentinel;
  return grpc::Status::OK;
}

grpc::Status SecretsService::Resolve(grpc::ServerContext* ctx, const pb::ResolveRequest* req,
                                     pb::ResolveResponse* resp) {
  // Identity first: a caller that is not proxyd learns nothing, not even
  // whether its request was well-formed.
  ResolverDecision d = AuthorizeResolver(IdentifyCaller(*ctx), policy_);
  if (!d.allowed) {
    AIRLOCK_LOG_WARN("resolve refused", {{"caller", d.caller},
                                         {"reason", d.reason},
                                         {"sandbox", req->sandbox()},
                                         {"host", req->host()}});
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "only proxyd may resolve secrets");
  }
  if (req->port() > 65535) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "port must be at most 65535");
  }
  uint64_t revision = 0;
  auto creds = store_->Resolve(req->sandbox(), req->host(), static_cast<uint16_t>(req->port()),
                               &revision);
  resp->set_instance(instance_);
  resp->set_revision(revision);
  if (!creds.ok()) {
    if (creds.status().code() == absl::StatusCode::kDataLoss) {
      AIRLOCK_LOG_ERROR("resolve failed", {{"sandbox", req->sandbox()},
                                           {"host", req->host()},
                                           {"error", std::string(creds.status().message())}});
    }
    return ToGrpc(creds.status());
  }
  std::vector<std::string> ids;
  for (auto& c : *creds) {
    pb::Credential* out = resp->add_credentials();
    out->set_id(c.id);
    out->set_sentinel(c.sentinel);
    out->set_value(std::move(c.value));
    out->set_format(c.format);
    // Stored formats were parsed when stored; one that no longer parses
    // goes without a placement, which proxyd refuses to place (the request
    // gets a 422 saying so, never a half-placed credential).
    if (auto format = ParseFormat(c.format); format.ok()) {
      *out->mutable_placement() = FormatToProto(*format);
    }
    ids.push_back(c.id);
  }
  AIRLOCK_LOG_DEBUG("resolved", {{"caller", d.caller},
                                 {"sandbox", req->sandbox()},
                                 {"host", req->host()},
                                 {"ids", absl::StrJoin(ids, ",")}});
  return grpc::Status::OK;
}

grpc::Status SecretsService::WatchRevisions(
    grpc::ServerContext* ctx, grpc::ServerReaderWriter<pb::Revision, pb::WatchRequest>* stream) {
  ResolverDecision d = AuthorizeResolver(IdentifyCaller(*ctx), policy_);
  if (!d.allowed) {
    AIRLOCK_LOG_WARN("revision watch refused", {{"caller", d.caller}, {"reason", d.reason}});
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "only proxyd may watch revisions");
  }
  {
    std::lock_guard<std::mutex> lock(streams_mu_);
    if (ending_) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "secretsd is stopping");
    streams_.insert(ctx);
  }
  // Answers and pushes leave in order from a writer of their own: a
  // change's push never waits on this stream.
  struct Outbox {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<pb::Revision> queue;
    bool closed = false;
  } out;
  auto message = [this](uint64_t revision, uint64_t ping) {
    pb::Revision m;
    m.set_instance(instance_);
    m.set_revision(revision);
    m.set_ping(ping);
    m.set_lease_ms(static_cast<uint32_t>(board_.lease().count()));
    return m;
  };
  auto enqueue = [&out](pb::Revision m) {
    {
      std::lock_guard<std::mutex> lock(out.mu);
      out.queue.push_back(std::move(m));
    }
    out.cv.notify_one();
  };
  uint64_t id = board_.Add([&](uint64_t revision) { enqueue(message(revision, 0)); });
  std::thread writer([&] {
    std::unique_lock<std::mutex> lock(out.mu);
    while (true) {
      out.cv.wait(lock, [&] { return out.closed || !out.queue.empty(); });
      if (out.closed) return;
      pb::Revision m = std::move(out.queue.front());
      out.queue.pop_front();
      lock.unlock();
      bool ok = stream->Write(m);
      lock.lock();
      if (!ok) {
        ctx->TryCancel();
        return;
      }
    }
  });
  pb::WatchRequest req;
  while (stream->Read(&req)) {
    if (req.ack() != 0) board_.Acked(id, req.ack());
    if (req.ping() != 0) {
      board_.Answered(id);  // before the revision is read (RevisionBoard)
      enqueue(message(store_->Revision(), req.ping()));
    }
  }
  board_.Remove(id);
  {
    std::lock_guard<std::mutex> lock(out.mu);
    out.closed = true;
  }
  out.cv.notify_one();
  ctx->TryCancel();  // a writer blocked on a watcher that stopped reading
  writer.join();
  std::lock_guard<std::mutex> lock(streams_mu_);
  streams_.erase(ctx);
  return grpc::Status::OK;
}

void SecretsService::EndStreams() {
  std::lock_guard<std::mutex> lock(streams_mu_);
  ending_ = true;
  for (grpc::ServerContext* ctx : streams_) ctx->TryCancel();
}

grpc::Status SecretsService::ResolveRegistry(grpc::ServerContext* ctx,
                                             const pb::ResolveRegistryRequest* req,
                                             pb::RegistryCredential* resp) {
  // Identity first, as for Resolve: proxyd is refused like anyone else.
  ResolverDecision d = AuthorizeRegistryResolver(IdentifyCaller(*ctx), policy_);
  if (!d.allowed) {
    AIRLOCK_LOG_WARN("registry resolve refused",
                     {{"caller", d.caller}, {"reason", d.reason}, {"host", req->host()}});
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "only vmmd may resolve registry credentials");
  }
  auto cred = store_->ResolveRegistry(req->host());
  if (!cred.ok()) {
    if (cred.status().code() == absl::StatusCode::kDataLoss) {
      AIRLOCK_LOG_ERROR("registry resolve failed",
                        {{"host", req->host()}, {"error", std::string(cred.status().message())}});
    }
    return ToGrpc(cred.status());
  }
  resp->set_username(cred->username);
  resp->set_password(std::move(cred->password));
  AIRLOCK_LOG_DEBUG("registry credential resolved", {{"caller", d.caller}, {"host", req->host()}});
  return grpc::Status::OK;
}

grpc::Status SecretsService::Forget(grpc::ServerContext*, const pb::ForgetRequest* req,
                                    pb::ForgetResponse*) {
  uint64_t before = store_->Revision();
  auto deleted = store_->ForgetSandbox(req->sandbox(), req->keep_secrets());
  Changed(before);
  if (!deleted.ok()) return ToGrpc(deleted.status());
  AIRLOCK_LOG_INFO("sandbox forgotten", {{"sandbox", req->sandbox()},
                                         {"keep_secrets", req->keep_secrets() ? "true" : "false"},
                                         {"secrets_deleted", std::to_string(*deleted)}});
  return grpc::Status::OK;
}

grpc::Status SecretsService::Services(grpc::ServerContext*, const pb::ServicesRequest*,
                                      pb::ServicesResponse* resp) {
  for (const auto& def : BuiltinServices()) {
    pb::Service* s = resp->add_services();
    s->set_name(def.name);
    for (const auto& e : def.env) s->add_env(e);
    for (const auto& h : def.hosts) s->add_hosts(h.host);
    s->set_format(def.format);
  }
  return grpc::Status::OK;
}

grpc::Status SecretsService::BindKit(grpc::ServerContext*, const pb::BindKitRequest* req,
                                     pb::BindKitResponse* resp) {
  std::vector<KitBinding> bindings;
  std::vector<std::string> services;
  for (const pb::KitCredential& c : req->credentials()) {
    KitBinding b;
    b.service = c.service();
    b.env = c.env();
    for (const pb::KitInject& i : c.inject()) b.inject.push_back(KitInject{i.domain(), i.format()});
    b.suppress = c.suppress();
    services.push_back(c.suppress() ? absl::StrCat(b.service, "(suppressed)") : b.service);
    bindings.push_back(std::move(b));
  }
  uint64_t before = store_->Revision();
  auto unbound = store_->BindKit(req->sandbox(), bindings);
  Changed(before);
  if (!unbound.ok()) return ToGrpc(unbound.status());
  AIRLOCK_LOG_INFO("kit credentials bound", {{"sandbox", req->sandbox()},
                                             {"services", absl::StrJoin(services, ",")},
                                             {"unbound", absl::StrJoin(*unbound, ",")}});
  for (const auto& service : *unbound) resp->add_unbound(service);
  return grpc::Status::OK;
}

}  // namespace airlock::secretsd
