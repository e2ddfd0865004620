#include "apid/vmm_client.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "apid/peer_status.h"
#include "common/client.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;
using std::chrono::seconds;

namespace {

// The one error mapping: vmmd's code and message as they are, and a
// sentence that says what to do when vmmd itself is not there.
absl::Status Map(const grpc::Status& s) { return PeerStatus("vmmd", s); }

void Deadline(grpc::ClientContext& ctx, seconds d) { DeadlineAfter(ctx, d); }

}  // namespace

VmmClient::VmmClient(std::shared_ptr<grpc::Channel> channel)
    : stub_(vmm::Vmm::NewStub(std::move(channel))) {}

void VmmClient::CancelAll() {
  std::lock_guard<std::mutex> lock(calls_mu_);
  closed_ = true;
  for (auto* ctx : calls_) ctx->TryCancel();
}

bool VmmClient::Track(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(calls_mu_);
  if (closed_) return false;
  calls_.insert(ctx);
  return true;
}

void VmmClient::Untrack(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(calls_mu_);
  calls_.erase(ctx);
}

namespace {
// Tracked keeps a long call cancellable for as long as it runs.
class Tracked {
 public:
  Tracked(std::function<bool(grpc::ClientContext*)> track,
          std::function<void(grpc::ClientContext*)> untrack, grpc::ClientContext* ctx)
      : untrack_(std::move(untrack)), ctx_(ctx), ok_(track(ctx)) {}
  ~Tracked() {
    if (ok_) untrack_(ctx_);
  }
  bool ok() const { return ok_; }

 private:
  std::function<void(grpc::ClientContext*)> untrack_;
  grpc::ClientContext* ctx_;
  bool ok_;
};
const absl::Status kStopping = absl::UnavailableError("apid is stopping; retry");
}  // namespace

#define AIRLOCK_TRACK(ctx)                                                            \
  Tracked tracked_call([this](grpc::ClientContext* c) { return Track(c); },           \
                       [this](grpc::ClientContext* c) { Untrack(c); }, &(ctx));       \
  if (!tracked_call.ok()) return kStopping

absl::StatusOr<vmm::Sandbox> VmmClient::Create(const vmm::SandboxSpec& spec) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(120));
  vmm::CreateRequest req;
  *req.mutable_spec() = spec;
  req.set_start(true);
  vmm::CreateResponse resp;
  if (auto s = Map(stub_->Create(&ctx, req, &resp)); !s.ok()) return s;
  return resp.sandbox();
}

absl::StatusOr<vmm::Sandbox> VmmClient::Get(const std::string& name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::GetRequest req;
  req.set_name(name);
  vmm::Sandbox resp;
  if (auto s = Map(stub_->Get(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<std::vector<vmm::Sandbox>> VmmClient::List() {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::ListResponse resp;
  if (auto s = Map(stub_->List(&ctx, vmm::ListRequest(), &resp)); !s.ok()) return s;
  return std::vector<vmm::Sandbox>(resp.sandboxes().begin(), resp.sandboxes().end());
}

absl::StatusOr<vmm::Sandbox> VmmClient::Start(const std::string& name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(120));
  vmm::StartRequest req;
  req.set_name(name);
  vmm::Sandbox resp;
  if (auto s = Map(stub_->Start(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<vmm::Sandbox> VmmClient::Stop(const std::string& name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(120));
  vmm::StopRequest req;
  req.set_name(name);
  vmm::Sandbox resp;
  if (auto s = Map(stub_->Stop(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status VmmClient::Remove(const std::string& name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(300));
  vmm::RemoveRequest req;
  req.set_name(name);
  req.set_force(true);
  vmm::RemoveResponse resp;
  return Map(stub_->Remove(&ctx, req, &resp));
}

absl::StatusOr<vmm::Sandbox> VmmClient::SetDisplayName(const std::string& name,
                                                       const std::string& display_name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::SetDisplayNameRequest req;
  req.set_name(name);
  req.set_display_name(display_name);
  vmm::Sandbox resp;
  if (auto s = Map(stub_->SetDisplayName(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<vmm::Sandbox> VmmClient::RenewTimeout(const std::string& name, uint64_t seconds_) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::RenewTimeoutRequest req;
  req.set_name(name);
  req.set_timeout_seconds(seconds_);
  vmm::Sandbox resp;
  if (auto s = Map(stub_->RenewTimeout(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status VmmClient::EnsureImage(const std::string& ref, bool always) {
  if (!always) {
    grpc::ClientContext ctx;
    Deadline(ctx, seconds(30));
    vmm::InspectImageRequest req;
    req.set_ref(ref);
    vmm::Image img;
    absl::Status s = Map(stub_->InspectImage(&ctx, req, &img));
    if (s.ok() || s.code() != absl::StatusCode::kNotFound) return s;
  }
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(1800));
  AIRLOCK_TRACK(ctx);
  vmm::PullImageRequest req;
  req.set_ref(ref);
  auto reader = stub_->PullImage(&ctx, req);
  vmm::ImageProgress progress;
  while (reader->Read(&progress)) {
  }
  absl::Status s = Map(reader->Finish());
  if (!s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("imageRef \"", ref, "\" cannot be used: ",
                                                   s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<vmm::Image>> VmmClient::ListImages() {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::ListImagesResponse resp;
  if (auto s = Map(stub_->ListImages(&ctx, vmm::ListImagesRequest(), &resp)); !s.ok()) return s;
  return std::vector<vmm::Image>(resp.images().begin(), resp.images().end());
}

absl::StatusOr<vmm::Image> VmmClient::InspectImage(const std::string& ref) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::InspectImageRequest req;
  req.set_ref(ref);
  vmm::Image resp;
  if (auto s = Map(stub_->InspectImage(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status VmmClient::RemoveImage(const std::string& ref) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(120));
  vmm::RemoveImageRequest req;
  req.set_ref(ref);
  vmm::RemoveImageResponse resp;
  return Map(stub_->RemoveImage(&ctx, req, &resp));
}

absl::StatusOr<std::vector<vmm::PortMapping>> VmmClient::ListPorts(const std::string& name) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::ListPortsRequest req;
  req.set_sandbox(name);
  vmm::ListPortsResponse resp;
  if (auto s = Map(stub_->ListPorts(&ctx, req, &resp)); !s.ok()) return s;
  return std::vector<vmm::PortMapping>(resp.ports().begin(), resp.ports().end());
}

absl::StatusOr<vmm::PortMapping> VmmClient::PublishPort(const std::string& name,
                                                        uint32_t sandbox_port) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::PublishPortRequest req;
  req.set_sandbox(name);
  req.mutable_port()->set_sandbox_port(sandbox_port);
  vmm::PortMapping resp;
  if (auto s = Map(stub_->PublishPort(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::Status VmmClient::UnpublishPort(const std::string& name, const vmm::PortMapping& m) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(30));
  vmm::UnpublishPortRequest req;
  req.set_sandbox(name);
  *req.mutable_port() = m;
  vmm::Empty resp;
  return Map(stub_->UnpublishPort(&ctx, req, &resp));
}

bool ExecSession::Write(const vmm::ExecRequest& req) {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (writes_done_) return false;
  return stream_->Write(req);
}

void ExecSession::CloseWrites() {
  std::lock_guard<std::mutex> lock(write_mu_);
  if (!writes_done_) stream_->WritesDone();
  writes_done_ = true;
}

absl::Status ExecSession::Finish() {
  {
    std::lock_guard<std::mutex> lock(write_mu_);
    if (!writes_done_) stream_->WritesDone();
    writes_done_ = true;
  }
  return Map(stream_->Finish());
}

absl::StatusOr<std::unique_ptr<ExecSession>> VmmClient::StartExec(const vmm::ExecStart& start) {
  {
    std::lock_guard<std::mutex> lock(calls_mu_);
    if (closed_) return kStopping;
  }
  auto session = std::make_unique<ExecSession>();
  session->stream_ = stub_->Exec(&session->ctx_);
  vmm::ExecRequest req;
  *req.mutable_start() = start;
  if (!session->stream_->Write(req)) {
    session->writes_done_ = true;
    return Map(session->stream_->Finish());
  }
  return session;
}

absl::StatusOr<ExecResult> VmmClient::Exec(const vmm::ExecStart& start, size_t cap) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(3600));
  AIRLOCK_TRACK(ctx);
  auto stream = stub_->Exec(&ctx);
  vmm::ExecRequest req;
  *req.mutable_start() = start;
  if (!stream->Write(req)) return Map(stream->Finish());
  stream->WritesDone();
  ExecResult result;
  bool exited = false;
  vmm::ExecResponse resp;
  auto keep = [&](std::string* into, const std::string& data) {
    size_t used = result.out.size() + result.err.size();
    size_t room = used >= cap ? 0 : cap - used;
    if (data.size() > room) result.incomplete = true;
    into->append(data, 0, std::min(room, data.size()));
  };
  while (stream->Read(&resp)) {
    switch (resp.msg_case()) {
      case vmm::ExecResponse::kStdout: keep(&result.out, resp.stdout()); break;
      case vmm::ExecResponse::kStderr: keep(&result.err, resp.stderr()); break;
      case vmm::ExecResponse::kExit:
        result.exit_code = resp.exit().code();
        exited = true;
        break;
      default: break;
    }
  }
  if (auto s = Map(stream->Finish()); !s.ok()) return s;
  if (!exited) return absl::UnavailableError("the process's exit status was lost");
  return result;
}

absl::StatusOr<std::string> VmmClient::ReadFile(const std::string& sandbox,
                                                const std::string& path, size_t max) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(600));
  AIRLOCK_TRACK(ctx);
  vmm::ReadFileRequest req;
  req.set_sandbox(sandbox);
  req.set_path(path);
  auto reader = stub_->ReadFile(&ctx, req);
  std::string data;
  vmm::FileChunk chunk;
  while (reader->Read(&chunk)) {
    data += chunk.data();
    if (data.size() > max) {
      ctx.TryCancel();
      while (reader->Read(&chunk)) {
      }
      (void)reader->Finish();
      return absl::OutOfRangeError(absl::StrCat(
          path, " is over ", max, " bytes, the most a read returns; use exec or download parts"));
    }
  }
  if (auto s = Map(reader->Finish()); !s.ok()) return s;
  return data;
}

absl::Status VmmClient::WriteFile(const std::string& sandbox, const std::string& path,
                                  uint32_t mode, const std::string& data) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(600));
  AIRLOCK_TRACK(ctx);
  vmm::WriteFileResponse resp;
  auto writer = stub_->WriteFile(&ctx, &resp);
  constexpr size_t kChunk = 256 * 1024;
  size_t off = 0;
  do {
    vmm::WriteFileRequest req;
    if (off == 0) {
      req.set_sandbox(sandbox);
      req.set_path(path);
      req.set_mode(mode);
    }
    size_t n = std::min(kChunk, data.size() - off);
    req.set_data(data.substr(off, n));
    off += n;
    if (!writer->Write(req)) break;
  } while (off < data.size());
  writer->WritesDone();
  return Map(writer->Finish());
}

absl::StatusOr<vmm::FileInfo> VmmClient::Stat(const std::string& sandbox,
                                              const std::string& path) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(60));
  vmm::StatRequest req;
  req.set_sandbox(sandbox);
  req.set_path(path);
  vmm::FileInfo resp;
  if (auto s = Map(stub_->Stat(&ctx, req, &resp)); !s.ok()) return s;
  return resp;
}

absl::StatusOr<std::vector<vmm::FileInfo>> VmmClient::ListDir(const std::string& sandbox,
                                                              const std::string& path) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(60));
  vmm::ListDirRequest req;
  req.set_sandbox(sandbox);
  req.set_path(path);
  vmm::ListDirResponse resp;
  if (auto s = Map(stub_->ListDir(&ctx, req, &resp)); !s.ok()) return s;
  return std::vector<vmm::FileInfo>(resp.entries().begin(), resp.entries().end());
}

absl::Status VmmClient::MakeDir(const std::string& sandbox, const std::string& path,
                                uint32_t mode, bool parents) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(60));
  vmm::MakeDirRequest req;
  req.set_sandbox(sandbox);
  req.set_path(path);
  req.set_mode(mode);
  req.set_parents(parents);
  vmm::Empty resp;
  return Map(stub_->MakeDir(&ctx, req, &resp));
}

absl::Status VmmClient::RemovePath(const std::string& sandbox, const std::string& path,
                                   bool recursive) {
  grpc::ClientContext ctx;
  Deadline(ctx, seconds(600));
  vmm::RemovePathRequest req;
  req.set_sandbox(sandbox);
  req.set_path(path);
  req.set_recursive(recursive);
  vmm::Empty resp;
  return Map(stub_->RemovePath(&ctx, req, &resp));
}

}  // namespace airlock::apid
