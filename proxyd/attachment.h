// One sandbox's egress as proxyd carries it. An Attachment follows the
// sandbox's compiled policy from policyd (each snapshot replaces the last
// at once, so rule changes reach running sandboxes without a restart) and
// keeps the egress tunnel open on the sandbox's egress port: every guest
// connection and DNS query arrives there (one stream each of the tunnel,
// common/egress_mux.h), named by the port it came in on, never by anything
// the guest sends. Each connection takes a slot of the caps
// (proxyd/connections.h) before any work, then is decided and carried by a
// handler of its own (a fiber, proxyd/fibers.h) on one end of a socket
// pair whose other end the mux carries; see attachment.cc for the paths (forward, transparent,
// intercepted).
#ifndef AIRLOCK_PROXYD_ATTACHMENT_H_
#define AIRLOCK_PROXYD_ATTACHMENT_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "common/egress_mux.h"
#include "common/peer.h"
#include "common/policy/rules.h"
#include "proxyd/connections.h"
#include "proxyd/decision_log.h"
#include "proxyd/operator_network.h"
#include "proxyd/secrets_client.h"
#include "proxyd/inject.h"
#include "proxyd/tls.h"
#include "proxyd/upstream.h"

namespace airlock::proxyd {

// What every attachment shares: the CA, the upstream TLS context, the
// resolver, the decision log and where policyd is.
struct ProxyContext {
  CertificateAuthority* ca = nullptr;
  // The operator's network settings (trusted ranges, TLS terminated).
  OperatorNetwork network;
  std::shared_ptr<SSL_CTX> upstream_tls;
  // What upstream_tls verifies against, for people ("the host's trust
  // store + 1 extra CA file").
  std::string upstream_trust = "the host's trust store";
  Resolver resolver;
  DecisionLog* log = nullptr;
  // policyd, asked for the sandbox's compiled policy.
  Peer policyd;
  // secretsd, asked for the credentials of each allowed request (null:
  // none are placed).
  SecretsClient* secrets = nullptr;
  // Open connections, per sandbox and in all.
  std::shared_ptr<ConnectionCaps> caps = std::make_shared<ConnectionCaps>();
  // The loops every attachment's connection handlers run on.
  std::shared_ptr<FiberLoops> loops = std::make_shared<FiberLoops>();
};

// DialUpstream opens the connection to an allowed upstream: through the
// operator's upstream proxy (CONNECT host:port) when it applies to `host`,
// else directly to `addr` (null only when the proxy is used: it may
// resolve names the host cannot).
absl::StatusOr<int> DialUpstream(const ProxyContext& px, const std::string& host,
                                 const Address* addr, uint16_t port,
                                 std::chrono::seconds timeout);

class Attachment {
 public:
  Attachment(std::string sandbox, std::string channel_path, ProxyContext* px);
  ~Attachment();
  Attachment(const Attachment&) = delete;
  Attachment& operator=(const Attachment&) = delete;

  // Start begins following the policy and the egress port.
  void Start();
  // WaitReady waits until the guest has the CA and its egress is watched.
  absl::Status WaitReady(std::chrono::seconds timeout);

  const std::string& sandbox() const;
  const std::string& channel_path() const;
  uint64_t policy_revision() const;
  uint64_t open_connections() const;

  struct State;

 private:
  std::shared_ptr<State> state_;
  std::thread policy_thread_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_ATTACHMENT_H_
