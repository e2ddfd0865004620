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

// The first boot clones the source; every boot starts the guest's git
// daemon and makes sure the agent user has a Git identity and trusts the
// host-owned source. $1 = branch ("" for the source's HEAD), then pairs of
// remote name and URL.
//
// Under TCG a guest process costs about 5 ms here and an exec about 40,
// so the script starts as few as it can: one exec for all of it, the
// daemon put in the background by the shell (it serves the workspace once
// it is there), a new sandbox's Git identity written by the shell, the
// host repo's remotes given to the clone as configuration, and the wait
// for the daemon's port read from /proc/net/tcp by the shell's builtins
// (9418 is 24CA; 0A is LISTEN).
//
// The clone goes straight into the workspace. ~/.airlock-clone says
// "cloning" while it runs and "done" once it is complete and synced, so a
// boot cut short (vmmd or the VM killed) leaves "cloning", and the next
// boot takes what it finds for half a clone and clones again. "cloning" is
// written only once the workspace is absent (an empty one is removed; one
// with files in it fails the setup, as git clone would), so what is
// removed then is the clone's alone. A workspace with a .git and no such
// file was cloned before it existed (moved into place whole): complete. A
// workspace gone since its clone is cloned again; one whose .git the user
// removed is left alone.
constexpr char kCloneSetup[] = R"(set -e
git daemon --reuseaddr --listen=127.0.0.1 --port=9418 --export-all \
  --base-path=/home/agent /home/agent/workspace </dev/null >/dev/null 2>&1 &
if [ ! -e "$HOME/.gitconfig" ] && [ ! -e "${XDG_CONFIG_HOME:-$HOME/.config}/git/config" ]; then
  printf '[safe]\n\tdirectory = *\n[user]\n\tname = Airlock agent\n\temail = agent@sandbox\n' \
    > "$HOME/.gitconfig"
else
  git config --global --get safe.directory >/dev/null || git config --global --add safe.directory '*'
  git config --global --get user.name >/dev/null || git config --global user.name "Airlock agent"
  git config --global --get user.email >/dev/null || git config --global user.email agent@sandbox
fi
W=$HOME/workspace
M=$HOME/.airlock-clone
state=
if [ -e "$M" ]; then read -r state < "$M" || true; fi
if [ "$state" = cloning ] ||
   { [ ! -e "$W/.git" ] && { [ "$state" != done ] || [ ! -e "$W" ]; }; }; then
  if [ "$state" = cloning ]; then rm -rf "$W"; elif [ -e "$W" ]; then rmdir "$W"; fi
  # What a clone cut short by an earlier vmmd left.
  if [ -e "$HOME/.workspace.partial" ]; then rm -rf "$HOME/.workspace.partial"; fi
  echo cloning > "$M"
  branch=$1
  shift
  n=$(($# / 2))
  while [ "$n" -gt 0 ]; do
    set -- "$@" -c "remote.$1.url=$2" -c "remote.$1.fetch=+refs/heads/*:refs/remotes/$1/*"
    shift 2
    n=$((n - 1))
  done
  if [ -n "$branch" ]; then set -- --branch "$branch" "$@"; fi
  git clone -q --no-hardlinks --origin source "$@" /run/sandbox/source "$W"
  sync
  echo done > "$M"
fi
listening() {
  while read -r _ addr _ st _; do
    case "$addr" in *:24CA) if [ "$st" = 0A ]; then return 0; fi ;; esac
  done < /proc/net/tcp
  return 1
}
i=0
until listening; do
  i=$((i + 1))
  if [ "$i" -gt 200 ]; then echo "the git daemon did not start listening" >&2; exit 1; fi
  sleep 0.05
done
)";
static_assert(kGitDaemonPort == 9418, "kCloneSetup starts the git daemon on 9418 (24CA)");

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
    // The clone's own remote has that name (the read-only source).
    if (name == "source") continue;
    argv.push_back(name);
    argv.push_back(url);
  }
  auto setup = GuestRun(agent, {argv});
  if (!setup.ok()) return setup.status();
  if (setup->first != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("setting up clone mode in the guest failed: ", setup->second));
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
