#include "secretsd/registry_placement.h"

#include "absl/strings/numbers.h"

namespace airlock::secretsd {

bool RegistryCredentialApplies(absl::string_view registry, absl::string_view host,
                               uint16_t port) {
  if (port == 0) port = 443;
  absl::string_view rhost = registry;
  uint32_t rport = 443;
  if (size_t colon = registry.rfind(':'); colon != absl::string_view::npos) {
    rhost = registry.substr(0, colon);
    if (!absl::SimpleAtoi(registry.substr(colon + 1), &rport)) return false;
  }
  if (rhost.empty() || host.empty()) return false;
  if (rport == 443 && (rhost == "docker.io" || rhost == "index.docker.io" ||
                       rhost == "registry-1.docker.io")) {
    return port == 443 && (host == "registry-1.docker.io" || host == "auth.docker.io");
  }
  return host == rhost && port == rport;
}

}  // namespace airlock::secretsd
