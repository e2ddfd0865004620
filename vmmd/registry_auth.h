// Registry credentials for vmmd's host-side image pulls, asked of secretsd
// (ResolveRegistry), which hands them to vmmd only.
#ifndef AIRLOCK_VMMD_REGISTRY_AUTH_H_
#define AIRLOCK_VMMD_REGISTRY_AUTH_H_

#include <string>

#include "common/peer.h"
#include "vmmd/store/registry_client.h"

namespace airlock::vmmd {

// SecretsRegistryCredentials asks `secretsd` for the credential stored for the registry `host`
// ("ghcr.io", "localhost:5000"), waiting at most 10 s. Returns empty
// credentials (an anonymous pull) when none is stored, and also when
// secretsd cannot answer or refuses, after logging a warning that names
// the host and the error, never a value. Fits RegistryOptions::credentials.
RegistryCredentials SecretsRegistryCredentials(const Peer& secretsd,
                                               const std::string& host);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_REGISTRY_AUTH_H_
