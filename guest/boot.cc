#include "guest/boot.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <net/if.h>
#include <signal.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <linux/magic.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <future>
#include <mutex>
#include <thread>


#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace airlock::guest {
namespace {

absl::Status Mount(const char* src, const char* target, const char* type, unsigned long flags,
                   const char* data) {
  mkdir(target, 0755);
  if (mount(src, target, type, flags, data) != 0) {
    return absl::InternalError(absl::StrCat("mount ", type ? type : "", " ", src, " on ",
                                            target, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace

BootParams ParseBootParams(absl::string_view cmdline) {
  BootParams p;
  for (absl::string_view word : absl::StrSplit(cmdline, absl::ByAnyChar(" \n\t"), absl::SkipEmpty())) {
    if (!absl::ConsumePrefix(&word, "airlock.")) continue;
    size_t eq = word.find('=');
    absl::string_view key = word.substr(0, eq);
    std::string value = eq == absl::string_view::npos ? "" : std::string(word.substr(eq + 1));
    if (key == "probe") p.probe = value == "1";
    if (key == "agent_user") p.ensure_agent_user = value == "1";
    if (key == "docker") p.docker = value == "1";
    if (key == "aslr") p.aslr = value != "0";
    if (key == "hostname" && !value.empty()) p.hostname = value;
    if (key == "root" && !value.empty()) p.root_device = value;
    if (key == "port" && !value.empty()) p.port_name = value;
  }
  return p;
}

absl::Status WriteKernelSetting(const std::string& path, absl::string_view value,
                                absl::string_view what) {
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC));
  if (fd.get() < 0 || !WriteAll(fd.get(), value)) {
    return absl::InternalError(absl::StrCat("cannot ", what, " (", path, "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status TurnOffAslr(const std::string& sysctl) {
  return WriteKernelSetting(sysctl, "0", "turn off address space randomization");
}

absl::Status BoundPerCpuPageLists(const std::string& sysctl) {
  return WriteKernelSetting(sysctl, std::to_string(kPerCpuPageListFraction),
                            "bound the per-CPU page lists");
}

absl::Status ReportSmallerFreeBlocks(const std::string& param) {
  return WriteKernelSetting(param, std::to_string(kFreePageReportingOrder),
                            "set the free page reporting order");
}

void Console(absl::string_view line) {
  std::string l = absl::StrCat(line, "\n");
  int fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) fd = dup(STDERR_FILENO);
  ssize_t unused = write(fd, l.data(), l.size());
  (void)unused;
  close(fd);
}

absl::Status MountEarly() {
  if (absl::Status s = Mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr); !s.ok()) return s;
  if (absl::Status s = Mount("sysfs", "/sys", "sysfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr); !s.ok()) return s;
  // devtmpfs may already be mounted by the kernel (CONFIG_DEVTMPFS_MOUNT).
  if (mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755") != 0 && errno != EBUSY) {
    return absl::InternalError(absl::StrCat("mount devtmpfs: ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<OpenedModule>> OpenModules(const std::string& dir,
                                                      const std::string& list) {
  std::ifstream order(dir + "/" + list);
  if (!order) return absl::NotFoundError(absl::StrCat("no module list ", dir, "/", list));
  std::vector<OpenedModule> modules;
  std::string name;
  while (std::getline(order, name)) {
    if (name.empty()) continue;
    std::string path = dir + "/" + name;
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
      return absl::NotFoundError(absl::StrCat("module ", path, ": ", strerror(errno)));
    }
    modules.push_back({name, std::move(fd)});
  }
  return modules;
}

absl::Status InsertModules(const std::vector<OpenedModule>& modules) {
  for (const OpenedModule& m : modules) {
    long rc = syscall(SYS_finit_module, m.fd.get(), "", 0);
    int e = errno;
    if (rc != 0 && e != EEXIST) {
      return absl::InternalError(absl::StrCat("loading ", m.name, ": ", strerror(e)));
    }
  }
  return absl::OkStatus();
}

absl::Status LoadModules(const std::string& dir, const std::string& list) {
  auto modules = OpenModules(dir, list);
  if (!modules.ok()) return modules.status();
  return InsertModules(*modules);
}

namespace {

std::mutex late_mu;
std::shared_future<absl::Status> late_modules;

}  // namespace

void StartLateModules(std::vector<OpenedModule> modules) {
  std::lock_guard<std::mutex> lock(late_mu);
  late_modules = std::async(std::launch::async, [m = std::move(modules)]() mutable {
                   absl::Status s = InsertModules(m);
                   // Closed: the files (in the deleted initramfs) are freed.
                   m.clear();
                   if (!s.ok()) Console(absl::StrCat("late kernel modules: ", s.message()));
                   return s;
                 }).share();
}

absl::Status AwaitLateModules() {
  std::shared_future<absl::Status> f;
  {
    std::lock_guard<std::mutex> lock(late_mu);
    f = late_modules;
  }
  if (!f.valid()) return absl::OkStatus();
  return f.get();
}

absl::Status MountRoot(const std::string& device, const std::string& target) {
  struct stat st;
  for (int i = 0; i < 1000 && stat(device.c_str(), &st) != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (stat(device.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("root disk ", device, " did not appear in 10 s"));
  }
  return Mount(device.c_str(), target.c_str(), "ext4", 0, nullptr);
}

namespace {

int RemoveEntry(const char* path, const struct stat*, int type, struct FTW*) {
  if (strcmp(path, "/") == 0) return 0;
  if (type == FTW_DP) {
    rmdir(path);  // the new root's mount point stays (busy)
  } else {
    unlink(path);
  }
  return 0;
}

}  // namespace

void RemoveInitramfs() {
  // Only ever an initramfs: PID 1 on a ramfs or tmpfs root.
  struct statfs fs {};
  if (getpid() != 1 || statfs("/", &fs) != 0 ||
      (fs.f_type != RAMFS_MAGIC && fs.f_type != TMPFS_MAGIC)) {
    return;
  }
  // Depth first, never leaving the initramfs' own file system: what is
  // mounted on it (the new root, /dev, /proc, /sys) is left alone.
  nftw("/", RemoveEntry, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
}

absl::Status SwitchRoot(const std::string& new_root, const std::string& hostname) {
  for (const char* m : {"/dev", "/proc", "/sys"}) {
    std::string target = new_root + m;
    mkdir(target.c_str(), 0755);
    if (mount(m, target.c_str(), nullptr, MS_MOVE, nullptr) != 0) {
      return absl::InternalError(absl::StrCat("moving ", m, ": ", strerror(errno)));
    }
  }
  // The initramfs stays in memory (a tmpfs) for the guest's life unless
  // its files go: about 34 MiB a guest would hold, and every snapshot
  // would carry. The agent keeps running from its mapped pages.
  RemoveInitramfs();
  if (chdir(new_root.c_str()) != 0 || mount(".", "/", nullptr, MS_MOVE, nullptr) != 0 ||
      chroot(".") != 0 || chdir("/") != 0) {
    return absl::InternalError(absl::StrCat("switching root: ", strerror(errno)));
  }
  if (absl::Status s = Mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                             "gid=5,mode=620,ptmxmode=666");
      !s.ok()) {
    return s;
  }
  // /dev/ptmx must reach this devpts instance.
  unlink("/dev/ptmx");
  if (symlink("pts/ptmx", "/dev/ptmx") != 0) {
    return absl::InternalError(absl::StrCat("linking /dev/ptmx: ", strerror(errno)));
  }
  if (absl::Status s = Mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777"); !s.ok()) return s;
  if (absl::Status s = Mount("run", "/run", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"); !s.ok()) return s;
  // The unified cgroup hierarchy, where runtimes such as runc expect it.
  if (absl::Status s = Mount("cgroup2", "/sys/fs/cgroup", "cgroup2",
                             MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr);
      !s.ok()) {
    return s;
  }
  if (sethostname(hostname.data(), hostname.size()) != 0) {
    return absl::InternalError(absl::StrCat("setting the hostname: ", strerror(errno)));
  }
  int sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (sock >= 0) {
    struct ifreq ifr{};
    strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
    if (ioctl(sock, SIOCGIFFLAGS, &ifr) == 0) {
      ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
      ioctl(sock, SIOCSIFFLAGS, &ifr);
    }
    close(sock);
  }
  return absl::OkStatus();
}

void PowerOff() {
  kill(-1, SIGTERM);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  kill(-1, SIGKILL);
  sync();
  reboot(RB_POWER_OFF);
  _exit(0);
}

absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = fork();
  if (pid < 0) return absl::InternalError(absl::StrCat("fork: ", strerror(errno)));
  if (pid == 0) {
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

absl::Status Await(pid_t pid, const std::string& what) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      return absl::InternalError(absl::StrCat(what, ": waitpid: ", strerror(errno)));
    }
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (WIFEXITED(status)) {
    return absl::InternalError(
        absl::StrCat(what, " failed (exit status ", WEXITSTATUS(status), ")"));
  }
  return absl::InternalError(absl::StrCat(what, " failed (signal ", WTERMSIG(status), ")"));
}

}  // namespace airlock::guest
