// apid's one client of vmmd: the calls the REST API needs, each returning
// absl::Status with vmmd's own code and message, and a plain sentence when
// vmmd does not answer at all.
#ifndef AIRLOCK_APID_VMM_CLIENT_H_
#define AIRLOCK_APID_VMM_CLIENT_H_

#include <chrono>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "protos/vmm/v1/vmm.grpc.pb.h"

namespace airlock::apid {

// ExecResult is a command run to completion with its output captured.
struct ExecResult {
  int exit_code = 0;
  std::string out;
  std::string err;
  // The combined output passed the cap; the rest was read and dropped.
  bool incomplete = false;
};

// ExecSession is one running process's Exec stream: responses are read by
// one thread; requests (stdin, resize, signal) may be written from any.
class ExecSession {
 public:
  ExecSession() = default;
  bool Read(airlock::vmm::v1::ExecResponse* resp) { return stream_->Read(resp); }
  bool Write(const airlock::vmm::v1::ExecRequest& req);
  // CloseWrites ends the client side (after the exit arrived).
  void CloseWrites();
  // Cancel ends the call; vmmd kills the process.
  void Cancel() { ctx_.TryCancel(); }
  absl::Status Finish();

 private:
  friend class VmmClient;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<airlock::vmm::v1::ExecRequest,
                                           airlock::vmm::v1::ExecResponse>>
      stream_;
  std::mutex write_mu_;
  bool writes_done_ = false;
};

class VmmClient {
 public:
  explicit VmmClient(std::shared_ptr<grpc::Channel> channel);

  // CancelAll ends every long call in flight (exec, file transfers,
  // pulls) and refuses new ones: apid is stopping.
  void CancelAll();

  absl::StatusOr<airlock::vmm::v1::Sandbox> Create(const airlock::vmm::v1::SandboxSpec& spec);
  absl::StatusOr<airlock::vmm::v1::Sandbox> Get(const std::string& name);
  absl::StatusOr<std::vector<airlock::vmm::v1::Sandbox>> List();
  absl::StatusOr<airlock::vmm::v1::Sandbox> Start(const std::string& name);
  absl::StatusOr<airlock::vmm::v1::Sandbox> Stop(const std::string& name);
  absl::Status Remove(const std::string& name);
  absl::StatusOr<airlock::vmm::v1::Sandbox> SetDisplayName(const std::string& name,
                                                          const std::string& display_name);
  absl::StatusOr<airlock::vmm::v1::Sandbox> RenewTimeout(const std::string& name,
                                                        uint64_t seconds);
  // EnsureImage makes `ref` available: pulled (by vmmd, from its registry)
  // when `always` or when the store lacks it, as `airlock run -t` does.
  absl::Status EnsureImage(const std::string& ref, bool always);
  absl::StatusOr<std::vector<airlock::vmm::v1::Image>> ListImages();
  absl::StatusOr<airlock::vmm::v1::Image> InspectImage(const std::string& ref);
  absl::Status RemoveImage(const std::string& ref);
  absl::StatusOr<std::vector<airlock::vmm::v1::PortMapping>> ListPorts(const std::string& name);
  absl::StatusOr<airlock::vmm::v1::PortMapping> PublishPort(const std::string& name,
                                                           uint32_t sandbox_port);
  absl::Status UnpublishPort(const std::string& name, const airlock::vmm::v1::PortMapping& m);

  // StartExec starts a process and returns its stream.
  absl::StatusOr<std::unique_ptr<ExecSession>> StartExec(const airlock::vmm::v1::ExecStart& start);
  // Exec runs `start` to completion, keeping at most `cap` bytes of
  // stdout and stderr together.
  absl::StatusOr<ExecResult> Exec(const airlock::vmm::v1::ExecStart& start, size_t cap);

  // ReadFile reads a whole file; OUT_OF_RANGE past `max` bytes.
  absl::StatusOr<std::string> ReadFile(const std::string& sandbox, const std::string& path,
                                       size_t max);
  absl::Status WriteFile(const std::string& sandbox, const std::string& path, uint32_t mode,
                         const std::string& data);
  absl::StatusOr<airlock::vmm::v1::FileInfo> Stat(const std::string& sandbox,
                                                 const std::string& path);
  absl::StatusOr<std::vector<airlock::vmm::v1::FileInfo>> ListDir(const std::string& sandbox,
                                                                 const std::string& path);
  absl::Status MakeDir(const std::string& sandbox, const std::string& path, uint32_t mode,
                       bool parents);
  absl::Status RemovePath(const std::string& sandbox, const std::string& path, bool recursive);

 private:
  // Track registers a long call's context for CancelAll; false once
  // stopping.
  bool Track(grpc::ClientContext* ctx);
  void Untrack(grpc::ClientContext* ctx);

  std::unique_ptr<airlock::vmm::v1::Vmm::Stub> stub_;
  std::mutex calls_mu_;
  std::set<grpc::ClientContext*> calls_;
  bool closed_ = false;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_VMM_CLIENT_H_
