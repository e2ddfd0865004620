// The four daemons vmmd calls, each behind one small interface: gitd
// (review baselines, clone mode), proxyd (egress), secretsd (sentinels,
// kit credentials) and policyd (kits, a sandbox's own rules). Every failed
// call goes through PeerCallError, so a peer that does not answer, one that
// refuses, and one that breaks read the same way whichever call it was.
// The gRPC clients here are the real ones; the manager's tests give fakes.
#ifndef AIRLOCK_VMMD_PEER_CLIENTS_H_
#define AIRLOCK_VMMD_PEER_CLIENTS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/peer.h"
#include "protos/git/v1/git.pb.h"
#include "protos/policy/v1/policy.pb.h"
#include "protos/secrets/v1/secrets.pb.h"

namespace airlock::vmmd {

// PeerCallError is the error vmmd reports when a call to `daemon` (at
// `at`) that was to `action` ("record the review baseline of the shared
// paths") ended with `s`:
//   - OK: OK.
//   - UNAVAILABLE, DEADLINE_EXCEEDED: UNAVAILABLE "<daemon> at <address>
//     did not <action> (<message>); " and how to get it answering: `airlock
//     daemon start` for a local socket, or that it runs at HOST:PORT.
//   - the peer's refusals (INVALID_ARGUMENT, FAILED_PRECONDITION,
//     NOT_FOUND, ALREADY_EXISTS, OUT_OF_RANGE, RESOURCE_EXHAUSTED): the
//     same code, "<daemon> refused to <action>: <message>" — never "start
//     the daemon", it is running.
//   - PERMISSION_DENIED, UNAUTHENTICATED: the peer refused vmmd itself,
//     which is no fault of vmmd's caller: FAILED_PRECONDITION saying so.
//   - UNIMPLEMENTED: FAILED_PRECONDITION saying the two daemons' versions
//     differ.
//   - anything else (INTERNAL, UNKNOWN, DATA_LOSS, ABORTED, CANCELLED):
//     INTERNAL "<daemon> failed to <action>: <message>" — a peer's bug is
//     never the user's bad input.
absl::Status PeerCallError(absl::string_view daemon, const Peer& at, absl::string_view action,
                           const grpc::Status& s);

// PeerDown tells PeerCallError's "did not answer" (the peer is down, or
// broke off the call) from its refusals and faults.
inline bool PeerDown(const absl::Status& s) { return s.code() == absl::StatusCode::kUnavailable; }

// GitPeer is vmmd's view of gitd.
class GitPeer {
 public:
  virtual ~GitPeer() = default;
  // Baseline records the review baseline of a direct-mode sandbox's shared
  // host paths before the guest can touch them.
  virtual absl::Status Baseline(const std::string& sandbox,
                                const std::vector<std::string>& host_paths) = 0;
  // PrepareClone reads the host repo of a clone-mode sandbox.
  virtual absl::StatusOr<airlock::git::v1::PrepareCloneResponse> PrepareClone(
      const std::string& sandbox, const std::string& host_path, const std::string& branch) = 0;
  // Publish points the host repo's sandbox-<name> remote at `url`.
  virtual absl::Status Publish(const std::string& sandbox, const std::string& url) = 0;
  // Unpublish removes that remote and forgets the baseline.
  virtual absl::Status Unpublish(const std::string& sandbox) = 0;
};

// ProxyPeer is vmmd's view of proxyd.
class ProxyPeer {
 public:
  virtual ~ProxyPeer() = default;
  // Attach hands proxyd the sandbox's egress channel.
  virtual absl::Status Attach(const std::string& sandbox, const std::string& channel_path) = 0;
  // Detach drops it; a sandbox proxyd does not know is not an error.
  virtual absl::Status Detach(const std::string& sandbox) = 0;
};

// SecretsPeer is vmmd's view of secretsd; it never returns a secret value.
class SecretsPeer {
 public:
  virtual ~SecretsPeer() = default;
  // Sentinels registers the sandbox (once) and returns the guest's
  // credential variables: name -> sentinel.
  virtual absl::StatusOr<std::map<std::string, std::string>> Sentinels(
      const std::string& sandbox, bool without_globals, bool registry_credentials) = 0;
  // Forget drops the sandbox's registration and kit bindings, and its own
  // secrets unless `keep_secrets`.
  virtual absl::Status Forget(const std::string& sandbox, bool keep_secrets) = 0;
  // BindKit binds the kits' credentials of one phase.
  virtual absl::StatusOr<airlock::secrets::v1::BindKitResponse> BindKit(
      const airlock::secrets::v1::BindKitRequest& req) = 0;
};

// PolicyPeer is vmmd's view of policyd.
class PolicyPeer {
 public:
  virtual ~PolicyPeer() = default;
  // Resolve resolves and gates a sandbox's kits (create: grants them).
  virtual absl::StatusOr<airlock::policy::v1::ResolveResponse> Resolve(
      const airlock::policy::v1::ResolveRequest& req) = 0;
  // ForgetKits drops the sandbox's kit grant.
  virtual absl::Status ForgetKits(const std::string& sandbox) = 0;
  // ForgetSandboxRules removes every rule scoped to the sandbox alone.
  virtual absl::Status ForgetSandboxRules(const std::string& sandbox) = 0;
  // SetKitPhase puts the kits' network rules of `phase` in force.
  virtual absl::Status SetKitPhase(const std::string& sandbox, const std::string& phase) = 0;
  // ListHolds lists the sandbox's held kit updates.
  virtual absl::StatusOr<airlock::policy::v1::ListHoldsResponse> ListHolds(
      const std::string& sandbox) = 0;
  // Approve grants a held update, exactly as it was held.
  virtual absl::StatusOr<airlock::policy::v1::ApproveResponse> Approve(
      const std::string& hold_id) = 0;
};

// PeerClients holds one client per peer.
struct PeerClients {
  std::shared_ptr<GitPeer> git;
  std::shared_ptr<ProxyPeer> proxy;
  std::shared_ptr<SecretsPeer> secrets;
  std::shared_ptr<PolicyPeer> policy;
};

// GrpcPeerClients are the real clients of the daemons at these endpoints.
PeerClients GrpcPeerClients(const Peer& gitd, const Peer& proxyd, const Peer& secretsd,
                            const Peer& policyd);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_PEER_CLIENTS_H_
