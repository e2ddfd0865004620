// SandboxManager::SaveTemplate: a sandbox's own disk captured as one new
// layer over its image. The sandbox's qcow2 overlay is flattened to a
// scratch raw disk, both it and the image's boot disk are mounted
// read-only (loop, journal not replayed), and the difference of the two
// trees becomes the layer (store/tree_diff.h). Shared workspaces are never
// on the disk; the inner Docker store (/var/lib/docker) and the platform
// floor files the agent writes at boot are left out.
#include <sys/stat.h>
#include <unistd.h>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "vmmd/sandbox_manager.h"
#include "vmmd/store/image_archive.h"
#include "vmmd/store/layer_apply.h"
#include "vmmd/store/reference.h"
#include "vmmd/store/tree_diff.h"

namespace airlock::vmmd {
namespace vmm = airlock::vmm::v1;

namespace {

absl::Status MountReadOnly(const std::string& disk, const std::string& dir) {
  if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) return s;
  CommandResult r = RunCommand({"mount", "-t", "ext4", "-o", "loop,ro,noload", disk, dir}, {}, "", 120);
  if (r.exit_code != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot mount ", disk, " read-only to read it (saving a template needs root and loop "
        "devices): ", r.err));
  }
  return absl::OkStatus();
}

void Unmount(const std::string& dir) {
  CommandResult r = RunCommand({"umount", dir}, {}, "", 120);
  if (r.exit_code != 0) (void)RunCommand({"umount", "-l", dir}, {}, "", 60);
  rmdir(dir.c_str());
}

}  // namespace

absl::StatusOr<vmm::Image> SandboxManager::SaveTemplate(const vmm::SaveTemplateRequest& req,
                                                        const Progress& progress) {
  auto tag = NormalizeLocalName(req.tag());
  if (!tag.ok()) return tag.status();
  auto sb = Get(req.sandbox());
  if (!sb.ok()) return sb.status();
  bool was_running = sb->state() == vmm::RUNNING || sb->state() == vmm::STARTING;
  if (was_running && !req.force()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", req.sandbox(), " is running; saving stops it and starts it again after "
        "(--force), or stop it first (`airlock stop ", req.sandbox(), "`)"));
  }
  if (was_running) {
    if (progress) progress("stopping the sandbox", 0, 0);
    auto stopped = Stop(req.sandbox(), 30);
    if (!stopped.ok()) return stopped.status();
  }
  auto restart = absl::MakeCleanup([&] {
    if (!was_running) return;
    if (auto started = Start(req.sandbox()); !started.ok()) {
      AIRLOCK_LOG_ERROR("cannot start the sandbox again after saving its template",
                        {{"sandbox", req.sandbox()},
                         {"error", std::string(started.status().message())}});
    }
  });
  auto busy = Begin(req.sandbox(), "save a template");
  if (!busy.ok()) return busy.status();
  auto end = absl::MakeCleanup([&] { End(req.sandbox()); });

  ImageStore* store = images_->store();
  auto writing = store->Writing();
  vmm::ImageRef ref = busy->image();
  if (ref.digest().empty()) {
    auto base = images_->Resolve("");
    if (!base.ok()) return base.status();
    ref = ImageCatalog::RefOf(*base, "");
  }
  auto parent = store->Load(ref.digest());
  if (!parent.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("the sandbox's image ", ref.name(),
                                                      " is no longer in the store"));
  }
  auto lower_disk = images_->BootDisk(ref, nullptr);
  if (!lower_disk.ok()) return lower_disk.status();

  std::string scratch = store->TempPath("save");
  if (absl::Status s = MakeDirs(scratch, 0700); !s.ok()) return s;
  auto cleanup = absl::MakeCleanup([&] { (void)RemoveTree(scratch); });
  if (progress) progress("reading the sandbox's disk", 0, 0);
  std::string flat = scratch + "/disk.raw";
  CommandResult conv = RunCommand({"qemu-img", "convert", "-O", "raw",
                                   SandboxDir(req.sandbox()) + "/disk.qcow2", flat},
                                  {}, "", 1800);
  if (conv.exit_code != 0) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot read the sandbox's disk: qemu-img convert: ", conv.err));
  }
  std::string upper = scratch + "/upper", lower = scratch + "/lower";
  if (absl::Status s = MountReadOnly(flat, upper); !s.ok()) return s;
  auto unmount_upper = absl::MakeCleanup([&] { Unmount(upper); });
  if (absl::Status s = MountReadOnly(*lower_disk, lower); !s.ok()) return s;
  auto unmount_lower = absl::MakeCleanup([&] { Unmount(lower); });

  // The platform floor is written again at every boot (guest/egress.h):
  // this install's CA, the proxy profile and the DNS stub's resolv.conf do
  // not belong in an image.
  std::vector<std::string> excluded = {"lost+found", "var/lib/docker", "etc/resolv.conf",
                                       "etc/profile.d/airlock-egress.sh",
                                       "usr/local/share/ca-certificates/airlock-egress-ca.crt"};
  for (const auto& m : busy->spec().mounts()) {
    std::string p = m.guest_path().empty() ? m.host_path() : m.guest_path();
    while (absl::StartsWith(p, "/")) p.erase(0, 1);
    if (!p.empty()) excluded.push_back(p);
  }
  if (progress) progress("writing the layer", 0, 0);
  auto layer = WriteDiffLayer(lower, upper, excluded, store);
  if (!layer.ok()) return layer.status();

  oci::ImageConfig config = parent->config;
  config.diff_ids.push_back(layer->diff_id);
  config.created = "";
  auto config_digest = store->PutBlob(oci::SerializeConfig(config));
  if (!config_digest.ok()) return config_digest.status();
  auto config_blob = store->ReadBlob(*config_digest);
  if (!config_blob.ok()) return config_blob.status();
  std::string config_text = *config_blob;
  oci::Manifest m = parent->manifest;
  m.media_type = oci::kManifestType;
  m.config = {oci::kConfigType, *config_digest, static_cast<int64_t>(config_text.size()), {}};
  m.layers.push_back({oci::kLayerGzipType, layer->digest, static_cast<int64_t>(layer->size), {}});
  m.annotations["org.opencontainers.image.base.digest"] = parent->digest;
  if (!req.description().empty()) {
    m.annotations["org.opencontainers.image.description"] = req.description();
  }
  auto manifest = store->PutBlob(oci::SerializeManifest(m));
  if (!manifest.ok()) return manifest.status();
  if (absl::Status s = store->Tag(*tag, *manifest, absl::StrCat("save ", req.sandbox()),
                                  req.description());
      !s.ok()) {
    return s;
  }
  AIRLOCK_LOG_INFO("template saved", {{"sandbox", req.sandbox()},
                                      {"image", *tag},
                                      {"layer_bytes", std::to_string(layer->size)},
                                      {"changed_bytes", std::to_string(layer->content_bytes)}});
  auto saved = store->Find(*tag);
  if (!saved.ok()) return saved.status();
  if (!req.output().empty()) {
    if (progress) progress("writing the archive", 0, 0);
    if (absl::Status s = WriteArchive(*saved, req.output(), store); !s.ok()) return s;
  }
  return images_->ToProto(*saved, ImageUsage(), false);
}

}  // namespace airlock::vmmd
