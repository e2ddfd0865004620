#include "vmmd/sandbox_jails.h"

#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "vmmd/qemu_backend.h"
#include "vmmd/store/layer_apply.h"

namespace airlock::vmmd {
namespace {

// Owned makes `path` (created empty when missing) belong to `uid`.
absl::Status Owned(const std::string& path, uint32_t uid, bool create) {
  if (create) {
    int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
      return absl::InternalError(absl::StrCat("cannot create ", path, ": ", strerror(errno)));
    }
    close(fd);
  }
  if (chown(path.c_str(), uid, uid) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot give ", path, " to the jail's uid ", uid, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

// RemoveAll removes `dir` and everything in it without following a
// symlink anywhere (the socket directory is the jailed uid's to change),
// and without crossing into another filesystem; in this process (a `rm`
// process was about 25 ms of each sandbox's rm here).
void RemoveAll(const std::string& dir) {
  if (dir.empty() || dir == "/") return;
  if (absl::Status s = RemoveTree(dir); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot remove a jail's files", {{"error", std::string(s.message())}});
  }
}

}  // namespace

std::string InstanceName(const std::string& state_dir) {
  uint32_t h = 2166136261u;  // FNV-1a: stable across runs
  for (unsigned char c : state_dir) h = (h ^ c) * 16777619u;
  return absl::StrFormat("%08x", h);
}

SandboxJails::SandboxJails(JailOptions options) : options_(std::move(options)) {
  if (!options_.enabled) return;
  auto cg = Cgroups::ForThisProcess(options_.instance);
  if (cg.ok()) {
    absl::Status prepared = cg->Prepare();
    if (prepared.ok()) {
      cgroups_ = std::move(*cg);
    } else {
      cgroups_missing_ = std::string(prepared.message());
    }
  } else {
    cgroups_missing_ = std::string(cg.status().message());
  }
}

std::string SandboxJails::Describe() const {
  if (!options_.enabled) return "jails off (--jail=false): QEMU and virtiofsd run as vmmd";
  std::string ids = geteuid() == 0
                        ? absl::StrCat("a block of ", kJailIdsPerSandbox, " ids per sandbox from ",
                                       options_.id_base)
                        : absl::StrCat("vmmd's own uid ", geteuid(), " in a user namespace");
  return absl::StrCat("jails: ", ids, "; ",
                      cgroups_ ? cgroups_->Describe()
                               : absl::StrCat("no cgroup limits (", cgroups_missing_, ")"));
}

std::string SandboxJails::SocketDir(const std::string& name) const {
  return absl::StrCat(options_.runtime_dir, "/vms/", name);
}

std::string SandboxJails::JailDir(const std::string& name) const {
  return absl::StrCat(options_.runtime_dir, "/jail/", name);
}

absl::StatusOr<uint32_t> SandboxJails::Assign(uint32_t current,
                                              const std::vector<uint32_t>& used) const {
  if (!options_.enabled) return 0u;
  if (geteuid() != 0) return static_cast<uint32_t>(geteuid());
  if (current != 0) return current;
  uint32_t base = PickJailBase(options_.id_base, used);
  if (base == 0) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "all ", kJailSlots, " jail id blocks are in use; remove a sandbox (`airlock rm`)"));
  }
  return base;
}

absl::Status SandboxJails::Prepare(VmConfig& c) {
  if (absl::Status s = MakeDirs(c.socket_dir, 0700); !s.ok()) return s;
  c.jail_root = JailDir(c.name) + "/vm";
  if (absl::Status s = MakeDirs(c.jail_root, 0755); !s.ok()) return s;
  for (size_t i = 0; i < c.shares.size(); ++i) {
    ShareJail share = ForShare(c, i);
    for (const std::string& dir : {share.root, share.lock_dir}) {
      if (absl::Status s = MakeDirs(dir, 0755); !s.ok()) return s;
    }
    if (geteuid() == 0) {
      if (absl::Status s = Owned(share.lock_dir, c.jail_uid, false); !s.ok()) return s;
    }
  }
  if (geteuid() == 0) {
    for (const auto& [path, create] : std::vector<std::pair<std::string, bool>>{
             {c.socket_dir, false}, {c.disk, false}, {c.console_log, true}}) {
      if (absl::Status s = Owned(path, c.jail_uid, create); !s.ok()) return s;
    }
    if (!c.docker_disk.empty()) {
      if (absl::Status s = Owned(c.docker_disk, c.jail_uid, false); !s.ok()) return s;
    }
  } else {
    int fd = open(c.console_log.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd >= 0) close(fd);
  }
  c.cgroup_procs.clear();
  if (cgroups_) {
    CgroupLimits limits;
    limits.memory_bytes = VmMemoryLimitMib(c) << 20;
    limits.cpus = c.cpus;
    // QEMU's threads (vCPUs, I/O, its worker pool) and virtiofsd's.
    limits.pids = 512;
    auto procs = cgroups_->Create(c.name, limits);
    if (!procs.ok()) return procs.status();
    c.cgroup_procs = *procs;
  }
  return absl::OkStatus();
}

ShareJail SandboxJails::ForShare(const VmConfig& c, size_t index) const {
  ShareJail j;
  j.base = c.jail_uid;
  j.root = absl::StrCat(JailDir(c.name), "/fs", index);
  j.socket_dir = c.socket_dir;
  j.lock_dir = absl::StrCat(JailDir(c.name), "/fs", index, ".lock");
  j.cgroup_procs = c.cgroup_procs;
  return j;
}

void SandboxJails::Teardown(const std::string& name) {
  RemoveAll(JailDir(name));
  RemoveAll(SocketDir(name));
  if (cgroups_) {
    if (absl::Status s = cgroups_->Remove(name); !s.ok()) {
      AIRLOCK_LOG_WARN("cgroup left behind", {{"sandbox", name}, {"reason", std::string(s.message())}});
    }
  }
}

absl::Status SandboxJails::Rename(const std::string& from, const std::string& to) {
  for (const auto& [source, target] : std::vector<std::pair<std::string, std::string>>{
           {JailDir(from), JailDir(to)}, {SocketDir(from), SocketDir(to)}}) {
    struct stat st {};
    if (lstat(target.c_str(), &st) == 0) RemoveAll(target);
    if (rename(source.c_str(), target.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(
          absl::StrCat("cannot rename ", source, " to ", target, ": ", strerror(errno)));
    }
  }
  if (cgroups_) return cgroups_->Rename(from, to);
  return absl::OkStatus();
}

std::optional<CgroupUsage> SandboxJails::Usage(const std::string& name) const {
  if (!cgroups_) return std::nullopt;
  auto u = cgroups_->Usage(name);
  if (!u.ok()) return std::nullopt;
  return *u;
}

}  // namespace airlock::vmmd
