// Loading a Kit named by a local reference: a descriptor file (the
// authored YAML, or JSON), an OCI image layout directory, where the Kit
// is an ordinary image whose manifest (or image index) carries the
// published descriptor as an annotation, or a built-in agent kit.
#ifndef AIRLOCK_COMMON_KIT_OCI_H_
#define AIRLOCK_COMMON_KIT_OCI_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/kit/descriptor.h"

namespace airlock::kit {

// The manifest annotations a v3 Kit is recognised by.
inline constexpr absl::string_view kDescriptorAnnotation = "vnd.docker.sandbox.kit.descriptor";
inline constexpr absl::string_view kSchemaVersionAnnotation =
    "vnd.docker.sandbox.kit.schema-version";

// LoadedKit is a descriptor and where it came from.
struct LoadedKit {
  Descriptor descriptor;
  std::string path;
  bool from_oci_layout = false;
  // The digest of the manifest or image index whose annotation held the
  // descriptor (OCI layouts only).
  std::string manifest_digest;
};

// LoadKitRef reads a Kit from `path`.
//
// "builtin:NAME" is the built-in agent kit NAME (common/agents), parsed
// as authored like a descriptor file, with `path` the ref itself; an
// unknown NAME is NOT_FOUND listing the built-in agents. The prefix is
// checked before the file system, so no file can stand in for one.
//
// A regular file is a descriptor as authored (YAML, or JSON, which is
// YAML) and is parsed as such. A directory is an OCI image layout: its
// `oci-layout` and `index.json` are read, the one manifest index.json
// lists is followed by digest under blobs/sha256/ (each blob's size and
// SHA-256 verified), and the descriptor is taken from the
// `vnd.docker.sandbox.kit.descriptor` annotation: of an image index when
// it carries one, else of its first platform manifest (attestation
// manifests skipped). That descriptor is re-validated as published.
// Errors name the file, blob or annotation that is missing or wrong.
absl::StatusOr<LoadedKit> LoadKitRef(const std::string& path);

// Sha256Digest returns "sha256:<64 lowercase hex>" of `data`.
std::string Sha256Digest(absl::string_view data);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_OCI_H_
