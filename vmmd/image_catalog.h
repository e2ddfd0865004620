// The images sandboxes are made from, as vmmd offers them: the store (see
// store/image_store.h) with names resolved the way users write them, the
// built-in base template imported into it, registry pulls, loads, removal
// refused while a sandbox uses an image, and the proto form of each. No
// gRPC here; vmm_service.cc is the surface.
#ifndef AIRLOCK_VMMD_IMAGE_CATALOG_H_
#define AIRLOCK_VMMD_IMAGE_CATALOG_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.pb.h"
#include "vmmd/store/image_store.h"
#include "vmmd/store/registry_client.h"

namespace airlock::vmmd {

// Usage maps a manifest digest to the sandboxes whose disks use it.
using Usage = std::map<std::string, std::vector<std::string>>;

class ImageCatalog {
 public:
  // `image_dir` holds the built-in base template's OCI layout
  // (templates/base/oci, made by tools/build_images.sh).
  ImageCatalog(ImageStore* store, RegistryOptions registry, std::string image_dir,
               std::string default_registry = "docker.io");

  // SetUsage tells the catalog how to learn which sandboxes use what.
  void SetUsage(std::function<Usage()> usage) { usage_ = std::move(usage); }

  // EnsureBuiltIn stores the built-in templates found in the image dir
  // ("base:latest", and "agent:latest" the built-in agents install into;
  // source "built-in") when the store does not have them, or when the
  // image dir holds a newer build.
  absl::Status EnsureBuiltIn();

  // Resolve finds `ref` in the store: a name as written, the same name
  // with ":latest", its registry-normalized form ("golang" is
  // "docker.io/library/golang:latest"), or a digest or id prefix. "" is
  // "base".
  absl::StatusOr<StoredImage> Resolve(const std::string& ref) const;

  // RefOf is what a sandbox keeps of `image`.
  static airlock::vmm::v1::ImageRef RefOf(const StoredImage& image, const std::string& name);

  // BootDisk is the image's cached boot disk, built on first use.
  absl::StatusOr<std::string> BootDisk(const airlock::vmm::v1::ImageRef& ref,
                                       const Progress& progress);

  absl::StatusOr<airlock::vmm::v1::ListImagesResponse> List() const;
  absl::StatusOr<airlock::vmm::v1::Image> Inspect(const std::string& ref) const;
  absl::StatusOr<airlock::vmm::v1::RemoveImageResponse> Remove(const std::string& ref,
                                                               bool force);
  // Pull fetches a registry reference; Load stores a file or layout.
  absl::StatusOr<airlock::vmm::v1::Image> Pull(const std::string& ref, const Progress& progress);
  absl::StatusOr<std::vector<airlock::vmm::v1::Image>> Load(const std::string& path,
                                                            const std::string& tag,
                                                            const Progress& progress);

  // ToProto is the API form of a stored image (documents only when asked).
  airlock::vmm::v1::Image ToProto(const StoredImage& image, const Usage& usage,
                                  bool documents) const;

  ImageStore* store() { return store_; }

 private:
  // Commit checks that the stored image `digest` unpacks (building its
  // boot disk, so it is ready to boot) and then names it. The caller holds
  // store_->Writing(); after a failure it calls CollectUnused.
  absl::StatusOr<StoredImage> Commit(const std::string& digest,
                                     const std::vector<std::string>& names,
                                     const std::string& source, const Progress& progress);
  // ImportBuiltIn stores templates/NAME/oci of the image dir as
  // NAME:latest unless the store has that build already.
  absl::Status ImportBuiltIn(const std::string& name);
  // CollectUnused drops blobs and disks nothing names or uses.
  void CollectUnused();
  Usage CurrentUsage() const { return usage_ ? usage_() : Usage{}; }

  ImageStore* store_;
  RegistryOptions registry_;
  std::string image_dir_;
  std::string default_registry_;
  std::function<Usage()> usage_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_IMAGE_CATALOG_H_
