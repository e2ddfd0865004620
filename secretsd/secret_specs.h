// A secret's or a Kit binding's request as secretsd takes it: every check
// that needs no database, as pure functions the store calls before it
// changes anything (secret_store.h), and the normalized hosts and domains
// it keeps.
#ifndef AIRLOCK_SECRETSD_SECRET_SPECS_H_
#define AIRLOCK_SECRETSD_SECRET_SPECS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "secretsd/secret_store.h"

namespace airlock::secretsd {

// ValidateSpec checks everything of `spec` that needs no database, and
// returns the normalized hosts of a custom secret.
absl::StatusOr<std::vector<std::string>> ValidateSpec(const SecretSpec& spec);

// NormalizeRegistryHost lowercases a registry's "host[:port]" and checks
// it: a DNS name or IPv4 address (labels of a-z, 0-9 and '-', no trailing
// '.'), then optionally ':' and a port from 1 to 65535 in decimal without
// a leading zero, so that one registry has one id. Errors name `field`.
absl::StatusOr<std::string> NormalizeRegistryHost(absl::string_view field, absl::string_view host);

// ValidateRegistrySpec checks a registry secret's spec and returns its
// normalized host.
absl::StatusOr<std::string> ValidateRegistrySpec(const SecretSpec& spec);

// ValidateBindings checks everything of a BindKit request, before anything
// is changed, and returns the bindings with their domains normalized.
absl::StatusOr<std::vector<KitBinding>> ValidateBindings(const std::string& sandbox,
                                                         const std::vector<KitBinding>& bindings);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_SECRET_SPECS_H_
