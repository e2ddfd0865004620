#include "vmmd/guest_run.h"

#include <chrono>

#include "common/client.h"
#include "common/status.h"
#include "protos/agent/v1/agent.grpc.pb.h"

namespace airlock::vmmd {

namespace agentpb = airlock::agent::v1;

absl::StatusOr<std::pair<int, std::string>> GuestRun(std::shared_ptr<grpc::Channel> channel,
                                                      const GuestCommand& cmd) {
  auto stub = agentpb::Agent::NewStub(channel);
  grpc::ClientContext ctx;
  DeadlineAfter(ctx, std::chrono::seconds(300));
  auto stream = stub->Exec(&ctx);
  agentpb::ExecRequest req;
  agentpb::ExecStart* start = req.mutable_start();
  for (const auto& a : cmd.argv) start->add_argv(a);
  for (const auto& e : cmd.env) start->add_env(e);
  start->set_user(cmd.user);
  start->set_detach(cmd.detach);
  start->set_workdir("/");
  stream->Write(req);
  std::string out;
  int code = -1;
  agentpb::ExecResponse resp;
  while (stream->Read(&resp)) {
    out += resp.stdout();
    out += resp.stderr();
    if (resp.has_exit()) {
      code = resp.exit().code();
      stream->WritesDone();
    }
  }
  grpc::Status s = stream->Finish();
  if (code < 0) return FromGrpc(s);
  return std::make_pair(code, out);
}

}  // namespace airlock::vmmd
