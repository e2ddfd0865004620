// SandboxManager's clone mode: asking gitd about the host repo, cloning it
// in the guest and starting the guest's git daemon, and the host repo's
// sandbox-<name> remote (published, retried while gitd does not answer,
// answered with "stopped" while the sandbox is).

#include <time.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "vmmd/clone_mode.h"
#include "vmmd/guest_run.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

namespace {

// The first boot clones the source; every boot makes sure the agent user
// has a Git identity and trusts the host-owned source. The clone is made
// aside and moved into place last, so a boot cut short (vmmd killed, the
// VM killed) leaves no half clone that the next boot would take for done.
// $1 = branch ("" for the source's HEAD), then pairs of remote name and URL.
// Under TCG every process the guest starts costs about 0.1 s, so a guest
// with no Git configuration of the agent user's yet (a new sandbox) gets
// it written by the shell, and the clone names its remote at once.
constexpr char kCloneSetup[] = R"(set -e
if [ ! -e "$HOME/.gitconfig" ] && [ ! -e "${XDG_CONFIG_HOME:-$HOME/.config}/git/config" ]; then
  printf '[safe]\n\tdirectory = *\n[user]\n\tname = Airlock agent\n\temail = agent@sandbox\n' \
    > "$HOME/.gitconfig"
else
  git config --global --get safe.directory >/dev/null || git config --global --add safe.directory '*'
  git config --global --get user.name >/dev/null || git config --global user.name "Airlock agent"
  git config --global --get user.email >/dev/null || git config --global user.email agent@sandbox
fi
W=$HOME/workspace
if [ ! -e "$W/.git" ]; then
  P=$HOME/.workspace.partial
  if [ -e "$P" ]; then rm -rf "$P"; fi
  if [ -n "$1" ]; then
    git clone -q --no-hardlinks --origin source --branch "$1" /run/sandbox/source "$P"
  else
    git clone -q --no-hardlinks --origin source /run/sandbox/source "$P"
  fi
  shift
  while [ $# -ge 2 ]; do git -C "$P" remote add "$1" "$2"; shift 2; done
  if [ -d "$W" ]; then rmdir "$W"; fi
  mv "$P" "$W"
fi
)";

// PktLine encodes one git protocol packet.
std::string PktLine(const std::string& payload) {
  return absl::StrCat(absl::Hex(payload.size() + 4, absl::kZeroPad4), payload);
}

}  // namespace

absl::StatusOr<vmm::CloneInfo> SandboxManager::PrepareClone(const vmm::SandboxSpec& spec) {
  auto resp = peers_.git->PrepareClone(spec.name(), spec.mounts(0).host_path(), spec.branch());
  if (!resp.ok()) return resp.status();
  vmm::CloneInfo info;
  info.set_source_root(resp->source_root());
  info.set_branch(resp->branch());
  for (const auto& [k, v] : resp->remotes()) (*info.mutable_remotes())[k] = v;
  info.set_host_remote(absl::StrCat("sandbox-", spec.name()));
  return info;
}

absl::Status SandboxManager::SetUpClone(const vmm::Sandbox& sb,
                                        std::shared_ptr<grpc::Channel> agent) {
  std::vector<std::string> argv = {"sh", "-c", kCloneSetup, "clone-setup", sb.clone().branch()};
  std::map<std::string, std::string> remotes(sb.clone().remotes().begin(),
                                             sb.clone().remotes().end());
  for (const auto& [name, url] : remotes) {
    argv.push_back(name);
    argv.push_back(url);
  }
  // The git daemon starts first and comes up while the guest clones (it
  // serves the workspace once it is there).
  GuestCommand git_daemon;
  git_daemon.argv = {"git", "daemon", "--reuseaddr", "--listen=127.0.0.1",
                     absl::StrCat("--port=", kGitDaemonPort), "--export-all",
                     "--base-path=/home/agent", "/home/agent/workspace"};
  git_daemon.detach = true;
  auto daemon = GuestRun(agent, git_daemon);
  if (!daemon.ok()) return daemon.status();
  auto setup = GuestRun(agent, {argv});
  if (!setup.ok()) return setup.status();
  if (setup->first != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cloning the source in the guest failed: ", setup->second));
  }
  // RUNNING promises a working remote: wait until the daemon listens.
  auto listening = GuestRun(
      agent, {{"bash", "-c",
               absl::StrCat("for i in {1..200}; do (: <>/dev/tcp/127.0.0.1/", kGitDaemonPort,
                            ") 2>/dev/null && exit 0; sleep 0.05; done; exit 1")}});
  if (!listening.ok()) return listening.status();
  if (listening->first != 0) {
    return absl::FailedPreconditionError("the git daemon in the guest did not start listening");
  }
  return absl::OkStatus();
}

void SandboxManager::PublishClone(const std::string& name) {
  vmm::Sandbox sb;
  bool retrying;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
    retrying = records_[name].publish.pending;
  }
  bool pending = false;
  for (const auto& p : sb.ports()) {
    if (p.sandbox_port() != kGitDaemonPort) continue;
    std::string url = absl::StrCat("git://", p.host_ip(), ":", p.host_port(), "/workspace");
    absl::Status s = peers_.git->Publish(name, url);
    if (s.ok()) continue;
    // Until gitd answers the sandbox runs without the remote and the
    // monitor retries (warning once, not at every try). A refusal is gitd's
    // answer: retrying would not change it.
    bool transient = s.code() == absl::StatusCode::kUnavailable ||
                     s.code() == absl::StatusCode::kDeadlineExceeded;
    if (transient) {
      pending = true;
      if (!retrying) {
        AIRLOCK_LOG_WARN("cannot publish the sandbox remote yet; retrying",
                         {{"sandbox", name}, {"error", std::string(s.message())}});
      }
    } else {
      AIRLOCK_LOG_ERROR("gitd refused the sandbox remote; `git fetch sandbox-NAME` will not work",
                        {{"sandbox", name}, {"error", std::string(s.message())}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return;
  it->second.publish.Ended(!pending, time(nullptr));
}

void SandboxManager::RetryPublish(const std::string& name) {
  {
    // Held through the call so that rm's Unpublish comes after it, never
    // before (a remote published after rm would outlive the sandbox).
    std::lock_guard<std::mutex> publishing(publish_mu_);
    bool go;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(name);
      go = it != records_.end() && !it->second.busy && it->second.publish.pending &&
           it->second.sb.state() == vmm::RUNNING;
    }
    if (go) PublishClone(name);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it != records_.end()) it->second.publish.in_flight = false;
}

void SandboxManager::AnswerStoppedClone(const vmm::Sandbox& sb) {
  if (!sb.spec().clone()) return;
  const std::string& name = sb.spec().name();
  for (const auto& p : sb.spec().ports()) {
    if (p.sandbox_port() != kGitDaemonPort) continue;
    std::string msg = absl::StrCat("ERR sandbox ", name, " is stopped; start it with `airlock start ",
                                   name, "` and fetch again\n");
    if (absl::Status s = ports_.OpenResponder(name, p, PktLine(msg)); !s.ok()) {
      AIRLOCK_LOG_WARN("cannot answer on the stopped sandbox's git port",
                       {{"sandbox", name}, {"error", std::string(s.message())}});
    }
  }
}

}  // namespace airlock::vmmd
