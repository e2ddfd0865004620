// PID 1 duties of the guest agent: early mounts, kernel modules, mounting
// the template's root disk and switching into it, and powering off.
#ifndef AIRLOCK_GUEST_BOOT_H_
#define AIRLOCK_GUEST_BOOT_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/fd_io.h"

namespace airlock::guest {

// BootParams are the airlock.* words of the kernel command line.
struct BootParams {
  // airlock.probe=1: print the probe marker (common/console_markers.h)
  // and power off at once (vmmd's accelerator probe).
  bool probe = false;
  // airlock.hostname=NAME
  std::string hostname = "sandbox";
  // airlock.root=DEVICE (default /dev/vda)
  std::string root_device = "/dev/vda";
  // airlock.port=NAME: the virtio-serial port vmmd talks on.
  std::string port_name = "airlock.agent";
  // airlock.agent_user=1: the image names no user; create "agent" when
  // its /etc/passwd lacks it.
  bool ensure_agent_user = false;
  // airlock.aslr=0: the processes started after the agent get no address
  // space randomization (vmmd's --guest-aslr).
  bool aslr = true;
  // airlock.docker=1: the sandbox runs a Docker Engine; the modules it
  // needs (load-order-docker) are loaded too.
  bool docker = false;
};

// ParseBootParams reads the airlock.* words of `cmdline`.
BootParams ParseBootParams(absl::string_view cmdline);

// TurnOffAslr turns off the address space randomization of the processes
// started from now on (airlock.aslr=0) by writing 0 to `sysctl`; the
// calling process keeps its layout.
absl::Status TurnOffAslr(const std::string& sysctl = "/proc/sys/kernel/randomize_va_space");

// WriteKernelSetting writes `value` to `path` (a file in /proc/sys or a
// module parameter in /sys); an error says it could not `what` ("turn
// off ..."), the file and why.
absl::Status WriteKernelSetting(const std::string& path, absl::string_view value,
                                absl::string_view what);

// BoundPerCpuPageLists caps the free pages the guest's CPUs keep outside
// the kernel's free lists at about 1/kPerCpuPageListFraction of its memory
// in all (at least 4 batches per CPU). Free page reporting hands back only
// what is on the free lists, and by default each CPU keeps up to the zone's
// low watermark shared among the CPUs, which khugepaged raises: at -m 1g
// up to 27 MiB per CPU, pages used once (the initramfs, the boot's
// modules) and freed that stayed in the host's memory and in every
// snapshot (34 MiB of a snapshot's 118 here).
// Writing the sysctl only lowers the cap: a list over it gives back the
// excess as its CPU frees more pages (the agent writes it first thing).
inline constexpr int kPerCpuPageListFraction = 1000;
absl::Status BoundPerCpuPageLists(
    const std::string& sysctl = "/proc/sys/vm/percpu_pagelist_high_fraction");

// ReportSmallerFreeBlocks has free page reporting hand back free blocks of
// 2^kFreePageReportingOrder pages (512 KiB) and up, instead of the
// balloon's default of a pageblock (2 MiB): free memory in blocks smaller
// than that stays in the host's memory and in a snapshot (about 10 MiB of
// an idle guest at -m 1g, next to slab and page tables that compaction
// cannot move). It must run after virtio_balloon registers, which sets
// the order.
inline constexpr int kFreePageReportingOrder = 7;
absl::Status ReportSmallerFreeBlocks(
    const std::string& param = "/sys/module/page_reporting/parameters/page_reporting_order");

// MountEarly mounts /proc, /sys and /dev (devtmpfs) in the initramfs.
absl::Status MountEarly();

// The module lists of the initramfs (tools/build_images.sh), each in
// dependency order, each leaving out what an earlier list loads:
// kCoreModules before the root disk and the ports, kNetModules for the
// egress interface and its ruleset (loaded beside the core ones),
// kLateModules what nothing needs before the agent answers (virtiofs,
// overlayfs), kDockerModules what a Docker Engine needs on top.
inline constexpr char kCoreModules[] = "load-order";
inline constexpr char kNetModules[] = "load-order-net";
inline constexpr char kLateModules[] = "load-order-late";
inline constexpr char kDockerModules[] = "load-order-docker";

// A kernel module opened for loading.
struct OpenedModule {
  std::string name;
  UniqueFd fd;
};

// OpenModules opens the modules listed in `dir`/`list`, in order.
absl::StatusOr<std::vector<OpenedModule>> OpenModules(const std::string& dir,
                                                      const std::string& list);

// InsertModules loads `modules` in order. Modules already present (built
// in, or loaded by another list) are fine.
absl::Status InsertModules(const std::vector<OpenedModule>& modules);

// LoadModules opens and inserts the modules listed in `dir`/`list`.
absl::Status LoadModules(const std::string& dir, const std::string& list = kCoreModules);

// StartLateModules inserts `modules` on a thread of its own (their files
// may be gone by then: they are open, and closed once inserted); a
// failure is written to the console. AwaitLateModules waits for that
// thread's outcome; with none started it returns at once. What needs a
// late module (a virtiofs mount, an exec that may mount overlayfs)
// awaits them first.
void StartLateModules(std::vector<OpenedModule> modules);
absl::Status AwaitLateModules();

// MountRoot waits for `device` and mounts it read-write at `target`.
absl::Status MountRoot(const std::string& device, const std::string& target);

// Spawn starts `argv` (argv[0] a path) without waiting for it. Await
// waits for `pid`; an error names `what` and how it ended. The egress
// ruleset is loaded this way (`nft -f`), while the root disk mounts.
// Before switch root only: after it, ChildReaper (reaper.h) is the one
// caller of wait() and would take the status first.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv);
absl::Status Await(pid_t pid, const std::string& what);

// RemoveInitramfs deletes the files of the initramfs ("/", PID 1 before
// the switch), not descending into what is mounted on it.
void RemoveInitramfs();

// SwitchRoot moves /dev, /proc and /sys under `new_root`, deletes the
// initramfs' files, makes `new_root` / and chroots into it; then mounts /dev/pts, /dev/shm and /run, brings up the
// loopback interface and sets the hostname.
absl::Status SwitchRoot(const std::string& new_root, const std::string& hostname);

// PowerOff ends every other process, syncs the disks and powers off.
[[noreturn]] void PowerOff();

// Console writes a line to the kernel console (kept in vmmd's console log).
void Console(absl::string_view line);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_BOOT_H_
