// secretsd: the encrypted secret store; resolves plaintext for proxyd only.
//
// This release serves the daemon runtime (health, reflection, info) and the
// airlock::secrets::v1 API, whose methods answer UNIMPLEMENTED until they are built.
#include "common/daemon_runtime.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

int main(int argc, char** argv) {
  airlock::secrets::v1::Secrets::Service service;
  return airlock::DaemonMain("secretsd", argc, argv, {}, [&](airlock::DaemonRuntime& rt) {
    return rt.Serve({&service});
  });
}
