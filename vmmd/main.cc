// vmmd: sandbox lifecycle, hypervisor processes, guest images and the agent channel.
//
// This release serves the daemon runtime (health, reflection, info) and the
// airlock::vmm::v1 API, whose methods answer UNIMPLEMENTED until they are built.
#include "common/daemon_runtime.h"
#include "protos/vmm/v1/vmm.grpc.pb.h"

int main(int argc, char** argv) {
  airlock::vmm::v1::Vmm::Service service;
  return airlock::DaemonMain("vmmd", argc, argv, {}, [&](airlock::DaemonRuntime& rt) {
    return rt.Serve({&service});
  });
}
