#include "vmmd/jail.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "vmmd/memory_image.h"

namespace airlock::vmmd {
namespace {

// What the children report on the pipe: the grandchild's pid, or the step
// that failed with its errno.
struct Report {
  int32_t kind;  // kPid or kFailed
  int32_t step;  // a plan index, or one of the negative steps below
  int32_t err;
  int32_t pid;
};
constexpr int32_t kPid = 1, kFailed = 2;
constexpr int32_t kStepCgroup = -1, kStepClone = -2, kStepMaps = -3, kStepIds = -4,
                  kStepExec = -5, kStepSync = -6, kStepMemory = -7;

void Send(int fd, int32_t kind, int32_t step, int32_t err, int32_t pid) {
  Report r{kind, step, err, pid};
  ssize_t unused = write(fd, &r, sizeof(r));
  (void)unused;
}

bool WriteProcFile(const char* path, const std::string& data) {
  int fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size());
  int e = errno;
  close(fd);
  errno = e;
  return ok;
}

// Formats "/proc/<pid>/<leaf>" without allocating (the intermediate child
// of a multi-threaded parent).
void ProcPath(char* out, pid_t pid, const char* leaf) {
  char digits[16];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + pid % 10);
    pid /= 10;
  } while (pid > 0);
  char* p = out;
  for (const char* s = "/proc/"; *s; ++s) *p++ = *s;
  while (n > 0) *p++ = digits[--n];
  *p++ = '/';
  for (const char* s = leaf; *s; ++s) *p++ = *s;
  *p = '\0';
}

bool RunStep(const JailStep& s, uid_t uid, gid_t gid) {
  switch (s.kind) {
    case JailStep::kMount:
      return mount(s.a.empty() ? nullptr : s.a.c_str(), s.b.c_str(),
                   s.c.empty() ? nullptr : s.c.c_str(), s.flags,
                   s.d.empty() ? nullptr : s.d.c_str()) == 0;
    case JailStep::kRemountRo: {
      // A mount inherited into a user namespace keeps its locked flags; a
      // remount that dropped them would be refused.
      struct statfs st;
      if (statfs(s.b.c_str(), &st) != 0) return false;
      unsigned long keep = st.f_flags & (ST_NOSUID | ST_NODEV | ST_NOEXEC | ST_NOATIME |
                                         ST_NODIRATIME);
      // ST_* and MS_* agree except for relatime.
      if (st.f_flags & ST_RELATIME) keep |= MS_RELATIME;
      return mount(nullptr, s.b.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY | keep,
                   nullptr) == 0;
    }
    case JailStep::kMkdir:
      return mkdir(s.b.c_str(), s.mode) == 0 || errno == EEXIST;
    case JailStep::kTouch: {
      int fd = open(s.b.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
      if (fd < 0) return false;
      close(fd);
      return true;
    }
    case JailStep::kMknod: {
      struct stat st;
      if (stat(s.a.c_str(), &st) != 0) return false;
      if (!S_ISCHR(st.st_mode)) {
        errno = ENODEV;
        return false;
      }
      if (mknod(s.b.c_str(), S_IFCHR | s.mode, st.st_rdev) != 0) return false;
      // mknod honours the umask; the mode is set exactly.
      if (chmod(s.b.c_str(), s.mode) != 0) return false;
      return !s.owned || chown(s.b.c_str(), uid, gid) == 0;
    }
    case JailStep::kSymlink:
      return symlink(s.a.c_str(), s.b.c_str()) == 0;
    case JailStep::kPivot:
      return chdir(s.b.c_str()) == 0 && syscall(SYS_pivot_root, ".", ".") == 0 &&
             umount2(".", MNT_DETACH) == 0 && chdir("/") == 0;
    case JailStep::kHostname:
      return sethostname(s.a.data(), s.a.size()) == 0;
  }
  errno = EINVAL;
  return false;
}

std::string MapText(const std::vector<IdRange>& map) {
  std::string out;
  for (const IdRange& r : map) absl::StrAppend(&out, r.inside, " ", r.outside, " ", r.count, "\n");
  return out;
}

std::string ReadLink(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : std::string();
}

int LastCap() {
  int last = 0;
  if (absl::SimpleAtoi(
          absl::StripAsciiWhitespace(ReadFileToString("/proc/sys/kernel/cap_last_cap")), &last)) {
    return last;
  }
  return CAP_LAST_CAP;
}

// FailedStep names the step a child reported as failed.
std::string FailedStep(const Report& failed, const JailSpec& spec,
                       const std::vector<JailStep>& plan, const std::vector<std::string>& argv,
                       const std::string& uid_map) {
  switch (failed.step) {
    case kStepCgroup:
      return absl::StrCat("join cgroup ", failed.pid < static_cast<int32_t>(spec.cgroup_procs.size())
                                              ? spec.cgroup_procs[failed.pid]
                                              : "?");
    case kStepClone:
      return "create the jail's namespaces";
    case kStepMaps:
      return absl::StrCat("write the user namespace's id maps (", absl::StripTrailingAsciiWhitespace(uid_map), ")");
    case kStepIds:
      return absl::StrCat("drop to uid ", spec.uid, " gid ", spec.gid);
    case kStepExec:
      return absl::StrCat("exec ", argv[0]);
    case kStepSync:
      return "start the jail";
    case kStepMemory:
      return "copy the snapshot's memory image";
    default:
      return failed.step >= 0 && failed.step < static_cast<int32_t>(plan.size())
                 ? plan[failed.step].Describe()
                 : "start the jail";
  }
}

}  // namespace

std::string JailStep::Describe() const {
  switch (kind) {
    case kMount:
      if (flags & MS_BIND) return absl::StrCat("mount --bind ", a, " on ", b);
      if (!c.empty()) return absl::StrCat("mount -t ", c, " on ", b);
      return absl::StrCat("mount --make-rprivate ", b);
    case kRemountRo:
      return absl::StrCat("remount ", b, " read-only");
    case kMkdir:
      return absl::StrCat("mkdir ", b);
    case kTouch:
      return absl::StrCat("create ", b);
    case kMknod:
      return absl::StrCat("mknod ", b, " (as ", a, ")");
    case kSymlink:
      return absl::StrCat("symlink ", b, " -> ", a);
    case kPivot:
      return absl::StrCat("pivot_root into ", b);
    case kHostname:
      return absl::StrCat("sethostname ", a);
  }
  return "?";
}

uint32_t PickJailBase(uint32_t first, const std::vector<uint32_t>& used) {
  for (uint32_t slot = 1; slot < kJailSlots; ++slot) {
    uint64_t base = static_cast<uint64_t>(first) + static_cast<uint64_t>(slot) * kJailIdsPerSandbox;
    if (base + kJailIdsPerSandbox > UINT32_MAX) return 0;
    if (std::find(used.begin(), used.end(), static_cast<uint32_t>(base)) == used.end()) {
      return static_cast<uint32_t>(base);
    }
  }
  return 0;
}

std::vector<IdRange> ShareIdMap(uint32_t base, uint32_t owner) {
  // Host root is never mapped: the guest user could otherwise make
  // setuid-root files on the host. An owner inside the block is already
  // mapped by it.
  if (owner == 0 || (owner >= base && owner - base < kJailIdsPerSandbox)) {
    return {{0, base, kJailIdsPerSandbox}};
  }
  return {{0, base, kGuestUserId},
          {kGuestUserId, owner, 1},
          {kGuestUserId + 1, base + kGuestUserId + 1, kJailIdsPerSandbox - kGuestUserId - 1}};
}

std::vector<JailMount> SystemMounts() {
  std::vector<JailMount> out;
  for (const char* p : {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
                        "/etc/ld.so.cache"}) {
    struct stat st;
    if (lstat(p, &st) == 0) out.push_back({p, true});
  }
  return out;
}

std::vector<JailStep> BuildJailPlan(const JailSpec& spec, bool user_ns) {
  std::vector<JailStep> plan;
  const std::string& root = spec.root;
  plan.push_back({JailStep::kMount, "", "/", "", "", MS_REC | MS_PRIVATE});
  // No nodev: the jail's own device nodes live here. The jail cannot make
  // more (it has no CAP_MKNOD).
  plan.push_back({JailStep::kMount, "tmpfs", root, "tmpfs", "mode=0755,size=1m", MS_NOSUID});
  std::set<std::string> made, mounted;
  auto parents = [&](const std::string& path) {
    for (size_t at = path.find('/', 1); at != std::string::npos; at = path.find('/', at + 1)) {
      std::string dir = path.substr(0, at);
      if (made.insert(dir).second) plan.push_back({JailStep::kMkdir, "", root + dir, "", "", 0, 0755});
    }
  };
  for (const JailMount& m : spec.mounts) {
    const std::string& inside = m.target.empty() ? m.path : m.target;
    if (m.path.empty() || inside[0] != '/' || !mounted.insert(inside).second) continue;
    parents(inside);
    std::string target = root + inside;
    struct stat st;
    bool top_level = m.target.empty() && m.path.find('/', 1) == std::string::npos;
    if (top_level && lstat(m.path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      // Merged /usr: /lib is "usr/lib", kept as the same symlink.
      plan.push_back({JailStep::kSymlink, ReadLink(m.path), target});
      continue;
    }
    bool dir = stat(m.path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    plan.push_back({dir ? JailStep::kMkdir : JailStep::kTouch, "", target, "", "", 0, 0755});
    // Read-only binds are not recursive: a writable mount below the path
    // would stay writable (a bind-remount changes only the top mount).
    plan.push_back({JailStep::kMount, m.path, target, "", "",
                    m.read_only ? MS_BIND : static_cast<unsigned long>(MS_BIND | MS_REC)});
    if (m.read_only) plan.push_back({JailStep::kRemountRo, "", target});
  }
  if (!spec.devices.empty()) {
    parents("/dev/x");
    for (const JailSpec::Device& d : spec.devices) {
      std::string target = root + d.path;
      if (user_ns) {
        // An ordinary user cannot make device nodes: the host's are bound.
        plan.push_back({JailStep::kTouch, "", target});
        plan.push_back({JailStep::kMount, d.path, target, "", "", MS_BIND});
      } else {
        JailStep node{JailStep::kMknod, d.path, target, "", "", 0, d.owned ? 0600u : 0666u};
        node.owned = d.owned;
        plan.push_back(node);
      }
    }
  }
  plan.push_back({JailStep::kMkdir, "", root + "/proc", "", "", 0, 0555});
  plan.push_back({JailStep::kMount, "proc", root + "/proc", "proc", "",
                  MS_NOSUID | MS_NODEV | MS_NOEXEC});
  plan.push_back({JailStep::kPivot, "", root});
  plan.push_back({JailStep::kRemountRo, "", "/"});
  if (!spec.hostname.empty()) plan.push_back({JailStep::kHostname, spec.hostname});
  return plan;
}

absl::StatusOr<pid_t> LaunchJailed(const std::vector<std::string>& argv, const JailSpec& spec,
                                   const std::string& log_path) {
  if (argv.empty() || argv[0].empty() || argv[0][0] != '/') {
    return absl::InvalidArgumentError("a jailed program is named by its absolute path");
  }
  const bool root = geteuid() == 0;
  const bool user_ns = !spec.uid_map.empty();
  if (!root && !user_ns) {
    return absl::FailedPreconditionError(
        "an ordinary user's jail needs a user namespace (an id map)");
  }
  if (spec.die_with_parent && user_ns && root) {
    return absl::InvalidArgumentError("a jail that dies with its parent takes no id map as root");
  }
  const std::vector<JailStep> plan = BuildJailPlan(spec, user_ns);
  const std::string uid_map = MapText(spec.uid_map), gid_map = MapText(spec.gid_map);
  std::vector<int> drop;
  for (int c = 0; c <= LastCap(); ++c) {
    bool keep = false;
    for (int k : spec.keep_caps) keep = keep || k == c;
    if (!keep) drop.push_back(c);
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  char path_env[] = "PATH=/usr/bin:/bin";
  char* envp[] = {path_env, nullptr};

  int log_fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0) {
    return absl::InternalError(absl::StrCat("cannot open ", log_path, ": ", strerror(errno)));
  }
  int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
  int report[2] = {-1, -1}, sync[2] = {-1, -1}, ready[2] = {-1, -1};
  if (devnull < 0 || pipe2(report, O_CLOEXEC) != 0 || pipe2(sync, O_CLOEXEC) != 0 ||
      pipe2(ready, O_CLOEXEC) != 0) {
    int e = errno;
    for (int fd : {log_fd, devnull, report[0], report[1], sync[0], sync[1], ready[0], ready[1]}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(absl::StrCat("cannot make the jail's pipes: ", strerror(e)));
  }
  unsigned long flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWNET |
                        CLONE_NEWCGROUP | (user_ns && !root ? CLONE_NEWUSER : 0);
  // The jail: pid 1 of its own namespace.
  auto jail = [&]() {
    close(sync[1]);
    close(ready[0]);
    if (user_ns && !root) {
      // An ordinary user maps only its own ids, and only from inside (the
      // parent side of a process that changed ids cannot open the maps);
      // a process that changed its ids is not dumpable, and its /proc
      // files are root's until it is again.
      prctl(PR_SET_DUMPABLE, 1, 0, 0, 0);
      if (!WriteProcFile("/proc/self/setgroups", "deny") ||
          !WriteProcFile("/proc/self/uid_map", uid_map) ||
          !WriteProcFile("/proc/self/gid_map", gid_map)) {
        Send(report[1], kFailed, kStepMaps, errno, 0);
        _exit(1);
      }
    }
    for (size_t i = 0; i < plan.size(); ++i) {
      if (!RunStep(plan[i], spec.uid, spec.gid)) {
        Send(report[1], kFailed, static_cast<int32_t>(i), errno, 0);
        _exit(1);
      }
    }
    if (user_ns && root) {
      // Root builds the jail as host root (its root's owners are the
      // host's), then enters the user namespace, whose maps the
      // intermediate process writes (root may map any ids), and becomes
      // the namespace's root: capabilities over the namespace only.
      char go = 0;
      if (unshare(CLONE_NEWUSER) != 0) {
        Send(report[1], kFailed, kStepClone, errno, 0);
        _exit(1);
      }
      if (write(ready[1], "r", 1) != 1 || read(sync[0], &go, 1) != 1) _exit(1);
      if (syscall(SYS_setresgid, 0, 0, 0) != 0 || syscall(SYS_setresuid, 0, 0, 0) != 0) {
        Send(report[1], kFailed, kStepIds, errno, 0);
        _exit(1);
      }
    }
    prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
    for (int c : drop) prctl(PR_CAPBSET_DROP, c, 0, 0, 0);
    // An ordinary user's map denies setgroups: its groups stay as they are.
    // Raw system calls, not glibc's wrappers: this process may be a raw
    // clone of the multi-threaded vmmd (die_with_parent), and glibc changes
    // ids on every thread it knows of, waiting for each under a lock that
    // one of vmmd's threads may have held at the clone: forever.
    bool ids_ok = (!root || syscall(SYS_setgroups, 0, nullptr) == 0) &&
                  syscall(SYS_setresgid, spec.gid, spec.gid, spec.gid) == 0 &&
                  syscall(SYS_setresuid, spec.uid, spec.uid, spec.uid) == 0 &&
                  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0;
    if (!ids_ok) {
      Send(report[1], kFailed, kStepIds, errno, 0);
      _exit(1);
    }
    // Here, after the ids changed: a change of ids clears it.
    if (spec.die_with_parent) prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);
    if (spec.no_huge_pages) prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    // Made as the jail's uid, in its cgroups; moved above the descriptors
    // set below so that none of them replaces it.
    int memory = -1;
    if (spec.memory_image_fd >= 0) {
      int made = CopyToMemfd(spec.memory_image_fd);
      memory = made >= 0 ? fcntl(made, F_DUPFD_CLOEXEC, 16) : -1;
      if (memory < 0) {
        Send(report[1], kFailed, kStepMemory, made < 0 ? -made : errno, 0);
        _exit(1);
      }
    }
    dup2(devnull, 0);
    dup2(log_fd, 1);
    dup2(log_fd, 2);
    if (report[1] != 3) dup2(report[1], 3);
    fcntl(3, F_SETFD, FD_CLOEXEC);
    int first_closed = 4;
    if (memory >= 0) {
      dup2(memory, kMemoryImageFd);  // not close-on-exec: QEMU keeps it
      first_closed = kMemoryImageFd + 1;
    }
    if (syscall(SYS_close_range, first_closed, ~0u, 0u) != 0) {
      // No close_range (kernel < 5.9): close what could be open, one by one.
      for (int fd = first_closed; fd < 65536; ++fd) close(fd);
    }
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig = 1; sig < NSIG; ++sig) signal(sig, SIG_DFL);
    execve(args[0], args.data(), envp);
    Send(3, kFailed, kStepExec, errno, 0);
    _exit(127);
  };
  if (spec.die_with_parent) {
    // Started by the calling thread itself (not detached): SIGKILLed when
    // that thread ends, so it can never outlive vmmd.
    long gc = syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (gc == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0);  // set again once its ids change
      for (size_t i = 0; i < spec.cgroup_procs.size(); ++i) {
        if (!WriteProcFile(spec.cgroup_procs[i].c_str(), "0")) {
          Send(report[1], kFailed, kStepCgroup, errno, static_cast<int32_t>(i));
          _exit(1);
        }
      }
      jail();
    }
    int clone_errno = errno;
    close(log_fd);
    close(devnull);
    close(report[1]);
    for (int fd : {sync[0], sync[1], ready[0], ready[1]}) close(fd);
    if (gc < 0) {
      close(report[0]);
      return absl::InternalError(
          absl::StrCat("cannot create the jail's namespaces: ", strerror(clone_errno)));
    }
    Report r;
    Report failed{0, 0, 0, 0};
    while (read(report[0], &r, sizeof(r)) == sizeof(r)) {
      if (r.kind == kFailed && failed.kind == 0) failed = r;
    }
    close(report[0]);
    if (failed.kind == 0) return static_cast<pid_t>(gc);
    waitpid(static_cast<pid_t>(gc), nullptr, 0);
    return absl::InternalError(absl::StrCat("cannot start ", argv[0], " jailed: ",
                                            FailedStep(failed, spec, plan, argv, uid_map), ": ",
                                            strerror(failed.err)));
  }
  pid_t child = fork();
  if (child == 0) {
    setsid();
    for (size_t i = 0; i < spec.cgroup_procs.size(); ++i) {
      if (!WriteProcFile(spec.cgroup_procs[i].c_str(), "0")) {
        Send(report[1], kFailed, kStepCgroup, errno, static_cast<int32_t>(i));
        _exit(1);
      }
    }
    long gc = syscall(SYS_clone, flags | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
    if (gc < 0) {
      Send(report[1], kFailed, kStepClone, errno, 0);
      _exit(1);
    }
    if (gc == 0) jail();
    close(ready[1]);
    char unshared = 0;
    if (user_ns && root && read(ready[0], &unshared, 1) == 1) {
      char path[64];
      bool ok = true;
      ProcPath(path, static_cast<pid_t>(gc), "uid_map");
      ok = ok && WriteProcFile(path, uid_map);
      ProcPath(path, static_cast<pid_t>(gc), "gid_map");
      ok = ok && WriteProcFile(path, gid_map);
      if (!ok) {
        Send(report[1], kFailed, kStepMaps, errno, 0);
        kill(static_cast<pid_t>(gc), SIGKILL);
        _exit(1);
      }
      if (write(sync[1], "x", 1) != 1) {
        Send(report[1], kFailed, kStepSync, errno, 0);
        kill(static_cast<pid_t>(gc), SIGKILL);
        _exit(1);
      }
    }
    Send(report[1], kPid, 0, 0, static_cast<int32_t>(gc));
    _exit(0);
  }
  close(log_fd);
  close(devnull);
  close(report[1]);
  close(sync[0]);
  close(sync[1]);
  close(ready[0]);
  close(ready[1]);
  if (child < 0) {
    close(report[0]);
    return absl::InternalError(absl::StrCat("fork failed: ", strerror(errno)));
  }
  int status;
  waitpid(child, &status, 0);
  pid_t pid = 0;
  Report failed{0, 0, 0, 0};
  Report r;
  while (read(report[0], &r, sizeof(r)) == sizeof(r)) {
    if (r.kind == kPid) pid = r.pid;
    if (r.kind == kFailed && failed.kind == 0) failed = r;
  }
  close(report[0]);
  if (failed.kind == 0 && pid > 0) return pid;
  if (pid > 0) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, WNOHANG);
  }
  if (failed.kind == 0) return absl::InternalError("the jail did not start (no report)");
  return absl::InternalError(absl::StrCat("cannot start ", argv[0], " jailed: ",
                                          FailedStep(failed, spec, plan, argv, uid_map), ": ",
                                          strerror(failed.err)));
}

}  // namespace airlock::vmmd
