#include "vmmd/store/image_archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "nlohmann/json.hpp"
#include "vmmd/store/layer_apply.h"
#include "vmmd/store/reference.h"

namespace airlock::vmmd {
namespace {

using nlohmann::json;

bool IsDir(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

bool IsFile(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string Hex(const std::string& digest) { return digest.substr(digest.find(':') + 1); }

// Inside resolves `path` and checks it stays under `dir` (an archive's or
// layout's member may be a symlink pointing anywhere).
absl::StatusOr<std::string> Inside(const std::string& dir, const std::string& path) {
  char a[PATH_MAX], b[PATH_MAX];
  if (realpath(dir.c_str(), a) == nullptr || realpath(path.c_str(), b) == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("the image source lacks ", path));
  }
  std::string root = a, full = b;
  if (!absl::StartsWith(full, root + "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, " points outside the image source; the image is refused"));
  }
  return full;
}

// Candidate is one image found in a source, before it is stored.
struct Candidate {
  std::string manifest_digest;
  std::vector<std::string> names;
};

absl::Status CopyBlob(const std::string& layout, const std::string& digest, ImageStore* store,
                      const Progress& progress) {
  if (!oci::ValidDigest(digest)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid digest \"", digest, "\""));
  }
  std::string path = absl::StrCat(layout, "/blobs/sha256/", Hex(digest));
  if (!IsFile(path)) {
    return absl::InvalidArgumentError(absl::StrCat("the image layout lacks blob ", digest));
  }
  auto inside = Inside(layout, path);
  if (!inside.ok()) return inside.status();
  auto stored = store->PutBlobFile(*inside, digest, progress);
  return stored.status();
}

// LoadLayout stores the images an OCI layout's index.json names.
absl::StatusOr<std::vector<Candidate>> LoadLayout(const std::string& dir, ImageStore* store,
                                                  const Progress& progress) {
  std::string text = ReadFileToString(dir + "/index.json");
  if (text.empty()) return absl::InvalidArgumentError(absl::StrCat(dir, " has no index.json"));
  auto entries = oci::ParseIndex(text);
  if (!entries.ok()) return entries.status();
  std::vector<Candidate> out;
  for (oci::Descriptor d : *entries) {
    std::vector<std::string> names;
    for (const char* key : {"io.containerd.image.name", oci::kRefNameAnnotation}) {
      auto it = d.annotations.find(key);
      if (it != d.annotations.end() && !it->second.empty()) {
        names.push_back(it->second);
        break;
      }
    }
    if (oci::IsIndex(d.media_type)) {
      if (absl::Status s = CopyBlob(dir, d.digest, store, nullptr); !s.ok()) return s;
      auto text = store->ReadBlob(d.digest);
      if (!text.ok()) return text.status();
      auto nested = oci::ParseIndex(*text);
      if (!nested.ok()) return nested.status();
      auto pick = oci::PickPlatform(*nested);
      if (!pick.ok()) return pick.status();
      d = *pick;
    }
    if (!oci::IsManifest(d.media_type) && !d.media_type.empty()) continue;
    if (absl::Status s = CopyBlob(dir, d.digest, store, nullptr); !s.ok()) return s;
    auto manifest_text = store->ReadBlob(d.digest);
    if (!manifest_text.ok()) return manifest_text.status();
    auto manifest = oci::ParseManifest(*manifest_text);
    if (!manifest.ok()) return manifest.status();
    if (absl::Status s = CopyBlob(dir, manifest->config.digest, store, nullptr); !s.ok()) return s;
    for (const auto& l : manifest->layers) {
      if (absl::Status s = CopyBlob(dir, l.digest, store, progress); !s.ok()) return s;
    }
    out.push_back({d.digest, names});
  }
  return out;
}

// LoadDockerSave stores the images of an unpacked `docker save` tar.
absl::StatusOr<std::vector<Candidate>> LoadDockerSave(const std::string& dir, ImageStore* store,
                                                      const Progress& progress) {
  json j = json::parse(ReadFileToString(dir + "/manifest.json"), nullptr, false);
  if (!j.is_array()) return absl::InvalidArgumentError("manifest.json is not a JSON array");
  std::vector<Candidate> out;
  for (const auto& e : j) {
    if (!e.is_object() || !e.contains("Config") || !e["Config"].is_string() ||
        !e.contains("Layers") || !e["Layers"].is_array()) {
      return absl::InvalidArgumentError("manifest.json has an entry without Config and Layers");
    }
    auto member = [&](const std::string& name) -> absl::StatusOr<std::string> {
      auto rel = NormalizeEntryPath(name);
      if (!rel.ok()) return rel.status();
      std::string p = dir + "/" + *rel;
      if (!IsFile(p)) return absl::InvalidArgumentError(absl::StrCat("the archive lacks ", name));
      return Inside(dir, p);
    };
    auto config_path = member(e["Config"].get<std::string>());
    if (!config_path.ok()) return config_path.status();
    std::string config_text = ReadFileToString(*config_path);
    if (auto c = oci::ParseConfig(config_text); !c.ok()) return c.status();
    auto config = store->PutBlob(config_text);
    if (!config.ok()) return config.status();
    oci::Manifest m;
    m.config = {oci::kConfigType, *config, static_cast<int64_t>(config_text.size()), {}};
    for (const auto& l : e["Layers"]) {
      if (!l.is_string()) return absl::InvalidArgumentError("manifest.json lists a bad layer");
      auto p = member(l.get<std::string>());
      if (!p.ok()) return p.status();
      auto digest = store->PutBlobFile(*p, "", progress);
      if (!digest.ok()) return digest.status();
      char magic[2] = {0, 0};
      int fd = open(p->c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)!read(fd, magic, 2);
        close(fd);
      }
      bool gz = magic[0] == '\x1f' && magic[1] == '\x8b';
      struct stat st;
      stat(p->c_str(), &st);
      m.layers.push_back({gz ? oci::kLayerGzipType : oci::kLayerTarType, *digest,
                          static_cast<int64_t>(st.st_size), {}});
    }
    auto manifest = store->PutBlob(oci::SerializeManifest(m));
    if (!manifest.ok()) return manifest.status();
    Candidate c{*manifest, {}};
    if (e.contains("RepoTags") && e["RepoTags"].is_array()) {
      for (const auto& t : e["RepoTags"]) {
        if (t.is_string()) c.names.push_back(t.get<std::string>());
      }
    }
    out.push_back(c);
  }
  return out;
}

// Name turns a name a source gives into the store's form.
std::string StoreName(const std::string& given) {
  auto local = NormalizeLocalName(given);
  return local.ok() ? *local : "";
}

// AddFile appends a regular file to the archive being written.
absl::Status AddFile(archive* a, const std::string& name, const std::string& src,
                     const std::string* data) {
  archive_entry* e = archive_entry_new();
  std::unique_ptr<archive_entry, void (*)(archive_entry*)> owned(e, archive_entry_free);
  archive_entry_set_pathname(e, name.c_str());
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0644);
  archive_entry_set_mtime(e, 0, 0);
  int64_t size = 0;
  if (data != nullptr) {
    size = data->size();
  } else {
    struct stat st;
    if (stat(src.c_str(), &st) != 0) return absl::NotFoundError(absl::StrCat("no blob ", src));
    size = st.st_size;
  }
  archive_entry_set_size(e, size);
  if (archive_write_header(a, e) != ARCHIVE_OK) {
    return absl::InternalError(absl::StrCat("cannot write ", name, ": ", archive_error_string(a)));
  }
  if (data != nullptr) {
    if (archive_write_data(a, data->data(), data->size()) < 0) {
      return absl::ResourceExhaustedError(archive_error_string(a));
    }
    return absl::OkStatus();
  }
  UniqueFd fd(open(src.c_str(), O_RDONLY | O_CLOEXEC));
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (archive_write_data(a, buf.data(), n) < 0) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write the archive: ", archive_error_string(a)));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<LoadedImage>> LoadImages(const std::string& path,
                                                    const std::string& tag, ImageStore* store,
                                                    const Progress& progress) {
  std::string tag_name;
  if (!tag.empty()) {
    auto n = NormalizeLocalName(tag);
    if (!n.ok()) return n.status();
    tag_name = *n;
  }
  std::string dir = path;
  std::string scratch;
  struct Cleanup {
    std::string path;
    ~Cleanup() {
      if (!path.empty()) (void)RemoveTree(path);
    }
  } cleanup;
  if (!IsDir(path)) {
    if (!IsFile(path)) {
      return absl::NotFoundError(absl::StrCat("no image file or directory at ", path));
    }
    // An archive is unpacked with the same checks as a layer, so a
    // hostile member cannot land outside the scratch directory.
    scratch = store->TempPath("load");
    cleanup.path = scratch;
    if (absl::Status s = MakeDirs(scratch, 0700); !s.ok()) return s;
    auto unpacked = ApplyLayer(path, scratch);
    if (!unpacked.ok()) {
      return absl::Status(unpacked.status().code(),
                          absl::StrCat(path, " is not an image archive: ",
                                       unpacked.status().message()));
    }
    dir = scratch;
  }
  absl::StatusOr<std::vector<Candidate>> found;
  if (IsFile(dir + "/index.json") && IsDir(dir + "/blobs")) {
    found = LoadLayout(dir, store, progress);
  } else if (IsFile(dir + "/manifest.json")) {
    found = LoadDockerSave(dir, store, progress);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is neither an OCI image layout (index.json, blobs/) nor a docker save archive "
              "(manifest.json)"));
  }
  if (!found.ok()) return found.status();
  if (found->empty()) return absl::InvalidArgumentError(absl::StrCat(path, " holds no image"));
  if (!tag_name.empty() && found->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, " holds ", found->size(),
                                                   " images; --tag names only one"));
  }
  std::vector<LoadedImage> out;
  for (const Candidate& c : *found) {
    LoadedImage img{c.manifest_digest, {}};
    if (!tag_name.empty()) {
      img.names.push_back(tag_name);
    } else {
      for (const auto& n : c.names) {
        std::string s = StoreName(n);
        if (!s.empty()) img.names.push_back(s);
      }
    }
    if (img.names.empty()) img.names.push_back(Hex(c.manifest_digest).substr(0, 12));
    out.push_back(img);
  }
  return out;
}

absl::Status WriteArchive(const StoredImage& image, const std::string& path, ImageStore* store) {
  std::string tmp = path + ".airlock-tmp";
  archive* a = archive_write_new();
  std::unique_ptr<archive, int (*)(archive*)> owned(a, archive_write_free);
  archive_write_set_format_pax_restricted(a);
  if (archive_write_open_filename(a, tmp.c_str()) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, ": ", archive_error_string(a)));
  }
  auto fail = [&](absl::Status s) {
    archive_write_close(a);
    unlink(tmp.c_str());
    return s;
  };
  std::string name = image.name.empty() ? Hex(image.digest).substr(0, 12) : image.name;
  std::string layout = R"({"imageLayoutVersion":"1.0.0"})";
  oci::Descriptor top{oci::kManifestType, image.digest, 0,
                      {{"io.containerd.image.name", name},
                       {oci::kRefNameAnnotation, name.substr(name.rfind(':') + 1)}}};
  struct stat st;
  stat(store->BlobPath(image.digest).c_str(), &st);
  top.size = st.st_size;
  std::string index = oci::SerializeIndex({top});
  json docker = json::array();
  json layers = json::array();
  for (const auto& l : image.manifest.layers) layers.push_back("blobs/sha256/" + Hex(l.digest));
  docker.push_back({{"Config", "blobs/sha256/" + Hex(image.id)},
                    {"RepoTags", json::array({name})},
                    {"Layers", layers}});
  std::string docker_manifest = docker.dump();
  if (auto s = AddFile(a, "oci-layout", "", &layout); !s.ok()) return fail(s);
  if (auto s = AddFile(a, "index.json", "", &index); !s.ok()) return fail(s);
  if (auto s = AddFile(a, "manifest.json", "", &docker_manifest); !s.ok()) return fail(s);
  std::vector<std::string> blobs = {image.digest, image.id};
  for (const auto& l : image.manifest.layers) blobs.push_back(l.digest);
  std::set<std::string> written;
  for (const auto& d : blobs) {
    if (!written.insert(d).second) continue;
    if (auto s = AddFile(a, "blobs/sha256/" + Hex(d), store->BlobPath(d), nullptr); !s.ok()) {
      return fail(s);
    }
  }
  if (archive_write_close(a) != ARCHIVE_OK) {
    unlink(tmp.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot finish ", path, ": ", archive_error_string(a)));
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot rename into ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
