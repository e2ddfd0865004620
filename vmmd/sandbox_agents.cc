// SandboxManager's built-in agents: the first sandbox of an agent version
// installs it in a sandbox of its own (the agent kit only, its install
// rules, nothing of the user's shared), which is then stopped and saved as
// the image agents/AGENT:VERSION; every sandbox of that version starts from
// that image.
#include <chrono>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "vmmd/agent_image.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

std::shared_ptr<std::mutex> SandboxManager::InstallLock(const std::string& tag) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& m = installs_[tag];
  if (m == nullptr) m = std::make_shared<std::mutex>();
  return m;
}

absl::StatusOr<vmm::ImageRef> SandboxManager::InstallAgentImage(const std::string& name) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  const std::string tag = sb.spec().template_();
  const std::string agent = sb.spec().agent();
  const std::string what = absl::StrCat(agent, " ", AgentVersionOf(tag));
  auto report = [&](const std::string& step) {
    SetProgress(name, absl::StrCat("installing ", what, " (first run): ", step));
  };
  // Watch calls its `cancelled` with mu_ held; cancelled() takes it.
  auto cancelled_locked = [&] {
    auto it = records_.find(name);
    return stopping_ || it == records_.end() || it->second.cancel;
  };
  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return cancelled_locked();
  };
  // One install per version at a time; who waited finds it done.
  auto install_lock = InstallLock(tag);
  std::lock_guard<std::mutex> installing(*install_lock);
  // Whoever held the lock may have installed it, or vmmd may be stopping.
  if (auto img = images_->store()->FindName(tag); img.ok()) return ImageCatalog::RefOf(*img, "");
  if (cancelled()) return absl::CancelledError("cancelled while installing the agent");

  vmm::SandboxSpec spec;
  std::random_device rd;
  std::string builder =
      absl::StrCat("install-", agent, "-", absl::Hex(rd() & 0xffffff, absl::kZeroPad6));
  spec.set_name(builder);
  spec.set_agent(agent);
  // The install needs no Docker Engine (the image keeps the packages).
  spec.set_docker(vmm::DOCKER_OFF);
  spec.set_template_(sb.kit_plan().image().empty() ? "agent" : sb.kit_plan().image());
  if (auto it = sb.spec().kit_args().find("version"); it != sb.spec().kit_args().end()) {
    (*spec.mutable_kit_args())["version"] = it->second;
  }
  report(absl::StrCat("starting ", builder));
  auto created = CreateSandbox(spec, true, tag);
  if (!created.ok()) {
    return absl::Status(created.status().code(),
                        absl::StrCat("cannot start the sandbox that installs ", what, ": ",
                                     created.status().message()));
  }
  struct RemoveBuilder {
    SandboxManager* m;
    std::string name;
    ~RemoveBuilder() {
      if (absl::Status s = m->Remove(name, true); !s.ok()) {
        AIRLOCK_LOG_ERROR("cannot remove the agent install's sandbox; `airlock rm -f` it",
                          {{"sandbox", name}, {"error", std::string(s.message())}});
      }
    }
  } remove_builder{this, builder};

  // RUNNING means its install hooks ran, under the install-phase rules.
  vmm::Sandbox last;
  // How it ended is read from `last`; a Watch that fails (the sandbox went
  // away) leaves it short of RUNNING, which is reported below.
  (void)Watch(
      builder,
      [&](const vmm::Sandbox& b, const std::string& progress) {
        last = b;
        if (!progress.empty()) report(progress);
        return b.state() != vmm::RUNNING && b.state() != vmm::FAILED &&
               b.state() != vmm::STOPPED;
      },
      cancelled_locked);
  if (cancelled()) return absl::CancelledError("cancelled while installing the agent");
  if (last.state() != vmm::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "installing ", what, " failed: ",
        last.failure().empty() ? "the install sandbox stopped" : last.failure()));
  }
  report("stopping the install sandbox");
  // The boot may still own the sandbox for a moment after RUNNING.
  auto deadline = steady_clock::now() + seconds(30);
  absl::StatusOr<vmm::Sandbox> stopped = Stop(builder, 60);
  while (!stopped.ok() && stopped.status().code() == absl::StatusCode::kFailedPrecondition &&
         steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(100));
    stopped = Stop(builder, 60);
  }
  if (!stopped.ok()) return stopped.status();
  vmm::SaveTemplateRequest save;
  save.set_sandbox(builder);
  save.set_tag(tag);
  save.set_description(absl::StrCat(what, ", installed by its built-in kit"));
  auto saved = SaveTemplate(save, [&](const std::string& step, uint64_t, uint64_t) {
    report(step);
  });
  if (!saved.ok()) {
    return absl::Status(saved.status().code(), absl::StrCat("cannot save ", what, " as ", tag,
                                                            ": ", saved.status().message()));
  }
  AIRLOCK_LOG_INFO("installed an agent", {{"agent", agent}, {"image", tag}});
  auto img = images_->Resolve(tag);
  if (!img.ok()) return img.status();
  return ImageCatalog::RefOf(*img, "");
}

}  // namespace airlock::vmmd
