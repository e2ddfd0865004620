// gitd: clone-mode workspaces and the sandbox-<name> remote on the host repo.
//
// This release serves the daemon runtime (health, reflection, info) and the
// airlock::git::v1 API, whose methods answer UNIMPLEMENTED until they are built.
#include "common/daemon_runtime.h"
#include "protos/git/v1/git.grpc.pb.h"

int main(int argc, char** argv) {
  airlock::git::v1::Git::Service service;
  return airlock::DaemonMain("gitd", argc, argv, {}, [&](airlock::DaemonRuntime& rt) {
    return rt.Serve({&service});
  });
}
