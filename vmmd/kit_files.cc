#include "vmmd/kit_files.h"

#include <algorithm>
#include <chrono>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/string_view.h"
#include "common/client.h"
#include "common/status.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/guest_run.h"

namespace airlock::vmmd {

namespace agentpb = airlock::agent::v1;
namespace pb = airlock::policy::v1;
using std::chrono::seconds;

namespace {

// kKitOwner is the owner the Kit spec gives kit files ("owned by the
// agent"), in the agent's user syntax: empty is "agent" when the guest has
// that user, else root.
constexpr char kKitOwner[] = "";

// Writing a large file under TCG takes a while; nothing here waits longer.
constexpr seconds kWriteTimeout(300);
constexpr seconds kCallTimeout(30);

// Failed is `s` from the agent, said of `what`.
absl::Status Failed(const std::string& what, const grpc::Status& s) {
  return absl::Status(FromGrpc(s).code(), absl::StrCat(what, ": ", s.error_message()));
}

// Root runs a fixed argv as root in the guest and returns its exit code.
absl::StatusOr<int> Root(std::shared_ptr<grpc::Channel> agent, std::vector<std::string> argv,
                         const std::string& what, std::string* output = nullptr) {
  auto r = GuestRun(agent, GuestCommand{std::move(argv), "root"});
  if (!r.ok()) return absl::UnavailableError(absl::StrCat(what, ": ", r.status().message()));
  if (output != nullptr) *output = r->second;
  return r->first;
}

absl::Status MakeDirectory(agentpb::Agent::Stub& stub, const std::string& path,
                           const std::string& what) {
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, kCallTimeout);
  agentpb::MakeDirRequest req;
  req.set_path(path);
  req.set_parents(true);
  req.set_owner(kKitOwner);
  agentpb::Empty empty;
  grpc::Status s = stub.MakeDir(&ctx, req, &empty);
  if (!s.ok()) return Failed(absl::StrCat(what, ": cannot make ", path), s);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<uint32_t> ParseKitMode(const std::string& mode, uint32_t fallback) {
  if (mode.empty()) return fallback;
  bool octal = (mode.size() == 3 || mode.size() == 4) &&
               std::all_of(mode.begin(), mode.end(), [](char c) { return c >= '0' && c <= '7'; });
  if (!octal) {
    return absl::InvalidArgumentError(absl::StrCat("mode \"", mode, "\" is not an octal mode"));
  }
  return static_cast<uint32_t>(std::stoul(mode, nullptr, 8));
}

absl::Status WriteKitFile(std::shared_ptr<grpc::Channel> agent, const pb::KitFile& file) {
  const std::string what = absl::StrCat("kit file ", file.path());
  auto mode = ParseKitMode(file.mode(), 0644);
  if (!mode.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", mode.status().message()));
  const std::string& path = file.path();
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the path must be absolute"));
  }
  auto stub = agentpb::Agent::NewStub(agent);
  if (absl::Status s =
          MakeDirectory(*stub, path.substr(0, std::max<size_t>(path.rfind('/'), 1)), what);
      !s.ok()) {
    return s;
  }
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, kWriteTimeout);
  agentpb::WriteFileResponse resp;
  auto writer = stub->WriteFile(&ctx, &resp);
  agentpb::WriteFileRequest req;
  req.set_path(path);
  req.set_mode(*mode);
  req.set_owner(kKitOwner);
  req.set_placement(file.overwrite() ? agentpb::WRITE_REPLACE : agentpb::WRITE_IF_ABSENT);
  absl::string_view rest = file.content();
  // One message at least, so an empty file is written too.
  do {
    absl::string_view chunk = rest.substr(0, kKitFileChunkBytes);
    rest.remove_prefix(chunk.size());
    req.set_data(std::string(chunk));
    if (!writer->Write(req)) break;
    req.Clear();
  } while (!rest.empty());
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  if (!s.ok()) return Failed(what, s);
  if (!resp.kept_existing() && resp.bytes_written() != file.content().size()) {
    return absl::InternalError(absl::StrCat(what, ": the agent wrote ", resp.bytes_written(),
                                            " of ", file.content().size(), " bytes"));
  }
  return absl::OkStatus();
}

absl::Status MakeKitVolume(std::shared_ptr<grpc::Channel> agent, const pb::KitVolume& volume) {
  const std::string& path = volume.path();
  const std::string what = absl::StrCat("kit volume ", path);
  // Every argv below ends with the path: absolute, it is never an option.
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(what, ": the path must be absolute"));
  }
  auto mode = ParseKitMode(volume.mode(), 0);
  if (!mode.ok())
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", mode.status().message()));
  auto stub = agentpb::Agent::NewStub(agent);
  if (absl::Status s = MakeDirectory(*stub, path, what); !s.ok()) return s;
  {
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, kCallTimeout);
    agentpb::StatRequest req;
    req.set_path(path);
    agentpb::FileInfo info;
    if (grpc::Status s = stub->Stat(&ctx, req, &info); !s.ok()) return Failed(what, s);
    // mount, chmod and a chown of the root would all act on a link's
    // target: a guest process must not choose where they land.
    if (info.is_symlink() || !info.is_dir()) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " is ", info.is_symlink() ? "a symbolic link" : "not a directory",
                       " in the guest; nothing is mounted or changed there"));
    }
  }
  if (volume.tmpfs()) {
    auto mounted = Root(agent, {"mountpoint", "-q", path}, what);
    if (!mounted.ok()) return mounted.status();
    if (*mounted != 0) {
      std::string opts = "nosuid,nodev";
      if (!volume.size().empty()) absl::StrAppend(&opts, ",size=", volume.size());
      std::string out;
      auto code = Root(agent, {"mount", "-t", "tmpfs", "-o", opts, "tmpfs", path}, what, &out);
      if (!code.ok()) return code.status();
      if (*code != 0) {
        return absl::FailedPreconditionError(
            absl::StrCat(what, ": mount -t tmpfs exited with ", *code, ": ", out));
      }
    }
  }
  // Without an agent:agent in the guest the root stays root's.
  if (auto code = Root(agent, {"chown", "-h", "agent:agent", path}, what); !code.ok()) {
    return code.status();
  }
  if (*mode != 0) {
    std::string out;
    auto code = Root(agent, {"chmod", absl::StrFormat("%04o", *mode), path}, what, &out);
    if (!code.ok()) return code.status();
    if (*code != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, ": chmod exited with ", *code, ": ", out));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::vmmd
