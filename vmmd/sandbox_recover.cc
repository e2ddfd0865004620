// SandboxManager's recovery and watch: what a restarted vmmd does with the
// records it finds (reattach, boot again, mark failed, kill orphans), the
// monitor (VMs that exit on their own, deadlines, retried remotes), and
// stopping every sandbox when vmmd stops.

#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <chrono>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "vmmd/sandbox_manager.h"
#include "vmmd/sandbox_metadata.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

absl::Status SandboxManager::Recover() {
  if (absl::Status s = MakeDirs(options_.state_dir + "/sandboxes", 0700); !s.ok()) return s;
  RecoverSnapshots();
  auto all = store_->LoadAll();
  if (!all.ok()) return all.status();
  std::vector<std::pair<std::string, pid_t>> reattach;
  std::vector<std::string> reboot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& sb : *all) records_[sb.spec().name()].sb = sb;
  }
  for (const auto& sb : *all) {
    const std::string& name = sb.spec().name();
    pid_t pid = FindVm(sb);
    switch (sb.state()) {
      case vmm::STARTING:
        // A boot cut short may have any of its steps undone (mounts, the
        // clone, kit hooks, dockerd): the guest is not the user's yet, so
        // it boots again from the start.
        if (pid > 0) {
          KillVm(sb);
          // An unfinished agent install is removed below, not booted.
          if (sb.installs_agent_image().empty()) {
            AIRLOCK_LOG_INFO("restarting a boot vmmd did not finish",
                             {{"sandbox", name}, {"pid", std::to_string(pid)}});
            reboot.push_back(name);
          } else {
            UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
              s.set_state(vmm::FAILED);
              s.set_vmm_pid(0);
              s.set_failure("vmmd stopped during the agent install");
            });
          }
          break;
        }
        [[fallthrough]];
      case vmm::RUNNING:
        if (pid > 0) {
          reattach.emplace_back(name, pid);
        } else {
          // No VM, but what its boot started before the VM may be there
          // (virtiofsd of its shares, when vmmd died just before launch).
          KillVm(sb);
          std::string console = ReadFileToString(ConfigFor(sb).console_log);
          bool powered_off = console.find("reboot: Power down") != std::string::npos;
          UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
            s.set_state(powered_off ? vmm::STOPPED : vmm::FAILED);
            s.set_vmm_pid(0);
            if (!powered_off) {
              s.set_failure(FailureReason(name, "the VM exited while vmmd was not running"));
            }
          });
        }
        break;
      case vmm::CREATING:
        KillVm(sb);
        unlink((SandboxDir(name) + "/disk.qcow2.tmp").c_str());
        UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
          s.set_state(vmm::FAILED);
          s.set_failure("vmmd stopped while the sandbox was being created; "
                        "`airlock start` finishes it");
        });
        break;
      default:
        // With the VM, any virtiofsd a boot cut short left behind.
        KillVm(sb);
        if (sb.state() == vmm::STOPPED) AnswerStoppedClone(sb);
        if (sb.state() == vmm::STOPPING) {
          UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
            s.set_state(vmm::STOPPED);
            s.set_vmm_pid(0);
          });
        }
        break;
    }
  }
  // VM processes of this state dir that no stored sandbox owns (a crash
  // between launch and the state write) are killed.
  // A warm VM no sandbox claimed is no one's either (warm_pool.h).
  std::vector<pid_t> vms = ProcessesMatching(absl::StrCat("file=", options_.state_dir, "/sandboxes/"));
  for (pid_t pid : ProcessesMatching(absl::StrCat("file=", WarmDir("")))) vms.push_back(pid);
  for (pid_t pid : vms) {
    std::string cmd = ProcessCmdline(pid);
    if (cmd.find("qemu") == std::string::npos) continue;
    bool owned = false;
    for (const auto& sb : *all) {
      if (cmd.find(VmMarker(sb)) != std::string::npos) owned = true;
    }
    if (!owned) {
      AIRLOCK_LOG_WARN("killing an orphan VM", {{"pid", std::to_string(pid)}});
      kill(pid, SIGKILL);
    }
  }
  std::set<std::string> claimed;
  for (const auto& sb : *all) {
    if (!sb.pool_slot().empty()) claimed.insert(sb.pool_slot());
  }
  RecoverWarmPool(claimed);
  for (const auto& [name, pid] : reattach) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[name].busy = true;
      records_[name].reattaching = true;
      records_[name].recovering = true;
    }
    AIRLOCK_LOG_INFO("reattaching", {{"sandbox", name}, {"pid", std::to_string(pid)}});
    UpdateOrWarn(name, "reattaching", [&](vmm::Sandbox& s) { s.set_vmm_pid(pid); });
    // The sandbox is RUNNING to every caller from here, so what it
    // publishes listens from here too: a connection made while the
    // reattach runs waits for the agent (AgentChannel waits it out)
    // instead of being refused. A reattach that fails closes them (Boot).
    OpenPorts(name);
    StartWorker([this, name = name] { Boot(name, false); });
  }
  for (const auto& name : reboot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[name].busy = true;
      records_[name].recovering = true;
    }
    StartWorker([this, name = name] { Boot(name, true); });
  }
  monitor_ = std::thread([this] { Monitor(); });
  // Agent installs a previous vmmd did not finish: their sandboxes are
  // vmmd's own, and the sandbox that waited is FAILED (start retries it).
  for (const auto& sb : *all) {
    if (sb.installs_agent_image().empty()) continue;
    AIRLOCK_LOG_INFO("removing an unfinished agent install", {{"sandbox", sb.spec().name()}});
    StartWorker([this, name = sb.spec().name()] {
      if (absl::Status s = Remove(name, true); !s.ok()) {
        AIRLOCK_LOG_ERROR("cannot remove an unfinished agent install; `airlock rm -f` it",
                          {{"sandbox", name}, {"error", std::string(s.message())}});
      }
    });
  }
  return absl::OkStatus();
}

void SandboxManager::Monitor() {
  while (!stopping_) {
    std::vector<vmm::Sandbox> running;
    std::vector<vmm::Sandbox> expired;
    std::vector<std::string> publish;
    std::vector<std::string> kit_sync;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, milliseconds(500));
      int64_t now = time(nullptr);
      for (auto& [name, r] : records_) {
        if (r.busy || r.sb.state() != vmm::RUNNING) continue;
        if (r.publish.Take(now)) publish.push_back(name);
        if (r.kit_sync.Take(now)) kit_sync.push_back(name);
        if (Expired(r.sb, now) && !r.expiring) {
          r.expiring = true;
          expired.push_back(r.sb);
        } else {
          running.push_back(r.sb);
        }
      }
    }
    // Off this thread: a gitd that hangs must not stall noticing VM exits.
    for (const auto& name : publish) StartWorker([this, name] { RetryPublish(name); });
    for (const auto& name : kit_sync) StartWorker([this, name] { RetryKitSync(name); });
    // A deadline that passed applies its action once, off this thread.
    for (const auto& sb : expired) {
      std::string name = sb.spec().name();
      bool stop = sb.spec().on_timeout() == vmm::TIMEOUT_STOP;
      AIRLOCK_LOG_INFO("timeout reached", {{"sandbox", name}, {"action", stop ? "stop" : "delete"}});
      StartWorker([this, name, stop] {
        absl::Status s = stop ? Stop(name, 10).status() : Remove(name, true);
        if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
          AIRLOCK_LOG_WARN("timeout action failed; retrying in 30 s",
                           {{"sandbox", name}, {"error", std::string(s.message())}});
          UpdateOrWarn(name, "", [](vmm::Sandbox& sb) { sb.set_expires_at(time(nullptr) + 30); });
        }
        std::lock_guard<std::mutex> lock(mu_);
        auto it = records_.find(name);
        if (it != records_.end()) it->second.expiring = false;
      });
    }
    for (const auto& sb : running) {
      if (FindVm(sb) > 0) continue;
      const std::string& name = sb.spec().name();
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = records_.find(name);
        if (it == records_.end() || it->second.busy || it->second.sb.state() != vmm::RUNNING) continue;
        it->second.agent.reset();
      }
      ClosePorts(name);
      std::string console = ReadFileToString(ConfigFor(sb).console_log);
      bool powered_off = console.find("reboot: Power down") != std::string::npos;
      AIRLOCK_LOG_WARN("VM exited", {{"sandbox", name}, {"powered_off", powered_off ? "yes" : "no"}});
      UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
        s.set_state(powered_off ? vmm::STOPPED : vmm::FAILED);
        s.set_vmm_pid(0);
        s.set_expires_at(0);
        if (!powered_off) s.set_failure(FailureReason(name, "the VM exited unexpectedly"));
      });
    }
  }
}

void SandboxManager::Shutdown() {
  StopWarmPool();
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, r] : records_) {
      if (r.busy) r.cancel = true;
      if (r.sb.state() == vmm::RUNNING || r.busy) names.push_back(name);
    }
  }
  std::vector<std::thread> stops;
  for (const auto& name : names) {
    stops.emplace_back([this, name] {
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait_for(lock, seconds(20), [&] { return !records_[name].busy; });
      }
      if (auto s = Stop(name, 10); !s.ok()) {
        AIRLOCK_LOG_WARN("cannot stop the sandbox", {{"sandbox", name},
                                                     {"error", std::string(s.status().message())}});
      }
    });
  }
  for (auto& t : stops) t.join();
  stopping_ = true;
  changed_.notify_all();
}

}  // namespace airlock::vmmd
