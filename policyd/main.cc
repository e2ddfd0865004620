// policyd: network rules, presets, kits, the grant surface and the widening gate.
//
// This release serves the daemon runtime (health, reflection, info) and the
// airlock::policy::v1 API, whose methods answer UNIMPLEMENTED until they are built.
#include "common/daemon_runtime.h"
#include "protos/policy/v1/policy.grpc.pb.h"

int main(int argc, char** argv) {
  airlock::policy::v1::Policy::Service service;
  return airlock::DaemonMain("policyd", argc, argv, {}, [&](airlock::DaemonRuntime& rt) {
    return rt.Serve({&service});
  });
}
