// Pulling images from a registry over the OCI distribution protocol, from
// the host: manifests (an index resolved to linux/amd64), the config and
// the layers, each verified against its digest while it streams into the
// store. Authentication follows the registry's WWW-Authenticate answer:
// a Bearer token from its token service (anonymous, or with basic
// credentials) or Basic directly. Redirects to blob storage are followed,
// without the registry's Authorization header.
#ifndef AIRLOCK_VMMD_STORE_REGISTRY_CLIENT_H_
#define AIRLOCK_VMMD_STORE_REGISTRY_CLIENT_H_

#include <functional>
#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "vmmd/store/image_store.h"
#include "vmmd/store/reference.h"

namespace airlock::vmmd {

// RegistryCredentials are basic credentials for one registry host.
struct RegistryCredentials {
  std::string username, password;
  bool empty() const { return username.empty() && password.empty(); }
};

// RegistryOptions is the host's registry configuration (vmmd flags).
struct RegistryOptions {
  // Where "docker.io" references are fetched: "registry-1.docker.io", or a
  // mirror "host[:port]".
  std::string docker_io_endpoint = "registry-1.docker.io";
  // Directory of per-registry CA files: <dir>/<host[:port]>/ca.crt, as
  // docker's certs.d. Empty: the system trust store only.
  std::string certs_dir;
  // Registries reached over plain HTTP ("host:port").
  std::set<std::string> insecure;
  // Credentials for a registry host, or empty ones (anonymous).
  std::function<RegistryCredentials(const std::string& host)> credentials;
};

// Pull fetches `ref`'s blobs into `store` (the caller holds
// store->Writing()) and returns the digest of its linux/amd64 manifest;
// naming it is the caller's. Errors: NOT_FOUND for an unknown repository
// or tag, UNAUTHENTICATED when the registry wants (other) credentials,
// UNAVAILABLE when it cannot be reached, INVALID_ARGUMENT for content that
// does not match its digest.
absl::StatusOr<std::string> Pull(const Reference& ref, const RegistryOptions& options,
                                 ImageStore* store, const Progress& progress);

// ParseAuthenticate reads a WWW-Authenticate header: the scheme
// ("bearer"/"basic", lowercase) and its parameters.
struct AuthChallenge {
  std::string scheme;
  std::string realm, service, scope;
};
AuthChallenge ParseAuthenticate(const std::string& header);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_REGISTRY_CLIENT_H_
