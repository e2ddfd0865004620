// vmmd's gRPC surface (airlock.vmm.v1.Vmm): translates requests to the
// SandboxManager and relays exec and file streams to the guest agent.
#ifndef AIRLOCK_VMMD_VMM_SERVICE_H_
#define AIRLOCK_VMMD_VMM_SERVICE_H_

#include "protos/vmm/v1/vmm.grpc.pb.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

class VmmService final : public airlock::vmm::v1::Vmm::Service {
 public:
  VmmService(SandboxManager* manager, ImageCatalog* images)
      : manager_(manager), images_(images) {}

  using Sandbox = airlock::vmm::v1::Sandbox;

  grpc::Status Create(grpc::ServerContext*, const airlock::vmm::v1::CreateRequest*,
                      airlock::vmm::v1::CreateResponse*) override;
  grpc::Status Get(grpc::ServerContext*, const airlock::vmm::v1::GetRequest*, Sandbox*) override;
  grpc::Status SetDisplayName(grpc::ServerContext*, const airlock::vmm::v1::SetDisplayNameRequest*,
                              Sandbox*) override;
  grpc::Status RenewTimeout(grpc::ServerContext*, const airlock::vmm::v1::RenewTimeoutRequest*,
                            Sandbox*) override;
  grpc::Status List(grpc::ServerContext*, const airlock::vmm::v1::ListRequest*,
                    airlock::vmm::v1::ListResponse*) override;
  grpc::Status Watch(grpc::ServerContext*, const airlock::vmm::v1::WatchRequest*,
                     grpc::ServerWriter<airlock::vmm::v1::WatchEvent>*) override;
  grpc::Status Start(grpc::ServerContext*, const airlock::vmm::v1::StartRequest*,
                     Sandbox*) override;
  grpc::Status Stop(grpc::ServerContext*, const airlock::vmm::v1::StopRequest*,
                    Sandbox*) override;
  grpc::Status Remove(grpc::ServerContext*, const airlock::vmm::v1::RemoveRequest*,
                      airlock::vmm::v1::RemoveResponse*) override;
  grpc::Status Exec(grpc::ServerContext*,
                    grpc::ServerReaderWriter<airlock::vmm::v1::ExecResponse,
                                             airlock::vmm::v1::ExecRequest>*) override;
  grpc::Status ReadFile(grpc::ServerContext*, const airlock::vmm::v1::ReadFileRequest*,
                        grpc::ServerWriter<airlock::vmm::v1::FileChunk>*) override;
  grpc::Status WriteFile(grpc::ServerContext*,
                         grpc::ServerReader<airlock::vmm::v1::WriteFileRequest>*,
                         airlock::vmm::v1::WriteFileResponse*) override;
  grpc::Status Stat(grpc::ServerContext*, const airlock::vmm::v1::StatRequest*,
                    airlock::vmm::v1::FileInfo*) override;
  grpc::Status ListDir(grpc::ServerContext*, const airlock::vmm::v1::ListDirRequest*,
                       airlock::vmm::v1::ListDirResponse*) override;
  grpc::Status MakeDir(grpc::ServerContext*, const airlock::vmm::v1::MakeDirRequest*,
                       airlock::vmm::v1::Empty*) override;
  grpc::Status RemovePath(grpc::ServerContext*, const airlock::vmm::v1::RemovePathRequest*,
                          airlock::vmm::v1::Empty*) override;
  grpc::Status PublishPort(grpc::ServerContext*, const airlock::vmm::v1::PublishPortRequest*,
                           airlock::vmm::v1::PortMapping*) override;
  grpc::Status UnpublishPort(grpc::ServerContext*, const airlock::vmm::v1::UnpublishPortRequest*,
                             airlock::vmm::v1::Empty*) override;
  grpc::Status ListPorts(grpc::ServerContext*, const airlock::vmm::v1::ListPortsRequest*,
                         airlock::vmm::v1::ListPortsResponse*) override;
  grpc::Status UpdateKits(grpc::ServerContext*, const airlock::vmm::v1::UpdateKitsRequest*,
                          airlock::vmm::v1::UpdateKitsResponse*) override;
  grpc::Status ListTemplates(grpc::ServerContext*,
                             const airlock::vmm::v1::ListTemplatesRequest*,
                             airlock::vmm::v1::ListTemplatesResponse*) override;
  // Images (vmm_service_images.cc).
  grpc::Status ListImages(grpc::ServerContext*, const airlock::vmm::v1::ListImagesRequest*,
                          airlock::vmm::v1::ListImagesResponse*) override;
  grpc::Status InspectImage(grpc::ServerContext*, const airlock::vmm::v1::InspectImageRequest*,
                            airlock::vmm::v1::Image*) override;
  grpc::Status RemoveImage(grpc::ServerContext*, const airlock::vmm::v1::RemoveImageRequest*,
                           airlock::vmm::v1::RemoveImageResponse*) override;
  grpc::Status PullImage(grpc::ServerContext*, const airlock::vmm::v1::PullImageRequest*,
                         grpc::ServerWriter<airlock::vmm::v1::ImageProgress>*) override;
  grpc::Status LoadImage(grpc::ServerContext*, const airlock::vmm::v1::LoadImageRequest*,
                         grpc::ServerWriter<airlock::vmm::v1::ImageProgress>*) override;
  grpc::Status SaveTemplate(grpc::ServerContext*, const airlock::vmm::v1::SaveTemplateRequest*,
                            grpc::ServerWriter<airlock::vmm::v1::ImageProgress>*) override;

 private:
  SandboxManager* manager_;
  ImageCatalog* images_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_VMM_SERVICE_H_
