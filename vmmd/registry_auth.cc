#include "vmmd/registry_auth.h"

#include <chrono>

#include "absl/status/status.h"
#include "common/client.h"
#include "common/log.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::vmmd {
namespace {

// What an operator can do about a failed call, or "" when nothing obvious.
std::string Hint(grpc::StatusCode code) {
  switch (code) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return "start secretsd with `airlock daemon start`";
    case grpc::StatusCode::PERMISSION_DENIED:
      return "secretsd does not take this process for vmmd; see its --vmmd-exe";
    default:
      return "";
  }
}

}  // namespace

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
    AIRLOCK_LOG_WARN(
        "no registry credential from secretsd; pulling anonymously",
        {{"host", host},
         {"secretsd", secretsd.address()},
         {"code", absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code()))},
         {"error", s.error_message()},
         {"hint", Hint(s.error_code())}});
    return {};
  }
  return RegistryCredentials{resp.username(), resp.password()};
}

}  // namespace airlock::vmmd
