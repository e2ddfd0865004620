// Writing the difference between two root trees as one OCI layer: what is
// new or changed in `upper` as entries (files, directories, symlinks, hard
// links, modes, owners, times, xattrs), what `upper` lacks as whiteouts.
// The layer is a gzip tar streamed into the store; its diff_id (the
// uncompressed digest) is computed on the way.
#ifndef AIRLOCK_VMMD_STORE_TREE_DIFF_H_
#define AIRLOCK_VMMD_STORE_TREE_DIFF_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "vmmd/store/image_store.h"

namespace airlock::vmmd {

// DiffLayer is the layer written and what went into it.
struct DiffLayer {
  std::string digest;   // of the gzip blob
  std::string diff_id;  // of the uncompressed tar
  uint64_t size = 0;    // gzip bytes
  uint64_t entries = 0, whiteouts = 0;
  // Bytes of file content that differ (the "changed bytes").
  uint64_t content_bytes = 0;
};

// WriteDiffLayer compares `upper` with `lower` and stores the layer.
// `excluded` are relative paths ("var/lib/docker") left out of the layer
// whatever they hold. A file counts as unchanged when its type, mode,
// owner, size, mtime (to the nanosecond), link target and xattrs match.
absl::StatusOr<DiffLayer> WriteDiffLayer(const std::string& lower, const std::string& upper,
                                         const std::vector<std::string>& excluded,
                                         ImageStore* store);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_TREE_DIFF_H_
