// How a vmmd sandbox looks through the REST API: its resource name
// ("sandboxes/<uid>", the uid being the Airlock name), the coarse status,
// resources, ports, kits, the data-plane endpoint and a strong ETag that
// changes with every visible change. Pure functions, unit-tested.
#ifndef AIRLOCK_APID_SANDBOX_VIEW_H_
#define AIRLOCK_APID_SANDBOX_VIEW_H_

#include <string>

#include "absl/strings/string_view.h"
#include "protos/api/v1/wire.pb.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::apid {

// The data-plane operations every sandbox endpoint serves (its
// capabilities), by operationId.
const std::vector<std::string>& EndpointCapabilities();

// EndpointUri is where sandbox `uid`'s data plane is served under `base`.
std::string EndpointUri(const std::string& base, const std::string& uid);

// StatusName is the API status of a vmmd state ("running").
std::string StatusName(airlock::vmm::v1::SandboxState state);

// ToWire renders `sb`; `deleting` marks a sandbox whose removal apid has
// accepted and not finished. The ETag is filled in.
airlock::api::wire::v1::Sandbox ToWire(const airlock::vmm::v1::Sandbox& sb,
                                       const std::string& base, bool deleting);

// EtagOf is the quoted strong ETag of a rendered sandbox (computed over
// everything but the etag field itself).
std::string EtagOf(const airlock::api::wire::v1::Sandbox& view);

// EtagMatches applies If-None-Match's weak comparison: "*", a list, W/.
bool EtagMatches(absl::string_view header, const std::string& etag);

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_SANDBOX_VIEW_H_
