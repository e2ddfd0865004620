#include "vmmd/agent_messages.h"

namespace airlock::vmmd {

namespace agentpb = airlock::agent::v1;
namespace vmm = airlock::vmm::v1;

namespace {

agentpb::TerminalSize ToAgent(const vmm::TerminalSize& in) {
  agentpb::TerminalSize out;
  out.set_rows(in.rows());
  out.set_cols(in.cols());
  return out;
}

}  // namespace

agentpb::ExecStart ToAgent(const vmm::ExecStart& in) {
  agentpb::ExecStart out;
  *out.mutable_argv() = in.argv();
  *out.mutable_env() = in.env();
  out.set_user(in.user());
  out.set_workdir(in.workdir());
  out.set_tty(in.tty());
  if (in.has_size()) *out.mutable_size() = ToAgent(in.size());
  out.set_detach(in.detach());
  out.set_stdin(in.stdin());
  return out;
}

agentpb::ExecRequest ToAgent(const vmm::ExecRequest& in) {
  agentpb::ExecRequest out;
  switch (in.msg_case()) {
    case vmm::ExecRequest::kStart:
      *out.mutable_start() = ToAgent(in.start());
      break;
    case vmm::ExecRequest::kStdin:
      out.set_stdin(in.stdin());
      break;
    case vmm::ExecRequest::kStdinEof:
      out.set_stdin_eof(in.stdin_eof());
      break;
    case vmm::ExecRequest::kResize:
      *out.mutable_resize() = ToAgent(in.resize());
      break;
    case vmm::ExecRequest::kSignal:
      out.set_signal(in.signal());
      break;
    case vmm::ExecRequest::MSG_NOT_SET:
      break;
  }
  return out;
}

agentpb::ReadFileRequest ToAgent(const vmm::ReadFileRequest& in) {
  agentpb::ReadFileRequest out;
  out.set_path(in.path());
  return out;
}

agentpb::WriteFileRequest ToAgent(const vmm::WriteFileRequest& in) {
  agentpb::WriteFileRequest out;
  out.set_path(in.path());
  out.set_mode(in.mode());
  out.set_data(in.data());
  return out;
}

agentpb::StatRequest ToAgent(const vmm::StatRequest& in) {
  agentpb::StatRequest out;
  out.set_path(in.path());
  return out;
}

agentpb::ListDirRequest ToAgent(const vmm::ListDirRequest& in) {
  agentpb::ListDirRequest out;
  out.set_path(in.path());
  return out;
}

agentpb::MakeDirRequest ToAgent(const vmm::MakeDirRequest& in) {
  agentpb::MakeDirRequest out;
  out.set_path(in.path());
  out.set_mode(in.mode());
  out.set_parents(in.parents());
  return out;
}

agentpb::RemovePathRequest ToAgent(const vmm::RemovePathRequest& in) {
  agentpb::RemovePathRequest out;
  out.set_path(in.path());
  out.set_recursive(in.recursive());
  return out;
}

vmm::ExecResponse FromAgent(const agentpb::ExecResponse& in) {
  vmm::ExecResponse out;
  switch (in.msg_case()) {
    case agentpb::ExecResponse::kStartedPid:
      out.set_started_pid(in.started_pid());
      break;
    case agentpb::ExecResponse::kStdout:
      out.set_stdout(in.stdout());
      break;
    case agentpb::ExecResponse::kStderr:
      out.set_stderr(in.stderr());
      break;
    case agentpb::ExecResponse::kExit:
      out.mutable_exit()->set_code(in.exit().code());
      out.mutable_exit()->set_signal(in.exit().signal());
      break;
    case agentpb::ExecResponse::MSG_NOT_SET:
      break;
  }
  return out;
}

vmm::FileChunk FromAgent(const agentpb::FileChunk& in) {
  vmm::FileChunk out;
  out.set_data(in.data());
  return out;
}

vmm::WriteFileResponse FromAgent(const agentpb::WriteFileResponse& in) {
  vmm::WriteFileResponse out;
  out.set_bytes_written(in.bytes_written());
  return out;
}

vmm::FileInfo FromAgent(const agentpb::FileInfo& in) {
  vmm::FileInfo out;
  out.set_path(in.path());
  out.set_size(in.size());
  out.set_mode(in.mode());
  out.set_is_dir(in.is_dir());
  out.set_is_symlink(in.is_symlink());
  out.set_mtime(in.mtime());
  out.set_uid(in.uid());
  out.set_gid(in.gid());
  return out;
}

vmm::ListDirResponse FromAgent(const agentpb::ListDirResponse& in) {
  vmm::ListDirResponse out;
  for (const agentpb::FileInfo& e : in.entries()) *out.add_entries() = FromAgent(e);
  return out;
}

}  // namespace airlock::vmmd
