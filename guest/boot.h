// PID 1 duties of the guest agent: early mounts, kernel modules, mounting
// the template's root disk and switching into it, and powering off.
#ifndef AIRLOCK_GUEST_BOOT_H_
#define AIRLOCK_GUEST_BOOT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace airlock::guest {

// BootParams are the airlock.* words of the kernel command line.
struct BootParams {
  // airlock.probe=1: print kProbeMarker and power off at once (vmmd's
  // accelerator probe).
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
  // airlock.docker=1: the sandbox runs a Docker Engine; the modules it
  // needs (load-order-docker) are loaded too.
  bool docker = false;
};

// Console markers vmmd looks for.
inline constexpr char kProbeMarker[] = "AIRLOCK-PROBE-OK";
inline constexpr char kReadyMarker[] = "AIRLOCK-AGENT-READY";
inline constexpr char kFailedMarker[] = "AIRLOCK-AGENT-FAILED";

// ParseBootParams reads the airlock.* words of `cmdline`.
BootParams ParseBootParams(absl::string_view cmdline);

// MountEarly mounts /proc, /sys and /dev (devtmpfs) in the initramfs.
absl::Status MountEarly();

// LoadModules inserts the modules listed in `dir`/`list`, in order.
// Modules already present (built in or loaded) are fine.
absl::Status LoadModules(const std::string& dir, const std::string& list = "load-order");

// MountRoot waits for `device` and mounts it read-write at `target`.
absl::Status MountRoot(const std::string& device, const std::string& target);

// RunScript runs `/bin/sh script` (in the initramfs) and waits for it;
// an error carries its exit status. The egress set-up runs this way.
absl::Status RunScript(const std::string& script);

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
