// VmmService's image RPCs: the store through ImageCatalog, progress
// streamed as ImageProgress messages (at most a few per second).
#include <chrono>

#include "common/status.h"
#include "vmmd/vmm_service.h"

namespace airlock::vmmd {
namespace vmm = airlock::vmm::v1;

namespace {

// Throttled relays progress to the stream, at most every 200 ms (the first
// and each new phase at once).
class Throttled {
 public:
  explicit Throttled(grpc::ServerWriter<vmm::ImageProgress>* w) : w_(w) {}
  Progress fn() {
    return [this](const std::string& what, uint64_t done, uint64_t total) {
      auto now = std::chrono::steady_clock::now();
      if (what == last_ && now - at_ < std::chrono::milliseconds(200)) return;
      last_ = what;
      at_ = now;
      vmm::ImageProgress p;
      p.set_what(what);
      p.set_done_bytes(done);
      p.set_total_bytes(total);
      w_->Write(p);
    };
  }

 private:
  grpc::ServerWriter<vmm::ImageProgress>* w_;
  std::string last_;
  std::chrono::steady_clock::time_point at_;
};

grpc::Status Finish(grpc::ServerWriter<vmm::ImageProgress>* w, const vmm::Image& img) {
  vmm::ImageProgress last;
  last.set_what("done");
  *last.mutable_image() = img;
  w->Write(last);
  return grpc::Status::OK;
}

}  // namespace

grpc::Status VmmService::ListImages(grpc::ServerContext*, const vmm::ListImagesRequest*,
                                    vmm::ListImagesResponse* resp) {
  auto list = images_->List();
  if (!list.ok()) return ToGrpc(list.status());
  *resp = std::move(*list);
  return grpc::Status::OK;
}

grpc::Status VmmService::InspectImage(grpc::ServerContext*, const vmm::InspectImageRequest* req,
                                      vmm::Image* resp) {
  auto img = images_->Inspect(req->ref());
  if (!img.ok()) return ToGrpc(img.status());
  *resp = std::move(*img);
  return grpc::Status::OK;
}

grpc::Status VmmService::RemoveImage(grpc::ServerContext*, const vmm::RemoveImageRequest* req,
                                     vmm::RemoveImageResponse* resp) {
  auto r = images_->Remove(req->ref(), req->force());
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status VmmService::PullImage(grpc::ServerContext*, const vmm::PullImageRequest* req,
                                   grpc::ServerWriter<vmm::ImageProgress>* w) {
  Throttled t(w);
  auto img = images_->Pull(req->ref(), t.fn());
  if (!img.ok()) return ToGrpc(img.status());
  return Finish(w, *img);
}

grpc::Status VmmService::LoadImage(grpc::ServerContext*, const vmm::LoadImageRequest* req,
                                   grpc::ServerWriter<vmm::ImageProgress>* w) {
  if (req->path().empty() || req->path()[0] != '/') {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "LoadImage needs an absolute host path");
  }
  Throttled t(w);
  auto imgs = images_->Load(req->path(), req->tag(), t.fn());
  if (!imgs.ok()) return ToGrpc(imgs.status());
  for (const auto& img : *imgs) Finish(w, img);
  return grpc::Status::OK;
}

grpc::Status VmmService::SaveTemplate(grpc::ServerContext*, const vmm::SaveTemplateRequest* req,
                                      grpc::ServerWriter<vmm::ImageProgress>* w) {
  if (!req->output().empty() && req->output()[0] != '/') {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "SaveTemplate's output must be an absolute host path");
  }
  Throttled t(w);
  auto img = manager_->SaveTemplate(*req, t.fn());
  if (!img.ok()) return ToGrpc(img.status());
  return Finish(w, *img);
}

}  // namespace airlock::vmmd
