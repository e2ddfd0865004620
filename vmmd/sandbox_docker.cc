// SandboxManager's Docker Engine: at each boot of a sandbox with Docker,
// after its egress is attached and before its kits run (their hooks may
// use docker), the docker disk is mounted and dockerd started; the sandbox
// is running only once the engine answers.
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "vmmd/docker_setup.h"
#include "vmmd/guest_run.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace {

// Under TCG dockerd takes seconds to come up; this is its ceiling.
constexpr int kDockerStartTimeoutS = 120;

absl::Status Step(std::shared_ptr<grpc::Channel> agent, const GuestCommand& cmd,
                  const std::string& what) {
  auto r = GuestRun(agent, cmd);
  if (!r.ok()) return absl::UnavailableError(absl::StrCat(what, ": ", r.status().message()));
  if (r->first != 0) {
    std::string out(absl::StripAsciiWhitespace(r->second));
    return absl::FailedPreconditionError(absl::StrCat(what, ": ", out));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SandboxManager::StartDocker(const std::string& name,
                                         std::shared_ptr<grpc::Channel> agent) {
  (void)name;
  if (absl::Status s = Step(agent,
                            {{"sh", "-c", kDockerPrepareScript, "docker-prepare", kDockerDiskSerial},
                             "root"},
                            "cannot prepare the Docker Engine");
      !s.ok()) {
    return s;
  }
  GuestCommand dockerd{DockerdCommand(), "root"};
  dockerd.detach = true;
  if (absl::Status s = Step(agent, dockerd, "cannot start dockerd"); !s.ok()) return s;
  return Step(agent, {{"sh", "-c", DockerWaitScript(kDockerStartTimeoutS)}, "root"},
              "the Docker Engine did not start");
}

}  // namespace airlock::vmmd
