#include "vmmd/peer_clients.h"

#include <chrono>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "protos/git/v1/git.grpc.pb.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::vmmd {
namespace {

using std::chrono::seconds;
namespace gitpb = airlock::git::v1;
namespace policypb = airlock::policy::v1;
namespace proxypb = airlock::proxy::v1;
namespace secretspb = airlock::secrets::v1;

// KeptChannel is one channel to a peer kept between calls, for a call made
// at every exec: dialing per call paid a connection and HTTP/2's handshake
// each time. A channel that failed is dialed again (a restarted peer is a
// new connection), so a call that found the kept channel broken is retried
// once on a new one.
class KeptChannel {
 public:
  explicit KeptChannel(Peer at) : at_(std::move(at)) {}

  std::shared_ptr<grpc::Channel> Get() {
    std::lock_guard<std::mutex> lock(mu_);
    if (channel_ != nullptr) {
      grpc_connectivity_state state = channel_->GetState(false);
      if (state == GRPC_CHANNEL_TRANSIENT_FAILURE || state == GRPC_CHANNEL_SHUTDOWN) {
        channel_.reset();
      }
    }
    if (channel_ == nullptr) channel_ = at_.Dial();
    return channel_;
  }

  // Drop forgets `c` if it is still the kept channel.
  void Drop(const std::shared_ptr<grpc::Channel>& c) {
    std::lock_guard<std::mutex> lock(mu_);
    if (channel_ == c) channel_.reset();
  }

 private:
  const Peer at_;
  std::mutex mu_;
  std::shared_ptr<grpc::Channel> channel_;
};

class GrpcGit : public GitPeer {
 public:
  explicit GrpcGit(Peer at) : at_(std::move(at)) {}

  absl::Status Baseline(const std::string& sandbox,
                        const std::vector<std::string>& host_paths) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(120));
    gitpb::BaselineRequest req;
    req.set_sandbox(sandbox);
    for (const auto& p : host_paths) req.add_paths(p);
    gitpb::BaselineResponse resp;
    return PeerCallError("gitd", at_, "record the review baseline of the shared paths",
                         Stub()->Baseline(&ctx, req, &resp));
  }

  absl::StatusOr<gitpb::PrepareCloneResponse> PrepareClone(const std::string& sandbox,
                                                           const std::string& host_path,
                                                           const std::string& branch) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(30));
    gitpb::PrepareCloneRequest req;
    req.set_sandbox(sandbox);
    req.set_path(host_path);
    req.set_branch(branch);
    gitpb::PrepareCloneResponse resp;
    if (absl::Status e = PeerCallError("gitd", at_, "prepare the clone-mode workspace",
                                       Stub()->PrepareClone(&ctx, req, &resp));
        !e.ok()) {
      return e;
    }
    return resp;
  }

  absl::Status Publish(const std::string& sandbox, const std::string& url) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    gitpb::PublishRequest req;
    req.set_sandbox(sandbox);
    req.set_url(url);
    gitpb::PublishResponse resp;
    return PeerCallError("gitd", at_, "publish the sandbox's Git remote",
                         Stub()->Publish(&ctx, req, &resp));
  }

  absl::Status Unpublish(const std::string& sandbox) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    gitpb::UnpublishRequest req;
    req.set_sandbox(sandbox);
    gitpb::UnpublishResponse resp;
    return PeerCallError("gitd", at_, "remove the sandbox's Git remote and review baseline",
                         Stub()->Unpublish(&ctx, req, &resp));
  }

 private:
  std::unique_ptr<gitpb::Git::Stub> Stub() const { return gitpb::Git::NewStub(at_.Dial()); }
  Peer at_;
};

class GrpcProxy : public ProxyPeer {
 public:
  explicit GrpcProxy(Peer at) : at_(std::move(at)) {}

  absl::Status Attach(const std::string& sandbox, const std::string& channel_path) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(60));
    proxypb::AttachRequest req;
    req.set_sandbox(sandbox);
    req.set_channel_path(channel_path);
    proxypb::AttachResponse resp;
    return PeerCallError("proxyd", at_, "attach the sandbox's egress",
                         Stub()->Attach(&ctx, req, &resp));
  }

  absl::Status Detach(const std::string& sandbox) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    proxypb::DetachRequest req;
    req.set_sandbox(sandbox);
    proxypb::DetachResponse resp;
    grpc::Status s = Stub()->Detach(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) return absl::OkStatus();
    return PeerCallError("proxyd", at_, "detach the sandbox's egress", s);
  }

 private:
  std::unique_ptr<proxypb::Proxy::Stub> Stub() const {
    return proxypb::Proxy::NewStub(at_.Dial());
  }
  Peer at_;
};

class GrpcSecrets : public SecretsPeer {
 public:
  explicit GrpcSecrets(Peer at) : at_(at), kept_(std::move(at)) {}

  // On every exec: over the kept channel (a read, so retried once on a new
  // one when the kept one was broken).
  absl::StatusOr<std::map<std::string, std::string>> Sentinels(
      const std::string& sandbox, bool without_globals, bool registry_credentials) override {
    secretspb::SentinelsRequest req;
    req.set_sandbox(sandbox);
    req.set_without_globals(without_globals);
    req.set_registry_credentials(registry_credentials);
    secretspb::SentinelsResponse resp;
    grpc::Status s;
    for (int attempt = 0; attempt < 2; ++attempt) {
      grpc::ClientContext ctx;
      DeadlineAfter(ctx, seconds(5));
      std::shared_ptr<grpc::Channel> channel = kept_.Get();
      s = secretspb::Secrets::NewStub(channel)->Sentinels(&ctx, req, &resp);
      if (s.error_code() != grpc::StatusCode::UNAVAILABLE) break;
      kept_.Drop(channel);
    }
    if (absl::Status e =
            PeerCallError("secretsd", at_, "give the sandbox's credential variables", s);
        !e.ok()) {
      return e;
    }
    return std::map<std::string, std::string>(resp.env().begin(), resp.env().end());
  }

  absl::Status Forget(const std::string& sandbox, bool keep_secrets) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    secretspb::ForgetRequest req;
    req.set_sandbox(sandbox);
    req.set_keep_secrets(keep_secrets);
    secretspb::ForgetResponse resp;
    return PeerCallError("secretsd", at_,
                         keep_secrets ? "drop the sandbox's registration"
                                      : "forget the sandbox's secrets",
                         Stub()->Forget(&ctx, req, &resp));
  }

  absl::StatusOr<secretspb::BindKitResponse> BindKit(
      const secretspb::BindKitRequest& req) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    secretspb::BindKitResponse resp;
    if (absl::Status e = PeerCallError("secretsd", at_, "bind the kits' credentials",
                                       Stub()->BindKit(&ctx, req, &resp));
        !e.ok()) {
      return e;
    }
    return resp;
  }

 private:
  std::unique_ptr<secretspb::Secrets::Stub> Stub() const {
    return secretspb::Secrets::NewStub(at_.Dial());
  }
  Peer at_;
  KeptChannel kept_;
};

class GrpcPolicy : public PolicyPeer {
 public:
  explicit GrpcPolicy(Peer at) : at_(std::move(at)) {}

  absl::StatusOr<policypb::ResolveResponse> Resolve(
      const policypb::ResolveRequest& req) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(60));
    policypb::ResolveResponse resp;
    if (absl::Status e =
            PeerCallError("policyd", at_, "resolve the kits", Stub()->Resolve(&ctx, req, &resp));
        !e.ok()) {
      return e;
    }
    return resp;
  }

  absl::Status ForgetKits(const std::string& sandbox) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    policypb::ForgetKitsRequest req;
    req.set_sandbox(sandbox);
    policypb::ForgetKitsResponse resp;
    return PeerCallError("policyd", at_, "drop the sandbox's kit grant",
                         Stub()->ForgetKits(&ctx, req, &resp));
  }

  absl::Status ForgetSandboxRules(const std::string& sandbox) override {
    auto stub = Stub();
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    policypb::ListRulesRequest req;
    req.set_sandbox(sandbox);
    policypb::ListRulesResponse rules;
    constexpr absl::string_view kAction = "drop the sandbox's own rules";
    if (absl::Status e = PeerCallError("policyd", at_, kAction, stub->ListRules(&ctx, req, &rules));
        !e.ok()) {
      return e;
    }
    for (const auto& r : rules.rules()) {
      if (r.sandbox() != sandbox) continue;
      grpc::ClientContext rm_ctx;
      DeadlineAfter(rm_ctx, seconds(10));
      policypb::RemoveRulesRequest rm;
      rm.set_id(r.id());
      policypb::RemoveRulesResponse removed;
      grpc::Status s = stub->RemoveRules(&rm_ctx, rm, &removed);
      // Gone since it was listed: what was asked for holds.
      if (s.error_code() == grpc::StatusCode::NOT_FOUND) continue;
      if (absl::Status e = PeerCallError("policyd", at_, kAction, s); !e.ok()) return e;
    }
    return absl::OkStatus();
  }

  absl::Status SetKitPhase(const std::string& sandbox, const std::string& phase) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    policypb::SetKitPhaseRequest req;
    req.set_sandbox(sandbox);
    req.set_phase(phase);
    policypb::SetKitPhaseResponse resp;
    return PeerCallError("policyd", at_,
                         absl::StrCat("put the kits' ", phase, " network rules in force"),
                         Stub()->SetKitPhase(&ctx, req, &resp));
  }

  absl::StatusOr<policypb::ListHoldsResponse> ListHolds(const std::string& sandbox) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    policypb::ListHoldsRequest req;
    req.set_sandbox(sandbox);
    policypb::ListHoldsResponse resp;
    if (absl::Status e = PeerCallError("policyd", at_, "list the held updates",
                                       Stub()->ListHolds(&ctx, req, &resp));
        !e.ok()) {
      return e;
    }
    return resp;
  }

  absl::StatusOr<policypb::ApproveResponse> Approve(const std::string& hold_id) override {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(30));
    policypb::ApproveRequest req;
    req.set_hold_id(hold_id);
    policypb::ApproveResponse resp;
    if (absl::Status e = PeerCallError("policyd", at_, "approve the held update",
                                       Stub()->Approve(&ctx, req, &resp));
        !e.ok()) {
      return e;
    }
    return resp;
  }

 private:
  std::unique_ptr<policypb::Policy::Stub> Stub() const {
    return policypb::Policy::NewStub(at_.Dial());
  }
  Peer at_;
};

}  // namespace

absl::Status PeerCallError(absl::string_view daemon, const Peer& at, absl::string_view action,
                           const grpc::Status& s) {
  using grpc::StatusCode;
  switch (s.error_code()) {
    case StatusCode::OK:
      return absl::OkStatus();
    case StatusCode::UNAVAILABLE:
    case StatusCode::DEADLINE_EXCEEDED:
      return absl::UnavailableError(absl::StrCat(
          daemon, " at ", at.address(), " did not ", action, " (", s.error_message(), "); ",
          at.is_tcp() ? absl::StrCat("check that it runs and answers at ", at.address(),
                                     " and that the TLS files match")
                      : std::string("start it with `airlock daemon start`")));
    case StatusCode::INVALID_ARGUMENT:
    case StatusCode::FAILED_PRECONDITION:
    case StatusCode::NOT_FOUND:
    case StatusCode::ALREADY_EXISTS:
    case StatusCode::OUT_OF_RANGE:
    case StatusCode::RESOURCE_EXHAUSTED:
      return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                          absl::StrCat(daemon, " refused to ", action, ": ", s.error_message()));
    case StatusCode::PERMISSION_DENIED:
    case StatusCode::UNAUTHENTICATED:
      // The peer refused vmmd, not vmmd's caller: passed on as they are,
      // a REST client would read its own token as bad (403/401).
      return absl::FailedPreconditionError(absl::StrCat(
          daemon, " at ", at.address(), " refused vmmd's call to ", action, ": ",
          s.error_message(), " (check the daemons' identities: --peer-tls-cert, --*-exe)"));
    case StatusCode::UNIMPLEMENTED:
      return absl::FailedPreconditionError(absl::StrCat(
          daemon, " at ", at.address(), " cannot ", action, " (", s.error_message(),
          "): it is another version of Airlock than this vmmd; run the same version of both"));
    default:
      return absl::InternalError(
          absl::StrCat(daemon, " failed to ", action, ": ", s.error_message()));
  }
}

PeerClients GrpcPeerClients(const Peer& gitd, const Peer& proxyd, const Peer& secretsd,
                            const Peer& policyd) {
  PeerClients c;
  c.git = std::make_shared<GrpcGit>(gitd);
  c.proxy = std::make_shared<GrpcProxy>(proxyd);
  c.secrets = std::make_shared<GrpcSecrets>(secretsd);
  c.policy = std::make_shared<GrpcPolicy>(policyd);
  return c;
}

}  // namespace airlock::vmmd
