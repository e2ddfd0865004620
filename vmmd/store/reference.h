// Image references as docker writes them: [HOST[:PORT]/]PATH[:TAG][@DIGEST],
// normalized the way docker does ("golang:1.25" is
// docker.io/library/golang:1.25).
#ifndef AIRLOCK_VMMD_STORE_REFERENCE_H_
#define AIRLOCK_VMMD_STORE_REFERENCE_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::vmmd {

// Reference is a parsed, normalized image reference.
struct Reference {
  // "docker.io", "ghcr.io", "localhost:5000".
  std::string registry;
  // "library/golang", "o/r".
  std::string repository;
  // Empty when a digest was given without a tag; "latest" when neither.
  std::string tag;
  // "sha256:..." or empty.
  std::string digest;
  // Whether the text named a registry host itself.
  bool explicit_registry = false;

  // Name is the canonical "registry/repository:tag" (or "@digest").
  std::string Name() const;
  // Ref is what to ask the registry for: the digest when given, else the tag.
  std::string Ref() const { return digest.empty() ? tag : digest; }
};

// ParseReference parses `text`; `default_registry` is used when it names no
// host ("docker.io" adds "library/" to one-component paths). A clear
// INVALID_ARGUMENT says what is wrong.
absl::StatusOr<Reference> ParseReference(absl::string_view text,
                                         absl::string_view default_registry = "docker.io");

// NormalizeLocalName is the store's form of a name: a reference without a
// digest, as "NAME:TAG" with tag "latest" when none is given; a registry
// host is kept as written except Docker Hub's ("docker.io/library/x:1" is
// "x:1", "docker.io/o/r:1" is "o/r:1"), as docker shows names.
absl::StatusOr<std::string> NormalizeLocalName(absl::string_view text);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_REFERENCE_H_
