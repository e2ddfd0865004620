// Where proxyd may place a registry credential for a sandbox's Docker
// Engine: on requests to the registry's own host and port, and, for Docker
// Hub (stored as "docker.io"), to its API and token service hosts, where
// the engine's pulls and token requests go. A pure decision on names;
// whether the sandbox gets registry credentials at all (it was created
// with Docker) is the store's, and that they go only inside verified TLS
// is proxyd's.
#ifndef AIRLOCK_SECRETSD_REGISTRY_PLACEMENT_H_
#define AIRLOCK_SECRETSD_REGISTRY_PLACEMENT_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace airlock::secretsd {

// RegistryCredentialApplies says the credential of `registry` (normalized
// "host[:port]", port 443 when absent) goes to a request for `host`
// (lowercase) on `port` (0 counts as 443). Exact names only: no wildcard,
// no parent domain.
bool RegistryCredentialApplies(absl::string_view registry, absl::string_view host,
                               uint16_t port);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_REGISTRY_PLACEMENT_H_
