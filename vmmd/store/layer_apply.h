// Applying OCI image layers (tar, gzip or zstd) onto a root directory with
// libarchive, following the OCI layer rules: whiteouts (`.wh.NAME`) delete
// what lower layers put there, an opaque marker (`.wh..wh..opq`) hides a
// directory's lower contents, and later entries replace earlier ones.
//
// The promise that matters: nothing is written outside `root`. An entry
// whose path is absolute, contains `..`, or would be reached through a
// symlink (of this layer or a lower one), and a hard link whose target is
// such a path, refuse the whole layer with an error naming the entry.
// Device nodes and sockets are skipped (counted); owners are numeric.
#ifndef AIRLOCK_VMMD_STORE_LAYER_APPLY_H_
#define AIRLOCK_VMMD_STORE_LAYER_APPLY_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::vmmd {

// LayerStats counts what ApplyLayer did.
struct LayerStats {
  uint64_t entries = 0;
  uint64_t whiteouts = 0;
  uint64_t skipped_devices = 0;
  uint64_t bytes = 0;
};

// ApplyLayer applies the layer archive at `layer` (uncompressed, gzip or
// zstd tar) onto the directory `root`. On an unsafe entry it returns
// INVALID_ARGUMENT naming it; `root` may then be partly written and is to
// be thrown away by the caller (image builds happen in a scratch tree).
absl::StatusOr<LayerStats> ApplyLayer(const std::string& layer, const std::string& root);

// NormalizeEntryPath turns a layer entry name into a relative path without
// "." components or a trailing slash ("" for the root itself);
// INVALID_ARGUMENT for an absolute path or one with "..".
absl::StatusOr<std::string> NormalizeEntryPath(absl::string_view name);

// RemoveTree deletes `path` (a file, symlink or directory with everything
// in it) without following symlinks; a missing path is fine.
absl::Status RemoveTree(const std::string& path);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_LAYER_APPLY_H_
