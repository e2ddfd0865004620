#include "vmmd/shares.h"

#include <errno.h>
#include <limits.h>
#include <string.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/paths.h"
#include "common/subprocess.h"

namespace airlock::vmmd {

namespace {
constexpr char kVirtiofsd[] = "/usr/lib/qemu/virtiofsd";
}

absl::Status ValidateMount(airlock::vmm::v1::Mount* m) {
  const std::string& p = m->host_path();
  if (p.empty() || p[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("shared path \"", p, "\" must be absolute"));
  }
  char real[PATH_MAX];
  if (realpath(p.c_str(), real) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("shared path ", p, " does not exist"));
  }
  struct stat st;
  if (stat(real, &st) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("cannot stat shared path ", p));
  }
  if (!S_ISDIR(st.st_mode) && !(S_ISREG(st.st_mode) && m->read_only())) {
    return absl::InvalidArgumentError(absl::StrCat(
        "shared path ", p, " must be a directory (a single file only with :ro)"));
  }
  if (std::string(real) == "/") {
    return absl::InvalidArgumentError("sharing the host's / is refused");
  }
  m->set_host_path(real);
  return absl::OkStatus();
}

std::vector<std::string> VirtiofsdCommand(const Share& s, const std::string& stage_dir,
                                          const std::string& virtiofsd) {
  const std::string& src = s.mount.host_path();
  std::vector<std::string> fsd = {virtiofsd, "--socket-path=" + s.socket, "-o", "cache=auto",
                                  "-o", "sandbox=namespace"};
  if (!s.file && !s.mount.read_only()) {
    fsd.insert(fsd.end(), {"-o", "source=" + src});
    return fsd;
  }
  // Read-only (and single-file) exports: a private mount namespace where the
  // source is bind-mounted read-only; virtiofsd inherits that mount.
  std::vector<std::string> argv = {"unshare", "--mount", "--propagation", "private", "sh", "-c"};
  if (s.file) {
    // The stage dir holds one stand-in file; the stage is made read-only
    // first, then the real file is bound (read-only) onto its stand-in.
    std::string leaf = src.substr(src.rfind('/') + 1);
    argv.insert(argv.end(),
                {"set -e; STAGE=\"$1\"; LEAF=\"$2\"; SRC=\"$3\"; shift 3; "
                 "mkdir -p \"$STAGE\"; : > \"$STAGE/$LEAF\"; "
                 "mount --bind \"$STAGE\" \"$STAGE\"; mount -o remount,bind,ro \"$STAGE\"; "
                 "mount --bind \"$SRC\" \"$STAGE/$LEAF\"; "
                 "mount -o remount,bind,ro \"$STAGE/$LEAF\"; exec \"$@\"",
                 "share", stage_dir, leaf, src});
    fsd.insert(fsd.end(), {"-o", "source=" + stage_dir});
  } else {
    argv.insert(argv.end(),
                {"set -e; mount --bind \"$1\" \"$1\"; mount -o remount,bind,ro \"$1\"; "
                 "shift; exec \"$@\"",
                 "share", src});
    fsd.insert(fsd.end(), {"-o", "source=" + src});
  }
  argv.insert(argv.end(), fsd.begin(), fsd.end());
  return argv;
}

absl::StatusOr<std::pair<JailSpec, std::vector<std::string>>> VirtiofsdJail(
    const Share& s, const ShareJail& jail, const std::string& virtiofsd) {
  const std::string& src = s.mount.host_path();
  struct stat st;
  if (stat(src.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot share ", src, ": ", strerror(errno)));
  }
  uid_t owner = st.st_uid;
  gid_t group = st.st_gid;
  JailSpec spec;
  spec.root = jail.root;
  spec.hostname = "airlock-fs";
  spec.uid = 0;  // root of its own user namespace: the sandbox's base id on the host
  spec.gid = 0;
  spec.uid_map = ShareIdMap(jail.base, owner);
  spec.gid_map = ShareIdMap(jail.base, group);
  spec.mounts = SystemMounts();
  spec.mounts.push_back({jail.socket_dir, false});
  spec.mounts.push_back({jail.lock_dir, false, "/var/run/virtiofsd"});
  std::string source = src;
  if (s.file) {
    // virtiofsd exports a directory: the file alone, in the jail's /share.
    source = "/share";
    spec.mounts.push_back({src, true, "/share/" + src.substr(src.rfind('/') + 1)});
  } else {
    spec.mounts.push_back({src, s.mount.read_only()});
  }
  spec.devices = {{"/dev/null", false}};
  // What virtiofsd keeps for itself (its own namespaces and pivot, acting
  // as the guest's ids), all of them over its user namespace only.
  spec.keep_caps = {CAP_CHOWN,  CAP_DAC_OVERRIDE, CAP_FOWNER,    CAP_FSETID, CAP_SETGID,
                    CAP_SETUID, CAP_SETPCAP,      CAP_SYS_ADMIN, CAP_MKNOD,  CAP_SETFCAP};
  spec.cgroup_procs = jail.cgroup_procs;
  std::vector<std::string> argv = {virtiofsd, "--socket-path=" + s.socket, "-o", "cache=auto",
                                   "-o", "sandbox=namespace", "-o", "source=" + source};
  return std::make_pair(spec, argv);
}

absl::StatusOr<pid_t> StartShare(const Share& share, const ShareJail* jail,
                                 const std::string& stage_dir, const std::string& log_path) {
  if (geteuid() != 0) {
    return absl::FailedPreconditionError(
        "sharing host paths needs vmmd to run as root (virtiofsd sets up a mount namespace)");
  }
  if (access(kVirtiofsd, X_OK) != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat(kVirtiofsd, " is missing; install qemu-system-common (tools/install_deps.sh)"));
  }
  unlink(share.socket.c_str());
  absl::StatusOr<pid_t> pid;
  if (jail != nullptr) {
    auto made = VirtiofsdJail(share, *jail, kVirtiofsd);
    if (!made.ok()) return made.status();
    pid = LaunchJailed(made->second, made->first, log_path);
  } else {
    if (share.file) {
      if (absl::Status s = MakeDirs(stage_dir, 0700); !s.ok()) return s;
    }
    pid = SpawnDetached(VirtiofsdCommand(share, stage_dir, kVirtiofsd), log_path);
  }
  if (!pid.ok()) return pid.status();
  struct stat st;
  for (int i = 0; i < 500; ++i) {
    if (stat(share.socket.c_str(), &st) == 0) return *pid;
    if (!ProcessAlive(*pid)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return absl::UnavailableError(absl::StrCat(
      "virtiofsd for ", share.mount.host_path(), " did not start; see ", log_path));
}

}  // namespace airlock::vmmd
