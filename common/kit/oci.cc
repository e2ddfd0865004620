#include "common/kit/oci.h"

#include <openssl/evp.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/agents/builtin_agents.h"
#include "nlohmann/json.hpp"

namespace airlock::kit {
namespace {

using Json = nlohmann::json;

// Manifests and indexes are small; an annotation holds at most a 512 KiB
// descriptor. Anything far larger is not what it claims to be.
constexpr size_t kMaxManifestBytes = 4 * 1024 * 1024;
// An image index may point at another; real layouts nest one level.
constexpr int kMaxIndexDepth = 4;

constexpr absl::string_view kOciIndex = "application/vnd.oci.image.index.v1+json";
constexpr absl::string_view kDockerList =
    "application/vnd.docker.distribution.manifest.list.v2+json";

absl::StatusOr<std::string> ReadFile(const std::string& path, size_t limit) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::NotFoundError(absl::StrCat(path, " is missing"));
    return absl::UnavailableError(absl::StrCat("cannot stat ", path, ": ", strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat(path, " is not a regular file"));
  }
  if (static_cast<size_t>(st.st_size) > limit) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is ", st.st_size, " bytes, over the ", limit, " byte limit"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::UnavailableError(absl::StrCat("cannot open ", path));
  std::string data(static_cast<size_t>(st.st_size), '\0');
  in.read(data.data(), static_cast<std::streamsize>(data.size()));
  if (!in) return absl::UnavailableError(absl::StrCat("cannot read ", path));
  return data;
}

absl::StatusOr<Json> ParseJson(const std::string& text, absl::string_view what) {
  Json j = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(what, " is not a JSON object"));
  }
  return j;
}

std::string StringField(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

class Layout {
 public:
  explicit Layout(std::string dir) : dir_(std::move(dir)) {}

  absl::StatusOr<LoadedKit> Load() {
    absl::StatusOr<std::string> marker = ReadFile(dir_ + "/oci-layout", kMaxManifestBytes);
    if (!marker.ok()) return NotLayout(marker.status());
    absl::StatusOr<Json> layout = ParseJson(*marker, dir_ + "/oci-layout");
    if (!layout.ok()) return layout.status();
    if (StringField(*layout, "imageLayoutVersion").empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, "/oci-layout has no imageLayoutVersion"));
    }
    absl::StatusOr<std::string> index_text = ReadFile(dir_ + "/index.json", kMaxManifestBytes);
    if (!index_text.ok()) return NotLayout(index_text.status());
    absl::StatusOr<Json> index = ParseJson(*index_text, dir_ + "/index.json");
    if (!index.ok()) return index.status();
    absl::StatusOr<Json> only = OnlyManifest(*index, dir_ + "/index.json");
    if (!only.ok()) return only.status();
    return Follow(*only, 0);
  }

 private:
  absl::Status NotLayout(const absl::Status& s) {
    if (s.code() != absl::StatusCode::kNotFound) return s;
    return absl::NotFoundError(absl::StrCat("not an OCI image layout: ", s.message()));
  }

  // OnlyManifest returns the single descriptor index.json lists: a Kit
  // layout holds one image (an index when it is multi-platform).
  absl::StatusOr<Json> OnlyManifest(const Json& index, const std::string& where) {
    auto manifests = index.find("manifests");
    if (manifests == index.end() || !manifests->is_array() || manifests->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, " lists no manifests"));
    }
    if (manifests->size() > 1) {
      return absl::InvalidArgumentError(absl::StrCat(where, " lists ", manifests->size(),
                                                     " manifests; a Kit layout holds one image"));
    }
    return (*manifests)[0];
  }

  // Follow reads the blob `descriptor` names and finds the annotation in
  // it, descending from an image index to a platform manifest when the
  // index carries none.
  absl::StatusOr<LoadedKit> Follow(const Json& descriptor, int depth) {
    if (!descriptor.is_object())
      return absl::InvalidArgumentError("a manifest descriptor is not an object");
    std::string digest = StringField(descriptor, "digest");
    absl::StatusOr<std::string> blob = ReadBlob(descriptor);
    if (!blob.ok()) return blob.status();
    absl::StatusOr<Json> manifest = ParseJson(*blob, absl::StrCat("blob ", digest));
    if (!manifest.ok()) return manifest.status();
    std::string media_type = StringField(*manifest, "mediaType");
    if (media_type.empty()) media_type = StringField(descriptor, "mediaType");
    bool is_index = media_type == kOciIndex || media_type == kDockerList;

    if (absl::StatusOr<std::string> text = Annotation(*manifest, digest); text.ok()) {
      return Parse(*text, digest);
    } else if (!is_index || text.status().code() != absl::StatusCode::kNotFound) {
      return text.status();
    }
    // The index annotations are absent (a multi-node build dissolves
    // them): any platform manifest carries the same descriptor.
    if (depth >= kMaxIndexDepth) {
      return absl::InvalidArgumentError(
          absl::StrCat("image indexes nest deeper than ", kMaxIndexDepth, " levels at ", digest));
    }
    auto manifests = manifest->find("manifests");
    if (manifests != manifest->end() && manifests->is_array()) {
      for (const Json& m : *manifests) {
        if (!IsAttestation(m)) return Follow(m, depth + 1);
      }
    }
    return absl::NotFoundError(absl::StrCat("image index ", digest, " carries no ",
                                            kDescriptorAnnotation,
                                            " annotation and lists no platform manifest"));
  }

  static bool IsAttestation(const Json& m) {
    auto annotations = m.find("annotations");
    if (annotations != m.end() && annotations->is_object() &&
        StringField(*annotations, "vnd.docker.reference.type") == "attestation-manifest") {
      return true;
    }
    auto platform = m.find("platform");
    return platform != m.end() && platform->is_object() &&
           StringField(*platform, "os") == "unknown";
  }

  // Annotation returns the descriptor annotation, NotFound when absent.
  absl::StatusOr<std::string> Annotation(const Json& manifest, const std::string& digest) {
    auto annotations = manifest.find("annotations");
    if (annotations == manifest.end() || !annotations->is_object() ||
        annotations->find(std::string(kDescriptorAnnotation)) == annotations->end()) {
      return absl::NotFoundError(absl::StrCat("manifest ", digest, " carries no ",
                                              kDescriptorAnnotation,
                                              " annotation; it is not a v3 Kit"));
    }
    const Json& value = (*annotations)[std::string(kDescriptorAnnotation)];
    if (!value.is_string()) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest ", digest, ": ", kDescriptorAnnotation, " is not a string"));
    }
    auto version = annotations->find(std::string(kSchemaVersionAnnotation));
    if (version != annotations->end() && (!version->is_string() || *version != "3")) {
      return absl::InvalidArgumentError(absl::StrCat("manifest ", digest, ": ",
                                                     kSchemaVersionAnnotation, " is ",
                                                     version->dump(), ", not \"3\""));
    }
    return value.get<std::string>();
  }

  absl::StatusOr<LoadedKit> Parse(const std::string& text, const std::string& digest) {
    absl::StatusOr<Descriptor> d = ParseDescriptor(text, Form::kPublished);
    if (!d.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "manifest ", digest, " ", kDescriptorAnnotation, ": ", d.status().message()));
    }
    LoadedKit kit;
    kit.descriptor = *std::move(d);
    kit.path = dir_;
    kit.from_oci_layout = true;
    kit.manifest_digest = digest;
    return kit;
  }

  // ReadBlob reads a content-addressed blob and proves it is the one the
  // descriptor names: size and SHA-256 both.
  absl::StatusOr<std::string> ReadBlob(const Json& descriptor) {
    std::string digest = StringField(descriptor, "digest");
    if (!absl::StartsWith(digest, "sha256:")) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest descriptor digest \"", digest, "\" is not sha256:<hex>"));
    }
    std::string hex = digest.substr(7);
    if (hex.size() != 64 || !std::all_of(hex.begin(), hex.end(), [](char c) {
          return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'f');
        })) {
      return absl::InvalidArgumentError(
          absl::StrCat("manifest descriptor digest \"", digest, "\" is not sha256:<64 hex>"));
    }
    std::string path = absl::StrCat(dir_, "/blobs/sha256/", hex);
    absl::StatusOr<std::string> data = ReadFile(path, kMaxManifestBytes);
    if (!data.ok()) {
      if (data.status().code() == absl::StatusCode::kNotFound) {
        return absl::NotFoundError(absl::StrCat("blob ", digest, " is missing (", path, ")"));
      }
      return data.status();
    }
    auto size = descriptor.find("size");
    if (size == descriptor.end() || !size->is_number_integer() ||
        size->get<int64_t>() != static_cast<int64_t>(data->size())) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob ", digest, " is ", data->size(), " bytes; its descriptor says ",
                       size == descriptor.end() ? "nothing" : size->dump()));
    }
    if (Sha256Digest(*data) != digest) {
      return absl::InvalidArgumentError(
          absl::StrCat("blob ", digest, " does not match its digest"));
    }
    return data;
  }

  std::string dir_;
};

// ParseAuthored reads the descriptor `text` of `path` as authored.
absl::StatusOr<LoadedKit> ParseAuthored(absl::string_view text, const std::string& path) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(text, Form::kAuthored);
  if (!d.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", d.status().message()));
  LoadedKit kit;
  kit.descriptor = *std::move(d);
  kit.path = path;
  return kit;
}

// LoadBuiltin reads "builtin:NAME" from the agent kits compiled in
// (common/agents), as authored, like a descriptor file.
absl::StatusOr<LoadedKit> LoadBuiltin(const std::string& ref) {
  absl::string_view name = absl::string_view(ref).substr(agents::kBuiltinRefPrefix.size());
  std::optional<absl::string_view> text = agents::BuiltinAgentDescriptor(name);
  if (!text) {
    return absl::NotFoundError(absl::StrCat("kit reference ", ref, ": no built-in agent \"", name,
                                            "\"; the built-in agents are ",
                                            absl::StrJoin(agents::BuiltinAgentNames(), ", ")));
  }
  return ParseAuthored(*text, ref);
}

}  // namespace

std::string Sha256Digest(absl::string_view data) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md, &len, EVP_sha256(), nullptr);
  std::string out = "sha256:";
  for (unsigned int i = 0; i < len; ++i) out += absl::StrFormat("%02x", md[i]);
  return out;
}

absl::StatusOr<LoadedKit> LoadKitRef(const std::string& path) {
  if (absl::StartsWith(path, agents::kBuiltinRefPrefix)) return LoadBuiltin(path);
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("kit reference ", path, ": ", strerror(errno)));
  }
  if (S_ISDIR(st.st_mode)) {
    std::string dir = path;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    return Layout(dir).Load();
  }
  // An oversized file gets the spec's size error without being read.
  if (static_cast<size_t>(st.st_size) > kMaxDescriptorBytes) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": descriptor is ", st.st_size,
                                                   " bytes, over the ", kMaxDescriptorBytes,
                                                   " byte budget; move bulk into layers"));
  }
  absl::StatusOr<std::string> text = ReadFile(path, kMaxDescriptorBytes);
  if (!text.ok()) return text.status();
  return ParseAuthored(*text, path);
}

}  // namespace airlock::kit
