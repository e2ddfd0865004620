// The gRPC surface of the guest agent (airlock.agent.v1.Agent): exec
// streams, files, ping and shutdown. It translates between the protos and
// ExecProcess / files.h.
#ifndef AIRLOCK_GUEST_AGENT_SERVICE_H_
#define AIRLOCK_GUEST_AGENT_SERVICE_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "protos/agent/v1/agent.grpc.pb.h"

namespace airlock::guest {

class AgentService final : public airlock::agent::v1::Agent::Service {
 public:
  using ClaimFn = std::function<absl::Status(const airlock::agent::v1::ClaimRequest&)>;

  // `power_off` is called after a Shutdown reply is sent; in the guest it
  // stops every process, syncs and powers the VM off. `claim` applies a
  // valid Claim (identity.h's ApplyClaim in the guest); without it, Claim
  // is refused: an agent serving on a Unix socket is not a guest's init.
  explicit AgentService(std::function<void()> power_off, ClaimFn claim = nullptr)
      : power_off_(std::move(power_off)), claim_(std::move(claim)) {}

  grpc::Status Ping(grpc::ServerContext*, const airlock::agent::v1::PingRequest*,
                    airlock::agent::v1::PingResponse*) override;
  // Exec protocol: the first request is `start`; responses are started_pid,
  // output, then exactly one `exit`. After `exit` the client closes its
  // side, and the call ends OK.
  grpc::Status Exec(grpc::ServerContext*,
                    grpc::ServerReaderWriter<airlock::agent::v1::ExecResponse,
                                             airlock::agent::v1::ExecRequest>*) override;
  grpc::Status ReadFile(grpc::ServerContext*, const airlock::agent::v1::ReadFileRequest*,
                        grpc::ServerWriter<airlock::agent::v1::FileChunk>*) override;
  grpc::Status WriteFile(grpc::ServerContext*,
                         grpc::ServerReader<airlock::agent::v1::WriteFileRequest>*,
                         airlock::agent::v1::WriteFileResponse*) override;
  grpc::Status Stat(grpc::ServerContext*, const airlock::agent::v1::StatRequest*,
                    airlock::agent::v1::FileInfo*) override;
  grpc::Status ListDir(grpc::ServerContext*, const airlock::agent::v1::ListDirRequest*,
                       airlock::agent::v1::ListDirResponse*) override;
  grpc::Status MakeDir(grpc::ServerContext*, const airlock::agent::v1::MakeDirRequest*,
                       airlock::agent::v1::Empty*) override;
  grpc::Status RemovePath(grpc::ServerContext*, const airlock::agent::v1::RemovePathRequest*,
                          airlock::agent::v1::Empty*) override;
  grpc::Status Mount(grpc::ServerContext*, const airlock::agent::v1::MountRequest*,
                     airlock::agent::v1::Empty*) override;
  grpc::Status PortForward(grpc::ServerContext*,
                           grpc::ServerReaderWriter<airlock::agent::v1::PortData,
                                                    airlock::agent::v1::PortData>*) override;
  grpc::Status Shutdown(grpc::ServerContext*, const airlock::agent::v1::ShutdownRequest*,
                        airlock::agent::v1::Empty*) override;
  grpc::Status Claim(grpc::ServerContext*, const airlock::agent::v1::ClaimRequest*,
                     airlock::agent::v1::Empty*) override;

 private:
  std::function<void()> power_off_;
  ClaimFn claim_;
};

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_AGENT_SERVICE_H_
