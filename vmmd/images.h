// The guest images vmmd boots (built by tools/build_images.sh): kernel,
// initramfs with the agent, templates, and each sandbox's copy-on-write
// disk.
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

// TemplateImage is a template's disk and its OCI manifest digest.
struct TemplateImage {
  std::string name;
  std::string disk;
  std::string digest;
  uint64_t disk_bytes = 0;
};

// LocateGuestImages finds the boot files under `image_dir`; the error says
// how to build them.
absl::StatusOr<GuestImages> LocateGuestImages(const std::string& image_dir);

// LocateTemplate finds template `name` ("" means "base").
absl::StatusOr<TemplateImage> LocateTemplate(const std::string& image_dir,
                                             const std::string& name);

// ListTemplates lists every built template.
std::vector<TemplateImage> ListTemplates(const std::string& image_dir);

// CreateOverlay makes `path` a qcow2 disk backed by the read-only `base`.
absl::Status CreateOverlay(const std::string& base, const std::string& path);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_IMAGES_H_
