#include "vmmd/docker_setup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "common/subprocess.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;

absl::Status ResolveDocker(vmm::SandboxSpec* spec, bool builtin_agent) {
  if (spec->docker() == vmm::DOCKER_DEFAULT) {
    spec->set_docker(builtin_agent ? vmm::DOCKER_ON : vmm::DOCKER_OFF);
  }
  if (!HasDocker(*spec)) {
    if (spec->docker_disk_mib() != 0) {
      return absl::InvalidArgumentError(
          "--docker-disk sizes the Docker Engine's disk, and this sandbox has no Docker "
          "Engine: add --docker, or leave --docker-disk out");
    }
    return absl::OkStatus();
  }
  if (spec->docker_disk_mib() == 0) spec->set_docker_disk_mib(kDefaultDockerDiskMib);
  if (spec->docker_disk_mib() < kMinDockerDiskMib || spec->docker_disk_mib() > kMaxDockerDiskMib) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--docker-disk ", spec->docker_disk_mib(), " MiB is out of range: give 512M to 16T "
        "(e.g. --docker-disk 20G)"));
  }
  return absl::OkStatus();
}

absl::Status MakeDockerDisk(const std::string& path, uint64_t mib) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) return absl::OkStatus();
  std::string tmp = path + ".tmp";
  unlink(tmp.c_str());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0 || ftruncate(fd, static_cast<off_t>(mib) << 20) != 0) {
    std::string err = strerror(errno);
    if (fd >= 0) close(fd);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot create the docker disk ", tmp, ": ", err));
  }
  close(fd);
  // Inode tables are written now (as holes where they are zero), the
  // journal lazily: the image stays sparse and the guest does no
  // background initialization.
  // e2fsprogs lives in sbin, which a daemon's PATH may lack.
  std::string mkfs = "mkfs.ext4";
  for (const char* p : {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4"}) {
    if (access(p, X_OK) == 0) {
      mkfs = p;
      break;
    }
  }
  CommandResult r = RunCommand({mkfs, "-q", "-F", "-m", "0", "-L", "docker", "-E",
                                "lazy_itable_init=0,lazy_journal_init=1", tmp},
                               {}, "", 120);
  if (r.exit_code != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(
        "cannot make the docker disk's file system (mkfs.ext4, from e2fsprogs, exited ",
        r.exit_code, "): ", r.err.empty() ? r.out : r.err));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = strerror(errno);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, ": ", err));
  }
  return absl::OkStatus();
}

// $1: the disk's serial.
const char kDockerPrepareScript[] = R"SH(set -e
for tool in dockerd docker flock; do
  command -v "$tool" >/dev/null 2>&1 || {
    echo "this image has no $tool: use the docker template (no -t), an image with Debian's docker.io and docker-cli, or --no-docker" >&2
    exit 3
  }
done
dev=
for d in /sys/block/vd*; do
  if [ "$(cat "$d/serial" 2>/dev/null)" = "$1" ]; then dev=/dev/${d##*/}; fi
done
[ -n "$dev" ] || { echo "the docker disk (serial $1) is not attached" >&2; exit 1; }
mkdir -p /var/lib/docker
if ! grep -q ' /var/lib/docker ' /proc/mounts; then
  mount -t ext4 -o discard,noatime "$dev" /var/lib/docker
fi
# The agent user reaches the socket without sudo.
getent group docker >/dev/null || groupadd -r docker
if getent passwd agent >/dev/null && ! id -nG agent | tr ' ' '\n' | grep -qx docker; then
  usermod -aG docker agent
fi
# A socket or pid file left by an engine that is gone would stop the next;
# a running engine holds the lock (DockerdCommand).
if flock -n /run/airlock-dockerd.lock true; then rm -f /var/run/docker.pid /var/run/docker.sock; fi
)SH";

std::vector<std::string> DockerdCommand() {
  // /etc/environment is the guest's egress settings (the agent writes it):
  // dockerd pulls through the forward proxy and trusts the system bundle,
  // which carries Airlock's CA.
  // An engine already running (vmmd restarted under a live guest) is kept.
  return {"sh", "-c",
          "set -a; . /etc/environment; set +a; exec flock -n /run/airlock-dockerd.lock "
          "dockerd --group docker >>/var/log/dockerd.log 2>&1 </dev/null"};
}

std::string DockerWaitScript(int timeout_s) {
  return absl::StrCat("deadline=$(( $(date +%s) + ", timeout_s, R"SH( ))
started=$(date +%s)
while [ "$(date +%s)" -lt "$deadline" ]; do
  if [ -S /var/run/docker.sock ] && docker version >/dev/null 2>&1; then exit 0; fi
  if [ "$(date +%s)" -gt "$((started + 5))" ] && flock -n /run/airlock-dockerd.lock true; then
    echo "dockerd exited:" >&2; tail -n 15 /var/log/dockerd.log >&2; exit 1
  fi
  sleep 0.2
done
echo "dockerd did not answer within )SH", timeout_s, R"SH( s:" >&2
tail -n 15 /var/log/dockerd.log >&2
exit 1
)SH");
}

}  // namespace airlock::vmmd
