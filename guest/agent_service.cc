#include "guest/agent_service.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <mutex>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/status.h"
#include "guest/boot.h"
#include "guest/exec_process.h"
#include "guest/files.h"
#include "guest/identity.h"
#include "guest/mounts.h"
#include "guest/port_forward.h"
#include "guest/users.h"

namespace airlock::guest {

namespace agentpb = airlock::agent::v1;

namespace {

// OwnerOf resolves a file call's owner as an exec's user is resolved.
absl::StatusOr<FileOwner> OwnerOf(const std::string& spec) {
  auto user = ResolveUser(spec, ReadFileToString("/etc/passwd"), ReadFileToString("/etc/group"));
  if (!user.ok()) return user.status();
  return FileOwner{user->uid, user->gid};
}

}  // namespace

grpc::Status AgentService::Ping(grpc::ServerContext*, const agentpb::PingRequest*,
                                agentpb::PingResponse* out) {
  struct utsname u;
  uname(&u);
  out->set_kernel(u.release);
  double uptime = 0;
  std::ifstream("/proc/uptime") >> uptime;
  out->set_uptime(uptime);
  return grpc::Status::OK;
}

grpc::Status AgentService::Exec(
    grpc::ServerContext* ctx,
    grpc::ServerReaderWriter<agentpb::ExecResponse, agentpb::ExecRequest>* stream) {
  agentpb::ExecRequest first;
  if (!stream->Read(&first) || !first.has_start()) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        "the first message of an exec stream must be `start`");
  }
  // A process may mount overlayfs (a Docker Engine does): the modules
  // loaded after boot are in first.
  if (absl::Status s = AwaitLateModules(); !s.ok()) return ToGrpc(s);
  const agentpb::ExecStart& start = first.start();
  ExecSpec spec;
  spec.argv.assign(start.argv().begin(), start.argv().end());
  spec.env.assign(start.env().begin(), start.env().end());
  spec.user = start.user();
  spec.workdir = start.workdir();
  spec.tty = start.tty();
  spec.rows = start.size().rows();
  spec.cols = start.size().cols();
  spec.stdin = start.stdin() && !start.detach();

  std::mutex write_mu;
  auto send = [&](const agentpb::ExecResponse& r) {
    std::lock_guard<std::mutex> lock(write_mu);
    stream->Write(r);
  };
  ExecOutcome failed;
  std::string message;
  std::unique_ptr<ExecProcess> proc = ExecProcess::Start(spec, &failed, &message);
  agentpb::ExecResponse resp;
  if (proc == nullptr) {
    resp.set_stderr(message + "\n");
    send(resp);
    resp.Clear();
    resp.mutable_exit()->set_code(failed.code);
    send(resp);
    agentpb::ExecRequest ignored;
    while (stream->Read(&ignored)) {
    }
    return grpc::Status::OK;
  }
  resp.set_started_pid(proc->pid());
  send(resp);
  if (start.detach()) {
    proc->Detach();
    resp.Clear();
    resp.mutable_exit()->set_code(0);
    send(resp);
    agentpb::ExecRequest ignored;
    while (stream->Read(&ignored)) {
    }
    return grpc::Status::OK;
  }

  // Requests (stdin, resize, signals) are read on their own thread until the
  // client closes its side, which it does after it has seen `exit`.
  std::thread reader([&] {
    agentpb::ExecRequest req;
    while (stream->Read(&req)) {
      switch (req.msg_case()) {
        case agentpb::ExecRequest::kStdin:
          proc->WriteStdin(req.stdin());
          break;
        case agentpb::ExecRequest::kStdinEof:
          proc->CloseStdin();
          break;
        case agentpb::ExecRequest::kResize:
          proc->Resize(req.resize().rows(), req.resize().cols());
          break;
        case agentpb::ExecRequest::kSignal:
          proc->Signal(req.signal());
          break;
        default:
          break;
      }
    }
    // The client went away before the process ended: end the process too.
    if (ctx->IsCancelled()) proc->Signal(SIGKILL);
  });
  ExecOutcome outcome = proc->Pump([&](Stream s, absl::string_view data) {
    agentpb::ExecResponse out;
    if (s == Stream::kStdout) {
      out.set_stdout(std::string(data));
    } else {
      out.set_stderr(std::string(data));
    }
    send(out);
  });
  resp.Clear();
  resp.mutable_exit()->set_code(outcome.code);
  resp.mutable_exit()->set_signal(outcome.signal);
  send(resp);
  reader.join();
  return grpc::Status::OK;
}

grpc::Status AgentService::ReadFile(grpc::ServerContext*, const agentpb::ReadFileRequest* req,
                                    grpc::ServerWriter<agentpb::FileChunk>* writer) {
  return ToGrpc(ReadFileChunks(req->path(), [&](absl::string_view data) {
    agentpb::FileChunk chunk;
    chunk.set_data(std::string(data));
    return writer->Write(chunk);
  }));
}

grpc::Status AgentService::WriteFile(grpc::ServerContext*,
                                     grpc::ServerReader<agentpb::WriteFileRequest>* reader,
                                     agentpb::WriteFileResponse* out) {
  agentpb::WriteFileRequest req;
  if (!reader->Read(&req)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no file named");
  }
  std::optional<FileOwner> owner;
  if (req.has_owner()) {
    auto o = OwnerOf(req.owner());
    if (!o.ok()) return ToGrpc(o.status());
    owner = *o;
  }
  Placement placement = Placement::kInPlace;
  switch (req.placement()) {
    case agentpb::WRITE_REPLACE:
      placement = Placement::kReplace;
      break;
    case agentpb::WRITE_IF_ABSENT:
      placement = Placement::kIfAbsent;
      break;
    case agentpb::WRITE_IN_PLACE:
      break;
    default:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                          absl::StrCat("unknown write placement ", req.placement()));
  }
  FileWriter w;
  if (absl::Status s = w.Open(req.path(), req.mode(), placement, owner); !s.ok()) return ToGrpc(s);
  do {
    if (absl::Status s = w.Write(req.data()); !s.ok()) return ToGrpc(s);
  } while (reader->Read(&req));
  if (absl::Status s = w.Close(); !s.ok()) return ToGrpc(s);
  out->set_bytes_written(w.written());
  out->set_kept_existing(w.kept_existing());
  return grpc::Status::OK;
}

grpc::Status AgentService::Stat(grpc::ServerContext*, const agentpb::StatRequest* req,
                                agentpb::FileInfo* out) {
  auto info = StatPath(req->path());
  if (!info.ok()) return ToGrpc(info.status());
  *out = *info;
  return grpc::Status::OK;
}

grpc::Status AgentService::ListDir(grpc::ServerContext*, const agentpb::ListDirRequest* req,
                                   agentpb::ListDirResponse* out) {
  auto entries = ListDirectory(req->path());
  if (!entries.ok()) return ToGrpc(entries.status());
  for (auto& e : *entries) *out->add_entries() = std::move(e);
  return grpc::Status::OK;
}

grpc::Status AgentService::MakeDir(grpc::ServerContext*, const agentpb::MakeDirRequest* req,
                                   agentpb::Empty*) {
  std::optional<FileOwner> owner;
  if (req->has_owner()) {
    auto o = OwnerOf(req->owner());
    if (!o.ok()) return ToGrpc(o.status());
    owner = *o;
  }
  return ToGrpc(MakeDirectory(req->path(), req->mode(), req->parents(), owner));
}

grpc::Status AgentService::RemovePath(grpc::ServerContext*, const agentpb::RemovePathRequest* req,
                                      agentpb::Empty*) {
  return ToGrpc(guest::RemovePath(req->path(), req->recursive()));
}

grpc::Status AgentService::Mount(grpc::ServerContext*, const agentpb::MountRequest* req,
                                 agentpb::Empty*) {
  if (absl::Status s = AwaitLateModules(); !s.ok()) return ToGrpc(s);  // virtiofs
  return ToGrpc(MountShare(req->tag(), req->path(), req->read_only(), req->file(),
                           absl::Milliseconds(std::min<uint32_t>(req->wait_ms(), 60000))));
}

grpc::Status AgentService::PortForward(
    grpc::ServerContext*, grpc::ServerReaderWriter<agentpb::PortData, agentpb::PortData>* stream) {
  agentpb::PortData first;
  if (!stream->Read(&first)) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no port named");
  }
  auto fd = ConnectLoopback(first.port());
  if (!fd.ok()) return ToGrpc(fd.status());
  // Host -> guest on a thread of its own; guest -> host here.
  std::thread inbound([&, sock = *fd] {
    agentpb::PortData in;
    while (stream->Read(&in)) {
      WriteAll(sock, in.data());
      if (in.eof()) shutdown(sock, SHUT_WR);
    }
    // The host side is gone entirely: stop reading from the socket too.
    shutdown(sock, SHUT_RDWR);
  });
  PumpSocket(*fd, [&](absl::string_view data, bool eof) {
    agentpb::PortData out;
    out.set_data(std::string(data));
    out.set_eof(eof);
    return stream->Write(out);
  });
  inbound.join();
  close(*fd);
  return grpc::Status::OK;
}

grpc::Status AgentService::Shutdown(grpc::ServerContext*, const agentpb::ShutdownRequest*,
                                    agentpb::Empty*) {
  // Reply first; power off a moment later so the reply leaves the channel.
  std::thread([f = power_off_] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    f();
  }).detach();
  return grpc::Status::OK;
}

grpc::Status AgentService::Claim(grpc::ServerContext*, const agentpb::ClaimRequest* req,
                                 agentpb::Empty*) {
  if (absl::Status s = ValidateClaim(*req); !s.ok()) return ToGrpc(s);
  if (!claim_) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "this agent is not a guest's init: it has no identity to take");
  }
  return ToGrpc(claim_(*req));
}

}  // namespace airlock::guest
