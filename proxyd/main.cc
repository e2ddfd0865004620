// proxyd: all guest egress: forward proxy, transparent TCP, DNS, TLS interception, credential injection and the decision log.
//
// This release serves the daemon runtime (health, reflection, info) and the
// airlock::proxy::v1 API, whose methods answer UNIMPLEMENTED until they are built.
#include "common/daemon_runtime.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

int main(int argc, char** argv) {
  airlock::proxy::v1::Proxy::Service service;
  return airlock::DaemonMain("proxyd", argc, argv, {}, [&](airlock::DaemonRuntime& rt) {
    return rt.Serve({&service});
  });
}
