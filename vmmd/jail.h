// The jail a sandbox's host-side processes (QEMU, virtiofsd) run in: a
// root of their own holding only what they need, new PID, mount, IPC, UTS
// and network namespaces, a uid of their own, no capabilities beyond a
// stated set, no_new_privs, and cgroups joined before the first instruction
// runs.
//
// The set-up is a list of steps built in the parent (BuildJailPlan, a pure
// function) and replayed in the child between clone and execve, where only
// system calls are made; a failing step is reported back by its index, so
// the error names the mount or the node that failed.
//
// Where it stops: the jail does not filter system calls itself (QEMU's own
// `-sandbox` seccomp filter and virtiofsd's do that), and /usr is visible
// read-only inside (the programs and the libraries they load).
#ifndef AIRLOCK_VMMD_JAIL_H_
#define AIRLOCK_VMMD_JAIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::vmmd {

// JailMount is a host path bound inside the jail: at the same path, or at
// `target` when given.
struct JailMount {
  std::string path;
  bool read_only = true;
  std::string target;
};

// IdRange maps `count` ids from `inside` (in the jail's user namespace) to
// `outside` (on the host).
struct IdRange {
  uint32_t inside = 0, outside = 0, count = 1;
};

struct JailSpec {
  // An empty host directory; a tmpfs mounted on it (in the jail's own mount
  // namespace only) becomes the jail's "/".
  std::string root;
  std::string hostname;
  // The ids the program runs as: host ids, or ids inside the user
  // namespace when uid_map is set.
  uid_t uid = 0;
  gid_t gid = 0;
  // Non-empty: a new user namespace with these maps (root writes any map;
  // an ordinary user may map only its own ids).
  std::vector<IdRange> uid_map, gid_map;
  std::vector<JailMount> mounts;
  // Character devices made in the jail's /dev ("/dev/null", "/dev/kvm").
  // Each is a node of its own, owned by the jail's uid and not readable by
  // anyone else when `owned` is true; an ordinary user binds the host's.
  struct Device {
    std::string path;
    bool owned = false;
  };
  std::vector<Device> devices;
  // Capabilities (CAP_* numbers) kept in the bounding set; every other one
  // is dropped. Empty: none, so the program runs with CapEff 0.
  std::vector<int> keep_caps;
  // cgroup.procs files the jail joins before it starts.
  std::vector<std::string> cgroup_procs;
  // Not detached: a child of the calling thread, SIGKILLed when that thread
  // (or vmmd) ends, which the caller reaps (the KVM probe). Not with an id
  // map as root.
  bool die_with_parent = false;
  // No transparent huge pages for the program's memory
  // (PR_SET_THP_DISABLE): a TCG guest's RAM faulted in 2 MiB at a time
  // holds far more than the guest touched.
  bool no_huge_pages = false;
  // A file open in the caller (a snapshot's memory image): the jail copies
  // it into a memfd of its own, after joining its cgroups so the copy is
  // charged to them, and the program finds that at fd kMemoryImageFd
  // (memory_image.h). -1: none.
  int memory_image_fd = -1;
};

// The id pool. Each sandbox owns a block of kJailIdsPerSandbox host ids
// from its base, never shared with another sandbox while it exists: its
// QEMU runs as the base uid and gid, and the guest's ids seen through a
// direct-mode share map into the block.
inline constexpr uint32_t kJailIdsPerSandbox = 65536;
// Above systemd's range for containers (524288-1878982655).
inline constexpr uint32_t kDefaultJailIdBase = 0x70000000;
inline constexpr uint32_t kJailSlots = 4096;
// The guest user that acts as a share's owner (the image's first user).
inline constexpr uint32_t kGuestUserId = 1000;

// The pool's first block is the KVM probe's; sandboxes get the others.
// PickJailBase is the lowest sandbox block of the pool from `first` not in
// `used`, or 0 when all are taken.
uint32_t PickJailBase(uint32_t first, const std::vector<uint32_t>& used);

// ShareIdMap maps a share's guest ids: kGuestUserId to `owner` (the owner
// of the shared tree, so the guest user acts with the owner's permissions),
// every other guest id to the sandbox's block from `base`.
std::vector<IdRange> ShareIdMap(uint32_t base, uint32_t owner);

// SystemMounts are what any dynamically linked program needs: /usr and the
// merged-/usr top-level directories (as symlinks when the host has them so),
// and the loader cache.
std::vector<JailMount> SystemMounts();

// JailStep is one system call of the child's set-up.
struct JailStep {
  enum Kind {
    kMount,       // mount(a, b, c, flags, d)
    kRemountRo,   // bind-remount b read-only, keeping its locked flags
    kMkdir,       // mkdir b (mode), existing is fine
    kTouch,       // create empty file b (a bind target), existing is fine
    kMknod,       // mknod b as a copy of device a (mode), chown to the jail uid if owned
    kSymlink,     // symlink a -> b
    kPivot,       // chdir b; pivot_root(".", "."); umount old; chdir /
    kHostname,    // sethostname a
  };
  Kind kind;
  std::string a, b, c, d;
  unsigned long flags = 0;
  unsigned mode = 0;
  bool owned = false;

  // Describe is the step as a reader knows it ("mount --bind /x on /y").
  std::string Describe() const;
};

// BuildJailPlan is the child's set-up for `spec`. With `user_ns` the plan
// binds host device nodes instead of making them.
std::vector<JailStep> BuildJailPlan(const JailSpec& spec, bool user_ns);

// LaunchJailed starts argv[0] (an absolute path inside the jail) as
// described, detached (unless spec.die_with_parent) like SpawnDetached (a new session, reparented to
// init, stdin /dev/null, stdout and stderr appended to `log_path`, opened
// on the host), and returns its host pid. It fails, with the step that
// failed, when the jail cannot be made or exec fails.
absl::StatusOr<pid_t> LaunchJailed(const std::vector<std::string>& argv, const JailSpec& spec,
                                   const std::string& log_path);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_JAIL_H_
