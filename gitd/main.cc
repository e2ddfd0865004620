// gitd: clone-mode workspaces and the review of risky changes. This file
// only wires the service to the daemon runtime.
#include "common/daemon_runtime.h"
#include "gitd/git_service.h"

int main(int argc, char** argv) {
  return airlock::DaemonMain("gitd", argc, argv, {}, [](airlock::DaemonRuntime& rt) {
    airlock::gitd::GitService service(&rt.state());
    if (absl::Status s = service.Init(); !s.ok()) return s;
    return rt.Serve({&service});
  });
}
