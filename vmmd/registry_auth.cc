#include "vmmd/registry_auth.h"

#include <chrono>

#include "absl/status/status.h"
#include "common/client.h"
#include "common/log.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "vmmd/peer_clients.h"

namespace airlock::vmmd {

RegistryCredentials SecretsRegistryCredentials(const Peer& secretsd,
                                               const std::string& host) {
  namespace pb = airlock::secrets::v1;
  auto secrets = pb::Secrets::NewStub(secretsd.Dial());
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(10));
  pb::ResolveRegistryRequest req;
  req.set_host(host);
  pb::RegistryCredential resp;
  grpc::Status s = secrets->ResolveRegistry(&ctx, req, &resp);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) return {};
  if (!s.ok()) {
    // The pull goes on anonymously: a public image still comes, and a
    // private one fails with the registry's own UNAUTHENTICATED.
    // Read as every other secretsd call reads (peer_clients.h): a local
    // socket's hint differs from a remote one's, a refusal says no "start".
    absl::Status why = PeerCallError("secretsd", secretsd,
                                     "give the credential for registry " + host, s);
    AIRLOCK_LOG_WARN("no registry credential from secretsd; pulling anonymously",
                     {{"host", host},
                      {"code", absl::StatusCodeToString(why.code())},
                      {"error", std::string(why.message())}});
    return {};
  }
  return RegistryCredentials{resp.username(), resp.password()};
}

}  // namespace airlock::vmmd
