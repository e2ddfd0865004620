// Snapshots of freshly booted guests, one per image and VM shape, so a new
// sandbox of an image booted before starts by restoring one instead of
// booting its kernel.
//
// A snapshot is the memory of a guest whose agent has just come up and
// that guest's root disk overlay at the same moment. The memory is two
// files: the guest's RAM as a sparse image, and QEMU's migration stream
// without it (device state; migration_stream.h). It is made from a VM vmmd boots for the
// purpose: no sandbox's name, secrets, workspace or rules were ever in it.
// A sandbox restored from it gets a copy of the disk and, once its agent
// answers, its own identity (hostname, machine id, entropy, clock: the
// agent's Claim).
//
// A snapshot never holds a virtiofs share (QEMU cannot save vhost-user-fs,
// nor load a stream into a VM that has one): a restored sandbox's shares
// are plugged into its running VM (Hypervisor::AttachShare) and then
// mounted, so the snapshot is the same for sandboxes with and without them.
//
// Where it stops: a sandbox with more shares than the hypervisor can plug
// into a running VM, or with the Docker disk, boots.
#ifndef AIRLOCK_VMMD_SNAPSHOTS_H_
#define AIRLOCK_VMMD_SNAPSHOTS_H_

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "vmmd/hypervisor.h"

namespace airlock::vmmd {

// The name a snapshot's own VM boots under: no sandbox can have it (names
// start with a letter or digit).
inline constexpr char kSnapshotVmName[] = "_snapshot";
// The hostname in every snapshot's kernel command line; a restored
// sandbox's agent is told its own.
inline constexpr char kSnapshotHostname[] = "sandbox";

// SnapshotInputs is everything a restored guest depends on. Any change
// (another image, kernel, initramfs and so agent, QEMU build, accelerator,
// size, device or command line) makes another key, so a stale snapshot is
// never used.
struct SnapshotInputs {
  std::string base_disk;
  std::string kernel;
  std::string initrd;
  // The hypervisor's description of the VM (Hypervisor::Describe).
  std::string vm;
};

// Snapshottable says whether a VM of `config` can start from a snapshot:
// no Docker disk, and at most `hotplug_shares` shares (what can be plugged
// into it once it runs).
bool Snapshottable(const VmConfig& config, size_t hotplug_shares);

// RestoreCondemnsSnapshot says whether a restore that did not come up
// proves its snapshot broken, from what the restored VM left: QEMU could
// not load it (`vmm_log`), or the guest it resumed panicked (`console`,
// written from the restore on; every restore of such a snapshot resumes
// the same state, so each would panic alike). A VM that died otherwise
// (killed, out of memory, a share that would not plug) proves nothing
// about the snapshot, which stays.
bool RestoreCondemnsSnapshot(absl::string_view vmm_log, absl::string_view console);

// SnapshotVm is `config` as the VM a snapshot of it is made from: the
// snapshot's name and hostname, its files at `dir` (the snapshot's
// directory) and `socket_dir`, and no shares.
VmConfig SnapshotVm(const VmConfig& config, const std::string& dir, const std::string& socket_dir);

// CopySynced copies `from` to `to` (a reflink where the filesystem makes
// one), synced, through a temporary file renamed into place: `to` is
// either whole or absent.
absl::Status CopySynced(const std::string& from, const std::string& to);

// FileIdentity is `path`'s device, inode, size and modification time (""
// when it cannot be read): a file replaced or rewritten gets another.
std::string FileIdentity(const std::string& path);

// SnapshotKey is a SHA-256 (hex) of the inputs, with each file's identity.
std::string SnapshotKey(const SnapshotInputs& inputs);

struct Snapshot {
  std::string dir;
  std::string disk;    // qcow2 overlay of the image's base disk
  std::string memory;  // QEMU's migration stream, without the guest's RAM
  std::string ram;     // the guest's RAM, a sparse image (memory_image.h)
};

// SnapshotStore keeps snapshots under one directory: KEY/ for finished
// ones, KEY.partial/ while one is made (renamed when complete, so a crash
// never leaves half a snapshot under its key).
class SnapshotStore {
 public:
  explicit SnapshotStore(std::string dir) : dir_(std::move(dir)) {}

  const std::string& dir() const { return dir_; }

  // Find is the finished snapshot of `key`.
  std::optional<Snapshot> Find(const std::string& key) const;

  // Begin makes an empty KEY.partial/ (removing one a crash left) and
  // names its files.
  absl::StatusOr<Snapshot> Begin(const std::string& key);

  // Commit syncs KEY.partial/ and renames it KEY/, and removes the oldest
  // finished snapshots beyond `keep`.
  absl::Status Commit(const std::string& key, size_t keep);

  // Abandon removes KEY.partial/.
  void Abandon(const std::string& key);

  // Remove removes the finished snapshot of `key` (QEMU would not load it).
  void Remove(const std::string& key);

  // RemovePartials removes every *.partial/ (vmmd starting: no snapshot is
  // being made).
  void RemovePartials();

  // Keys lists the finished snapshots, oldest first.
  std::vector<std::string> Keys() const;

 private:
  std::string dir_;
};

// ReceiveStream accepts one connection on the listening socket `listen_fd`
// and writes all it sends to `path` (synced), until the peer closes or
// `deadline`. Returns the bytes written.
// `stop` says to give up (CANCELLED).
absl::StatusOr<uint64_t> ReceiveStream(int listen_fd, const std::string& path,
                                       std::chrono::steady_clock::time_point deadline,
                                       const std::function<bool()>& stop = [] { return false; });

// SendStream connects to the Unix socket `socket` (retrying until it
// exists, as QEMU starts), sends all of `path` and closes; a reader that
// stops reading fails it at `deadline`.
absl::Status SendStream(const std::string& socket, const std::string& path,
                        std::chrono::steady_clock::time_point deadline);

// ListenUnix binds and listens on `path` (replacing a stale socket), mode
// 0600 and owned by `uid` when it is not 0.
absl::StatusOr<int> ListenUnix(const std::string& path, uint32_t uid);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_SNAPSHOTS_H_
