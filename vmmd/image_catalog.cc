#include "vmmd/image_catalog.h"

#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "vmmd/store/image_archive.h"
#include "vmmd/store/reference.h"

namespace airlock::vmmd {
namespace vmm = airlock::vmm::v1;

namespace {

void ConfigToProto(const oci::ImageConfig& c, vmm::ImageConfig* out) {
  for (const auto& e : c.env) out->add_env(e);
  out->set_working_dir(c.working_dir);
  out->set_user(c.user);
  for (const auto& e : c.entrypoint) out->add_entrypoint(e);
  for (const auto& e : c.cmd) out->add_cmd(e);
}

std::string FirstLineOf(const std::string& path) {
  std::string text = ReadFileToString(path);
  return text.substr(0, text.find_first_of("\r\n"));
}

// NameForms are the names `ref` may mean, as written first.
std::vector<std::string> NameForms(const std::string& ref, const std::string& default_registry) {
  std::vector<std::string> forms = {ref};
  if (auto local = NormalizeLocalName(ref); local.ok()) forms.push_back(*local);
  if (auto remote = ParseReference(ref, default_registry); remote.ok()) {
    forms.push_back(remote->Name());
    if (remote->digest.empty()) {
      if (auto short_name = NormalizeLocalName(remote->Name()); short_name.ok()) {
        forms.push_back(*short_name);
      }
    }
  }
  return forms;
}

}  // namespace

ImageCatalog::ImageCatalog(ImageStore* store, RegistryOptions registry, std::string image_dir,
                           std::string default_registry)
    : store_(store),
      registry_(std::move(registry)),
      image_dir_(std::move(image_dir)),
      default_registry_(std::move(default_registry)) {}

absl::Status ImageCatalog::EnsureBuiltIn() {
  // base is what a sandbox gets by default; docker what --docker gets;
  // agent is what the built-in agents are installed into
  // (tools/build_images.sh docker, agent).
  for (const char* name : {"base", "docker", "agent"}) {
    if (absl::Status s = ImportBuiltIn(name); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ImageCatalog::ImportBuiltIn(const std::string& name) {
  std::string dir = absl::StrCat(image_dir_, "/templates/", name);
  std::string layout = dir + "/oci";
  std::string built = FirstLineOf(dir + "/digest");
  std::string tag = name + ":latest";
  struct stat st;
  if (stat((layout + "/index.json").c_str(), &st) != 0) {
    // Nothing to import; a store that already has it keeps it.
    return absl::OkStatus();
  }
  auto have = store_->FindName(tag);
  if (have.ok() && (built.empty() || have->digest == built)) return absl::OkStatus();
  absl::StatusOr<std::vector<LoadedImage>> loaded;
  {
    auto writing = store_->Writing();
    loaded = LoadImages(layout, tag, store_, nullptr);
    if (loaded.ok()) {
      if (absl::Status s = store_->Tag(tag, (*loaded)[0].digest, "built-in",
                                       absl::StrCat("the ", name, " template (tools/build_images.sh)"));
          !s.ok()) {
        return s;
      }
    }
  }
  if (!loaded.ok()) {
    return absl::Status(loaded.status().code(),
                        absl::StrCat("cannot import the ", name, " template from ", layout, ": ",
                                     loaded.status().message()));
  }
  AIRLOCK_LOG_INFO("imported a built-in template", {{"name", tag}, {"digest", (*loaded)[0].digest}});
  return absl::OkStatus();
}

absl::StatusOr<StoredImage> ImageCatalog::Resolve(const std::string& ref_in) const {
  std::string ref = ref_in.empty() ? "base" : ref_in;
  // Every name form first; only then a digest or id prefix.
  for (const auto& t : NameForms(ref, default_registry_)) {
    auto img = store_->FindName(t);
    if (img.ok() || img.status().code() != absl::StatusCode::kNotFound) return img;
  }
  auto by_digest = store_->Find(ref);
  if (by_digest.ok() || by_digest.status().code() != absl::StatusCode::kNotFound) {
    return by_digest;
  }
  return absl::NotFoundError(absl::StrCat(
      "no image \"", ref, "\" in the store; pull it (`airlock template pull ", ref,
      "`), load it (`airlock template load FILE`) or list what is there (`airlock template ls`)"));
}

vmm::ImageRef ImageCatalog::RefOf(const StoredImage& image, const std::string& name) {
  vmm::ImageRef r;
  r.set_name(name.empty() ? image.name : name);
  r.set_digest(image.digest);
  r.set_id(image.id);
  ConfigToProto(image.config, r.mutable_config());
  return r;
}

absl::StatusOr<std::string> ImageCatalog::BootDisk(const vmm::ImageRef& ref,
                                                   const Progress& progress) {
  auto img = store_->Load(ref.digest());
  if (!img.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the image ", ref.name(), " (", ref.digest(), ") is no longer in the store: ",
        img.status().message()));
  }
  return store_->BootDisk(*img, progress);
}

vmm::Image ImageCatalog::ToProto(const StoredImage& image, const Usage& usage,
                                 bool documents) const {
  vmm::Image out;
  for (const auto& n : store_->NamesOf(image.digest)) out.add_names(n);
  if (out.names().empty() && !image.name.empty()) out.add_names(image.name);
  out.set_digest(image.digest);
  out.set_id(image.id);
  out.set_size_bytes(store_->SizeOf(image));
  out.set_created_at(image.created);
  out.set_source(image.source);
  out.set_description(image.description);
  for (const auto& l : image.manifest.layers) out.add_layers(l.digest);
  ConfigToProto(image.config, out.mutable_config());
  if (auto it = usage.find(image.digest); it != usage.end()) {
    for (const auto& s : it->second) out.add_used_by(s);
  }
  if (documents) {
    out.set_manifest_json(store_->ReadBlob(image.digest).value_or(""));
    out.set_config_json(store_->ReadBlob(image.id).value_or(""));
  }
  return out;
}

absl::StatusOr<vmm::ListImagesResponse> ImageCatalog::List() const {
  vmm::ListImagesResponse resp;
  Usage usage = CurrentUsage();
  std::set<std::string> seen;
  for (const auto& img : store_->List()) {
    if (!seen.insert(img.digest).second) continue;
    *resp.add_images() = ToProto(img, usage, false);
  }
  return resp;
}

absl::StatusOr<vmm::Image> ImageCatalog::Inspect(const std::string& ref) const {
  auto img = Resolve(ref);
  if (!img.ok()) return img.status();
  return ToProto(*img, CurrentUsage(), true);
}

absl::StatusOr<vmm::RemoveImageResponse> ImageCatalog::Remove(const std::string& ref,
                                                              bool force) {
  auto img = Resolve(ref);
  if (!img.ok()) return img.status();
  std::vector<std::string> names = store_->NamesOf(img->digest);
  // A name removes that name; a digest or id removes every name.
  std::vector<std::string> forms = NameForms(ref, default_registry_);
  bool names_ref = std::find(forms.begin(), forms.end(), img->name) != forms.end();
  std::vector<std::string> doomed;
  if (names_ref) {
    doomed.push_back(img->name);
  } else {
    if (names.size() > 1 && !force) {
      return absl::FailedPreconditionError(absl::StrCat(
          "image ", ref, " has several names (", absl::StrJoin(names, ", "),
          "); remove them one by one or use --force"));
    }
    doomed = names;
  }
  Usage usage = CurrentUsage();
  bool last_name = doomed.size() == names.size();
  if (last_name) {
    auto it = usage.find(img->digest);
    if (it != usage.end() && !it->second.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "image ", ref, " is used by sandbox", it->second.size() > 1 ? "es " : " ",
          absl::StrJoin(it->second, ", "), "; remove ", it->second.size() > 1 ? "them" : "it",
          " first (`airlock rm`)"));
    }
  }
  vmm::RemoveImageResponse resp;
  for (const auto& n : doomed) {
    if (absl::Status s = store_->Untag(n); !s.ok()) return s;
    resp.add_untagged(n);
  }
  std::set<std::string> in_use;
  for (const auto& [digest, sandboxes] : usage) {
    if (!sandboxes.empty()) in_use.insert(digest);
  }
  auto freed = store_->CollectGarbage(in_use);
  if (!freed.ok()) return freed.status();
  resp.set_freed_bytes(*freed);
  return resp;
}

absl::StatusOr<StoredImage> ImageCatalog::Commit(const std::string& digest,
                                                 const std::vector<std::string>& names,
                                                 const std::string& source,
                                                 const Progress& progress) {
  auto img = store_->Load(digest);
  if (!img.ok()) return img.status();
  auto disk = store_->BootDisk(*img, progress);
  if (!disk.ok()) return disk.status();
  for (const auto& n : names) {
    if (absl::Status s = store_->Tag(n, digest, source); !s.ok()) return s;
  }
  return store_->Find(names[0]);
}

void ImageCatalog::CollectUnused() {
  std::set<std::string> in_use;
  for (const auto& [d, sandboxes] : CurrentUsage()) in_use.insert(d);
  (void)store_->CollectGarbage(in_use);
}

absl::StatusOr<vmm::Image> ImageCatalog::Pull(const std::string& ref, const Progress& progress) {
  auto parsed = ParseReference(ref, default_registry_);
  if (!parsed.ok()) return parsed.status();
  absl::StatusOr<StoredImage> img = absl::UnknownError("");
  {
    auto writing = store_->Writing();
    auto digest = vmmd::Pull(*parsed, registry_, store_, progress);
    std::string name = parsed->digest.empty() ? NormalizeLocalName(parsed->Name()).value_or(
                                                    parsed->Name())
                                              : parsed->Name();
    img = digest.ok() ? Commit(*digest, {name},
                               absl::StrCat("registry ", parsed->registry, "/",
                                            parsed->repository),
                               progress)
                      : absl::StatusOr<StoredImage>(digest.status());
  }
  if (!img.ok()) {
    // What an interrupted or refused pull stored goes again.
    CollectUnused();
    return img.status();
  }
  return ToProto(*img, CurrentUsage(), false);
}

absl::StatusOr<std::vector<vmm::Image>> ImageCatalog::Load(const std::string& path,
                                                           const std::string& tag,
                                                           const Progress& progress) {
  absl::Status failed;
  std::vector<StoredImage> stored;
  {
    auto writing = store_->Writing();
    auto loaded = LoadImages(path, tag, store_, progress);
    if (!loaded.ok()) failed = loaded.status();
    for (size_t i = 0; failed.ok() && i < loaded->size(); ++i) {
      const auto& l = (*loaded)[i];
      auto img = Commit(l.digest, l.names, absl::StrCat("load ", path), progress);
      if (img.ok()) {
        stored.push_back(*img);
      } else {
        failed = img.status();
      }
    }
  }
  if (!failed.ok()) {
    CollectUnused();
    return failed;
  }
  std::vector<vmm::Image> out;
  Usage usage = CurrentUsage();
  for (const auto& img : stored) out.push_back(ToProto(img, usage, false));
  return out;
}

}  // namespace airlock::vmmd
