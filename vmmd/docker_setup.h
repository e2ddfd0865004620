// Docker in a sandbox: which sandboxes get a Docker Engine (on for the
// built-in agents, off for the plain shell, as the spec says otherwise),
// the disk its /var/lib/docker lives on (a sparse ext4 image vmmd makes on
// the host, one per sandbox, beside its root disk), and the guest commands
// that start dockerd before the sandbox is running.
//
// Where it stops: dockerd is the guest's. Its containers' traffic is
// captured by the guest's egress rules (guest/egress.nft) and decided by
// proxyd like any other; nothing here opens a path to the host's Docker.
#ifndef AIRLOCK_VMMD_DOCKER_SETUP_H_
#define AIRLOCK_VMMD_DOCKER_SETUP_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "protos/vmm/v1/vmm.pb.h"
#include "vmmd/hypervisor.h"

namespace airlock::vmmd {

inline constexpr uint64_t kDefaultDockerDiskMib = 10240;
inline constexpr uint64_t kMinDockerDiskMib = 512;
inline constexpr uint64_t kMaxDockerDiskMib = uint64_t{16} << 20;  // 16 TiB
// The template a plain --docker sandbox starts from.
inline constexpr char kDockerTemplate[] = "docker";

// ResolveDocker decides DOCKER_DEFAULT (on for a built-in agent, off for
// the shell) and fills the disk size (0: the default; without Docker it
// is recorded as 0). INVALID_ARGUMENT, naming the flag, for a size below
// 512 MiB or above 16 TiB, or a size given with Docker off.
absl::Status ResolveDocker(airlock::vmm::v1::SandboxSpec* spec, bool builtin_agent);

// HasDocker says the resolved spec runs a Docker Engine.
inline bool HasDocker(const airlock::vmm::v1::SandboxSpec& spec) {
  return spec.docker() == airlock::vmm::v1::DOCKER_ON;
}

// MakeDockerDisk creates `path`: a sparse file of `mib` MiB holding an
// empty ext4 file system (mkfs.ext4 on the host, into a temporary file
// renamed when done). An existing `path` is kept as it is: the engine's
// images and volumes survive stop and start.
absl::Status MakeDockerDisk(const std::string& path, uint64_t mib);

// The guest's side, run as root through the agent in this order:
// DockerPrepareScript mounts the disk at /var/lib/docker and lets the
// agent user reach the socket (exit 3 with a sentence when the image has
// no dockerd); DockerdCommand starts the engine, detached, with the proxy
// settings of the guest's egress and its log in /var/log/dockerd.log;
// DockerWaitScript waits (at most `timeout_s`) for the engine to answer
// and otherwise fails with the log's tail. All three keep an engine that
// already runs, so they can run again on a live guest.
extern const char kDockerPrepareScript[];
std::vector<std::string> DockerdCommand();
std::string DockerWaitScript(int timeout_s);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_DOCKER_SETUP_H_
