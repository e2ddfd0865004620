// The boot files vmmd gives every guest (built by tools/build_images.sh):
// kernel and initramfs with the agent; and each sandbox's copy-on-write
// disk over its image's boot disk (see image_catalog.h).
#ifndef AIRLOCK_VMMD_IMAGES_H_
#define AIRLOCK_VMMD_IMAGES_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace airlock::vmmd {

// GuestImages are the boot files shared by every sandbox.
struct GuestImages {
  // The uncompressed vmlinux when present (PVH boot), else the bzImage.
  std::string kernel;
  std::string initrd;
  // Kernel release, e.g. "6.1.0-27-cloud-amd64".
  std::string release;
};

// LocateGuestImages finds the boot files under `image_dir`; the error says
// how to build them.
absl::StatusOr<GuestImages> LocateGuestImages(const std::string& image_dir);

// AgentFailureHint is what to add to a guest agent's boot failure line
// (the console's AIRLOCK-AGENT-FAILED line) so that it says what to do,
// "" when there is nothing to add. An agent that finds no serial port of
// its own runs from an initramfs older than this vmmd: its VMs put the
// ports on a device that initramfs loads too late.
std::string AgentFailureHint(const std::string& failure);

// CreateOverlay makes `path` a qcow2 disk backed by the read-only `base`.
absl::Status CreateOverlay(const std::string& base, const std::string& path);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_IMAGES_H_
