// secretsd's gRPC surface (airlock.secrets.v1.Secrets): translates between
// the protos and SecretStore, and lets only proxyd reach Resolve and only
// vmmd reach ResolveRegistry.
#ifndef AIRLOCK_SECRETSD_SECRETS_SERVICE_H_
#define AIRLOCK_SECRETSD_SECRETS_SERVICE_H_

#include <chrono>
#include <mutex>
#include <set>

#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "secretsd/resolver_auth.h"
#include "secretsd/revision_board.h"
#include "secretsd/secret_store.h"

namespace airlock::secretsd {

class SecretsService final : public airlock::secrets::v1::Secrets::Service {
 public:
  // SecretsService serves `store`; `policy` says who proxyd and vmmd are.
  // `lease` is how long a watcher trusts an answered revision
  // (RevisionBoard).
  SecretsService(SecretStore* store, ResolverPolicy policy,
                 std::chrono::milliseconds lease = kDefaultLease);
  static constexpr std::chrono::milliseconds kDefaultLease{1000};

  // EndStreams ends every WatchRevisions stream now (the daemon is
  // stopping; the watchers then resolve without a cache until they reach
  // a secretsd again).
  void EndStreams();

  grpc::Status Set(grpc::ServerContext*, const airlock::secrets::v1::SetRequest*,
                   airlock::secrets::v1::SecretInfo*) override;
  grpc::Status List(grpc::ServerContext*, const airlock::secrets::v1::ListRequest*,
                    airlock::secrets::v1::ListResponse*) override;
  grpc::Status Delete(grpc::ServerContext*, const airlock::secrets::v1::DeleteRequest*,
                      airlock::secrets::v1::DeleteResponse*) override;
  grpc::Status Sentinels(grpc::ServerContext*, const airlock::secrets::v1::SentinelsRequest*,
                         airlock::secrets::v1::SentinelsResponse*) override;
  // Resolve answers PERMISSION_DENIED "only proxyd may resolve secrets"
  // unless AuthorizeResolver accepts the caller's transport identity.
  grpc::Status Resolve(grpc::ServerContext*, const airlock::secrets::v1::ResolveRequest*,
                       airlock::secrets::v1::ResolveResponse*) override;
  // WatchRevisions answers PERMISSION_DENIED as Resolve does; otherwise it
  // runs until the watcher or EndStreams ends it.
  grpc::Status WatchRevisions(grpc::ServerContext*,
                              grpc::ServerReaderWriter<airlock::secrets::v1::Revision,
                                                       airlock::secrets::v1::WatchRequest>*) override;
  // ResolveRegistry answers PERMISSION_DENIED "only vmmd may resolve
  // registry credentials" unless AuthorizeRegistryResolver accepts the
  // caller's transport identity.
  grpc::Status ResolveRegistry(grpc::ServerContext*,
                               const airlock::secrets::v1::ResolveRegistryRequest*,
                               airlock::secrets::v1::RegistryCredential*) override;
  // Forget deletes a removed sandbox's own secrets and its registration
  // (with keep_secrets, only the registration and its Kit bindings).
  grpc::Status Forget(grpc::ServerContext*, const airlock::secrets::v1::ForgetRequest*,
                      airlock::secrets::v1::ForgetResponse*) override;
  grpc::Status Services(grpc::ServerContext*, const airlock::secrets::v1::ServicesRequest*,
                        airlock::secrets::v1::ServicesResponse*) override;
  // BindKit replaces a sandbox's Kit credential bindings
  // (SecretStore::BindKit, suppressing ones included) and reports the
  // services left without a secret.
  grpc::Status BindKit(grpc::ServerContext*, const airlock::secrets::v1::BindKitRequest*,
                       airlock::secrets::v1::BindKitResponse*) override;

 private:
  // Changed tells the watchers of the store's change (RevisionBoard), so
  // that a change's caller hears of it only once proxyd does; nothing
  // when the store's revision is still `before` (a failed call, or a
  // Sentinels of a sandbox already registered).
  void Changed(uint64_t before);

  SecretStore* store_;
  const ResolverPolicy policy_;
  // Changes with every process: a watcher that reconnects to a restarted
  // secretsd drops what it cached.
  const uint64_t instance_;
  RevisionBoard board_;
  std::mutex streams_mu_;
  std::set<grpc::ServerContext*> streams_;
  bool ending_ = false;
};

// IdentifyCaller is what the transport of `ctx` proves about its caller:
// the Unix peer credentials the daemon runtime recorded, or the verified
// client certificate of an mTLS connection.
CallerIdentity IdentifyCaller(const grpc::ServerContext& ctx);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_SECRETS_SERVICE_H_
