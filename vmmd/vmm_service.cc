#include "vmmd/vmm_service.h"

#include <sys/stat.h>

#include <thread>
#include <type_traits>

#include "common/status.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/agent_messages.h"
#include "vmmd/images.h"

namespace airlock::vmmd {

namespace agentpb = airlock::agent::v1;
namespace vmm = airlock::vmm::v1;
using agentpb::Agent;

namespace {

// AgentStub returns a stub for the sandbox's agent or the status to reply.
grpc::Status AgentStub(SandboxManager* m, const std::string& name,
                       std::unique_ptr<Agent::Stub>* stub) {
  auto channel = m->AgentChannel(name);
  if (!channel.ok()) return ToGrpc(channel.status());
  *stub = Agent::NewStub(*channel);
  return grpc::Status::OK;
}

// Checked passes an agent call's status on, and marks the link broken when
// the agent could not be reached.
grpc::Status Checked(SandboxManager* m, const std::string& sandbox, grpc::Status s) {
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) m->AgentBroken(sandbox);
  return s;
}

// ForwardDeadline gives the agent call the deadline of the client's call.
void ForwardDeadline(grpc::ServerContext* server, grpc::ClientContext* client) {
  if (server->deadline() != std::chrono::system_clock::time_point::max()) {
    client->set_deadline(server->deadline());
  }
}

// Unary relays a unary agent call: the request translated for the agent,
// its reply (an AgentResp) translated back unless the call has none.
template <typename AgentResp, typename Req, typename Resp, typename Call>
grpc::Status Unary(SandboxManager* m, grpc::ServerContext* ctx, const Req& req, Resp* resp,
                   Call call) {
  std::unique_ptr<Agent::Stub> stub;
  if (grpc::Status s = AgentStub(m, req.sandbox(), &stub); !s.ok()) return s;
  grpc::ClientContext cctx;
  ForwardDeadline(ctx, &cctx);
  AgentResp out;
  grpc::Status s = Checked(m, req.sandbox(), ((*stub).*call)(&cctx, ToAgent(req), &out));
  if constexpr (!std::is_same_v<AgentResp, agentpb::Empty>) {
    if (s.ok()) *resp = FromAgent(out);
  }
  return s;
}

}  // namespace

grpc::Status VmmService::Create(grpc::ServerContext*, const vmm::CreateRequest* req,
                                vmm::CreateResponse* resp) {
  auto sb = manager_->Create(req->spec(), req->start());
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp->mutable_sandbox() = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::Get(grpc::ServerContext*, const vmm::GetRequest* req, Sandbox* resp) {
  auto sb = manager_->Get(req->name());
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::SetDisplayName(grpc::ServerContext*,
                                        const vmm::SetDisplayNameRequest* req, Sandbox* resp) {
  auto sb = manager_->SetDisplayName(req->name(), req->display_name());
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::RenewTimeout(grpc::ServerContext*, const vmm::RenewTimeoutRequest* req,
                                      Sandbox* resp) {
  auto sb = manager_->RenewTimeout(req->name(), req->timeout_seconds());
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::List(grpc::ServerContext*, const vmm::ListRequest*,
                              vmm::ListResponse* resp) {
  for (auto& sb : manager_->List()) *resp->add_sandboxes() = std::move(sb);
  return grpc::Status::OK;
}

grpc::Status VmmService::Watch(grpc::ServerContext* ctx, const vmm::WatchRequest* req,
                               grpc::ServerWriter<vmm::WatchEvent>* writer) {
  return ToGrpc(manager_->Watch(
      req->name(),
      [&](const Sandbox& sb, const std::string& progress) {
        vmm::WatchEvent ev;
        *ev.mutable_sandbox() = sb;
        ev.set_progress(progress);
        return writer->Write(ev);
      },
      [ctx] { return ctx->IsCancelled(); }));
}

grpc::Status VmmService::Start(grpc::ServerContext*, const vmm::StartRequest* req,
                               Sandbox* resp) {
  auto sb = manager_->Start(req->name());
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::Stop(grpc::ServerContext*, const vmm::StopRequest* req, Sandbox* resp) {
  auto sb = manager_->Stop(req->name(), static_cast<int>(req->timeout_seconds()));
  if (!sb.ok()) return ToGrpc(sb.status());
  *resp = *sb;
  return grpc::Status::OK;
}

grpc::Status VmmService::Remove(grpc::ServerContext*, const vmm::RemoveRequest* req,
                                vmm::RemoveResponse*) {
  return ToGrpc(manager_->Remove(req->name(), req->force()));
}

grpc::Status VmmService::Exec(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<vmm::ExecResponse, vmm::ExecRequest>* stream) {
  vmm::ExecRequest first;
  if (!stream->Read(&first) || !first.has_start()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of an exec stream must be `start`");
  }
  auto spec = manager_->Get(first.start().sandbox(), /*with_host_memory=*/false);
  if (!spec.ok()) return ToGrpc(spec.status());
  std::unique_ptr<Agent::Stub> stub;
  if (grpc::Status s = AgentStub(manager_, first.start().sandbox(), &stub); !s.ok()) return s;
  // The sandbox's own environment goes first; the request's entries win.
  vmm::ExecStart* start = first.mutable_start();
  // In direct mode the workspace is the first shared directory.
  if (start->workdir().empty() && spec->spec().mounts_size() > 0 && !spec->spec().clone()) {
    struct stat st;
    const std::string& p = spec->spec().mounts(0).host_path();
    if (stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) start->set_workdir(p);
  }
  // Secrets first, as sentinels only (never a value): the kits' exported
  // args, the sandbox's spec env and the request's own entries come after
  // and win.
  auto sentinels = manager_->SecretSentinels(start->sandbox());
  if (!sentinels.ok()) return ToGrpc(sentinels.status());
  google::protobuf::RepeatedPtrField<std::string> env;
  // The image's own environment comes first of all (its PATH included).
  const vmm::ImageConfig& image = spec->image().config();
  // HOME, USER, LOGNAME and SHELL follow the exec's user, whatever the
  // image says.
  for (const auto& e : image.env()) {
    std::string key = e.substr(0, e.find('='));
    if (key == "HOME" || key == "USER" || key == "LOGNAME" || key == "SHELL") continue;
    *env.Add() = e;
  }
  for (const auto& [k, v] : *sentinels) *env.Add() = k + "=" + v;
  for (const auto& [k, v] : spec->kit_plan().env()) *env.Add() = k + "=" + v;
  for (const auto& [k, v] : spec->spec().env()) *env.Add() = k + "=" + v;
  // A granted privileged@1 makes root the default user.
  if (start->user().empty() && spec->kit_plan().privileged()) start->set_user("root");
  if (start->user().empty()) start->set_user(image.user());
  if (start->workdir().empty()) start->set_workdir(image.working_dir());
  env.MergeFrom(start->env());
  start->mutable_env()->Swap(&env);

  grpc::ClientContext cctx;
  auto upstream = stub->Exec(&cctx);
  if (!upstream->Write(ToAgent(first))) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the sandbox's agent did not accept exec");
  }
  // Client -> agent on this thread's helper; agent -> client here.
  std::thread forward([&] {
    vmm::ExecRequest req;
    while (stream->Read(&req)) {
      if (!upstream->Write(ToAgent(req))) break;
    }
    upstream->WritesDone();
    if (ctx->IsCancelled()) cctx.TryCancel();
  });
  agentpb::ExecResponse resp;
  bool exited = false;
  while (!exited && upstream->Read(&resp)) {
    exited = resp.has_exit();
    if (!stream->Write(FromAgent(resp))) {
      cctx.TryCancel();
      break;
    }
  }
  if (!exited) {
    // The agent went away (the VM stopped or crashed): end the client's
    // stream so its reader stops too.
    ctx->TryCancel();
  }
  forward.join();
  if (exited) {
    // Nothing follows an exit: the client has its answer now, not after
    // one more round trip to the guest for the agent's end of the stream
    // (the agent then leaves alone what the process left running).
    cctx.TryCancel();
    upstream->Finish();
    return grpc::Status::OK;
  }
  grpc::Status s = Checked(manager_, first.start().sandbox(), upstream->Finish());
  if (!exited && s.ok()) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "the sandbox stopped during exec");
  }
  return s;
}

grpc::Status VmmService::ReadFile(grpc::ServerContext* ctx, const vmm::ReadFileRequest* req,
                                  grpc::ServerWriter<vmm::FileChunk>* writer) {
  std::unique_ptr<Agent::Stub> stub;
  if (grpc::Status s = AgentStub(manager_, req->sandbox(), &stub); !s.ok()) return s;
  grpc::ClientContext cctx;
  ForwardDeadline(ctx, &cctx);
  auto reader = stub->ReadFile(&cctx, ToAgent(*req));
  agentpb::FileChunk chunk;
  while (reader->Read(&chunk)) {
    if (!writer->Write(FromAgent(chunk))) {
      cctx.TryCancel();
      break;
    }
  }
  return Checked(manager_, req->sandbox(), reader->Finish());
}

grpc::Status VmmService::WriteFile(grpc::ServerContext* ctx,
                                   grpc::ServerReader<vmm::WriteFileRequest>* reader,
                                   vmm::WriteFileResponse* resp) {
  vmm::WriteFileRequest req;
  if (!reader->Read(&req)) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no file named");
  std::unique_ptr<Agent::Stub> stub;
  if (grpc::Status s = AgentStub(manager_, req.sandbox(), &stub); !s.ok()) return s;
  // The first message names the sandbox; later ones may not repeat it.
  const std::string sandbox = req.sandbox();
  grpc::ClientContext cctx;
  ForwardDeadline(ctx, &cctx);
  agentpb::WriteFileResponse written;
  auto writer = stub->WriteFile(&cctx, &written);
  do {
    if (!writer->Write(ToAgent(req))) break;
  } while (reader->Read(&req));
  writer->WritesDone();
  grpc::Status s = Checked(manager_, sandbox, writer->Finish());
  if (s.ok()) *resp = FromAgent(written);
  return s;
}

grpc::Status VmmService::Stat(grpc::ServerContext* ctx, const vmm::StatRequest* req,
                              vmm::FileInfo* resp) {
  return Unary<agentpb::FileInfo>(manager_, ctx, *req, resp, &Agent::Stub::Stat);
}

grpc::Status VmmService::ListDir(grpc::ServerContext* ctx, const vmm::ListDirRequest* req,
                                 vmm::ListDirResponse* resp) {
  return Unary<agentpb::ListDirResponse>(manager_, ctx, *req, resp, &Agent::Stub::ListDir);
}

grpc::Status VmmService::MakeDir(grpc::ServerContext* ctx, const vmm::MakeDirRequest* req,
                                 vmm::Empty* resp) {
  return Unary<agentpb::Empty>(manager_, ctx, *req, resp, &Agent::Stub::MakeDir);
}

grpc::Status VmmService::RemovePath(grpc::ServerContext* ctx, const vmm::RemovePathRequest* req,
                                    vmm::Empty* resp) {
  return Unary<agentpb::Empty>(manager_, ctx, *req, resp, &Agent::Stub::RemovePath);
}

grpc::Status VmmService::PublishPort(grpc::ServerContext*, const vmm::PublishPortRequest* req,
                                     vmm::PortMapping* resp) {
  auto m = manager_->PublishPort(req->sandbox(), req->port());
  if (!m.ok()) return ToGrpc(m.status());
  *resp = *m;
  return grpc::Status::OK;
}

grpc::Status VmmService::UnpublishPort(grpc::ServerContext*, const vmm::UnpublishPortRequest* req,
                                       vmm::Empty*) {
  return ToGrpc(manager_->UnpublishPort(req->sandbox(), req->port()));
}

grpc::Status VmmService::ListPorts(grpc::ServerContext*, const vmm::ListPortsRequest* req,
                                   vmm::ListPortsResponse* resp) {
  auto ports = manager_->ListPorts(req->sandbox());
  if (!ports.ok()) return ToGrpc(ports.status());
  for (const auto& p : *ports) *resp->add_ports() = p;
  return grpc::Status::OK;
}

grpc::Status VmmService::UpdateKits(grpc::ServerContext*, const vmm::UpdateKitsRequest* req,
                                    vmm::UpdateKitsResponse* resp) {
  auto r = manager_->UpdateKits(*req);
  if (!r.ok()) return ToGrpc(r.status());
  *resp = std::move(*r);
  return grpc::Status::OK;
}

grpc::Status VmmService::ListTemplates(grpc::ServerContext*, const vmm::ListTemplatesRequest*,
                                       vmm::ListTemplatesResponse* resp) {
  auto list = images_->List();
  if (!list.ok()) return ToGrpc(list.status());
  for (const auto& img : list->images()) {
    auto* out = resp->add_templates();
    out->set_name(img.names().empty() ? img.id() : img.names(0));
    out->set_digest(img.digest());
    out->set_disk_bytes(img.size_bytes());
  }
  return grpc::Status::OK;
}

}  // namespace airlock::vmmd
