// Parsing of published-port specs as docker writes them:
// [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/tcp], with [IPv6] in brackets.
#ifndef AIRLOCK_CLI_PORT_SPEC_H_
#define AIRLOCK_CLI_PORT_SPEC_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::cli {

// ParsePortSpec reads one spec; an omitted or empty host port means "pick a
// free one", an omitted address means 127.0.0.1. Errors quote the spec.
absl::StatusOr<airlock::vmm::v1::PortMapping> ParsePortSpec(absl::string_view spec);

// FormatPortMapping writes "127.0.0.1:8080->80/tcp".
std::string FormatPortMapping(const airlock::vmm::v1::PortMapping& m);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_PORT_SPEC_H_
