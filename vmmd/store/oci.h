// The OCI (and Docker v2) image documents vmmd reads and writes: content
// descriptors, image manifests, indexes (manifest lists) and image
// configs, plus sha256 digests. Parsing is strict about what vmmd relies
// on and ignores fields it does not use.
#ifndef AIRLOCK_VMMD_STORE_OCI_H_
#define AIRLOCK_VMMD_STORE_OCI_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::vmmd::oci {

inline constexpr char kManifestType[] = "application/vnd.oci.image.manifest.v1+json";
inline constexpr char kIndexType[] = "application/vnd.oci.image.index.v1+json";
inline constexpr char kConfigType[] = "application/vnd.oci.image.config.v1+json";
inline constexpr char kLayerTarType[] = "application/vnd.oci.image.layer.v1.tar";
inline constexpr char kLayerGzipType[] = "application/vnd.oci.image.layer.v1.tar+gzip";
inline constexpr char kLayerZstdType[] = "application/vnd.oci.image.layer.v1.tar+zstd";
inline constexpr char kDockerManifestType[] =
    "application/vnd.docker.distribution.manifest.v2+json";
inline constexpr char kDockerListType[] =
    "application/vnd.docker.distribution.manifest.list.v2+json";
inline constexpr char kDockerConfigType[] = "application/vnd.docker.container.image.v1+json";
inline constexpr char kDockerLayerType[] = "application/vnd.docker.image.rootfs.diff.tar.gzip";
// The annotation an OCI layout's index.json names an image with.
inline constexpr char kRefNameAnnotation[] = "org.opencontainers.image.ref.name";

// Descriptor points at one blob.
struct Descriptor {
  std::string media_type;
  std::string digest;
  int64_t size = 0;
  std::map<std::string, std::string> annotations;
  // Index entries only.
  std::string os, architecture, variant;
};

// Manifest is one image: its config and layers, bottom first.
struct Manifest {
  std::string media_type;
  Descriptor config;
  std::vector<Descriptor> layers;
  std::map<std::string, std::string> annotations;
};

// ImageConfig is what vmmd honours of an image's config.
struct ImageConfig {
  std::string os, architecture, created;
  std::vector<std::string> env;
  std::string working_dir, user;
  std::vector<std::string> entrypoint, cmd;
  // Uncompressed layer digests, bottom first.
  std::vector<std::string> diff_ids;
};

// IsIndex says whether `media_type` is an OCI index or a Docker list;
// IsManifest whether it is an image manifest of either kind.
bool IsIndex(absl::string_view media_type);
bool IsManifest(absl::string_view media_type);

// ValidDigest says whether `d` is "sha256:" and 64 lowercase hex digits.
bool ValidDigest(absl::string_view d);

// MediaTypeOf reads the top-level "mediaType" of a document ("" when
// absent); INVALID_ARGUMENT when it is not a JSON object.
absl::StatusOr<std::string> MediaTypeOf(absl::string_view json);

// ParseManifest reads an OCI or Docker v2 image manifest; every digest is
// checked.
absl::StatusOr<Manifest> ParseManifest(absl::string_view json);

// ParseIndex reads an OCI index or Docker manifest list (also an OCI
// layout's index.json) into its entries.
absl::StatusOr<std::vector<Descriptor>> ParseIndex(absl::string_view json);

// ParseConfig reads an image config.
absl::StatusOr<ImageConfig> ParseConfig(absl::string_view json);

// PickPlatform chooses the linux/amd64 entry of an index; NOT_FOUND
// listing the platforms there when it has none.
absl::StatusOr<Descriptor> PickPlatform(const std::vector<Descriptor>& entries);

// SerializeManifest writes an OCI manifest; SerializeConfig an OCI config
// carrying `config` (env, working dir, user, entrypoint, cmd, diff_ids);
// SerializeIndex an index of `entries`.
std::string SerializeManifest(const Manifest& m);
std::string SerializeConfig(const ImageConfig& config);
std::string SerializeIndex(const std::vector<Descriptor>& entries);

// DigestOf is "sha256:<hex>" of a finished SHA-256 (`len` bytes at `md`).
std::string DigestOf(const unsigned char* md, unsigned len);

// Sha256Digest is "sha256:<hex>" of `data`.
std::string Sha256Digest(absl::string_view data);

}  // namespace airlock::vmmd::oci

#endif  // AIRLOCK_VMMD_STORE_OCI_H_
