// Images in files: loading an OCI image layout directory, an OCI archive
// (a tar of a layout) or a `docker save` tar into the store, and writing a
// stored image out as an archive that both `docker load` and `skopeo`
// (oci-archive: and docker-archive:) read.
#ifndef AIRLOCK_VMMD_STORE_IMAGE_ARCHIVE_H_
#define AIRLOCK_VMMD_STORE_IMAGE_ARCHIVE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "vmmd/store/image_store.h"

namespace airlock::vmmd {

// LoadedImage is one image a source held: its manifest digest and the
// store names it should get.
struct LoadedImage {
  std::string digest;
  std::vector<std::string> names;
};

// LoadImages stores the blobs of every image found at `path` (the caller
// holds store->Writing()) and says how each is to be named: as its source
// does (io.containerd.image.name, org.opencontainers.image.ref.name or
// docker's RepoTags), or `tag` when given (then the source must hold
// exactly one image); an image without any name by its short id. Every
// blob is verified against its digest. Naming is the caller's.
absl::StatusOr<std::vector<LoadedImage>> LoadImages(const std::string& path,
                                                    const std::string& tag, ImageStore* store,
                                                    const Progress& progress);

// WriteArchive writes `image` to `path` (through a temporary file and a
// rename) as an OCI layout tar that also carries docker's manifest.json.
absl::Status WriteArchive(const StoredImage& image, const std::string& path,
                          ImageStore* store);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_IMAGE_ARCHIVE_H_
