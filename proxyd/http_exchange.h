// One HTTP exchange through proxyd, as a stage of its own:
//   request -> decide -> inject -> upstream -> response
// and a kept-alive client connection, whose every request comes back here
// to be decided on its own. What the stage needs from the rest of proxyd
// (the policy, connecting, secretsd, the decision log, upstream TLS) is the
// ExchangePeers interface: an attachment in proxyd, fakes in the unit test.
//
// Where it stops: the request head is parsed and the target checked here;
// the bytes before it (which path the connection took, TLS interception)
// are traffic_paths.cc's.
#ifndef AIRLOCK_PROXYD_HTTP_EXCHANGE_H_
#define AIRLOCK_PROXYD_HTTP_EXCHANGE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/proxy/v1/proxy.pb.h"
#include "proxyd/connections.h"
#include "proxyd/inject.h"
#include "proxyd/stream.h"
#include "proxyd/tls.h"
#include "proxyd/upstream.h"
#include "proxyd/upstream_pool.h"

namespace airlock::proxyd {

// The longest request or response head proxyd reads.
inline constexpr size_t kMaxHead = 64 * 1024;

// Verdict is a decision plus what the log and a 403 need.
struct Verdict {
  bool allow = false;
  bool inspect = false;
  std::string rule_id;
  std::string rule_text;  // "" for the default deny
  std::string reason;
  // Ids of the credentials placed in the request, comma-separated.
  std::string credential;
  // The deciding rule names an address or range (not a host name or "**").
  bool address_rule = false;
  // Path rules apply to the host (policy::Decision::path_rules).
  bool path_rules = false;
  // The deciding rule is "**" (any host), not one naming this host.
  bool any_host_rule = false;
};

// ErrorResponse is proxyd's own answer to a request it cannot serve
// (400, 422, 431, 502): text, closing the connection.
std::string ErrorResponse(int status, absl::string_view reason, absl::string_view body);

// ExchangePeers is what an exchange asks of the rest of proxyd.
class ExchangePeers {
 public:
  virtual ~ExchangePeers() = default;
  // Decide asks the current policy. `host` is a name, or "" with `addr`.
  virtual Verdict Decide(const std::string& host, const Address* addr, uint16_t port, bool http,
                         const std::string& method, const std::string& path) = 0;
  // Admit finds where an allowed destination's connection goes, without
  // connecting; it may turn the verdict to a deny (a protected address),
  // with an error.
  virtual absl::StatusOr<Destination> Admit(const std::string& host, uint16_t port,
                                            Verdict* v) = 0;
  // Dial connects an admitted destination.
  virtual absl::StatusOr<int> Dial(const Destination& d) = 0;
  // Credentials are what to place in a request to host:port (none when
  // secretsd has none or cannot be reached).
  virtual std::vector<Placement> Credentials(const std::string& host, uint16_t port) = 0;
  // Record writes one decision to the log.
  virtual void Record(const std::string& host, uint16_t port, const std::string& method,
                      const std::string& path, const Verdict& v, proxy::v1::Path via) = 0;
  // UpstreamTls makes the client handshake with `host` on `fd`, verifying it.
  virtual absl::StatusOr<UniqueSsl> UpstreamTls(int fd, const std::string& host) = 0;
  // Sockets tracks the upstream sockets (shut down when the attachment stops).
  virtual SocketSet* Sockets() = 0;
  // Pool keeps upstream connections between requests of this sandbox.
  virtual UpstreamPool* Pool() = 0;
};

// ServeRequests serves the request whose head is `head` and every later
// one the client sends on the same connection, each parsed, decided, given
// its credentials and sent upstream on its own, as long as both sides keep
// it alive. Upstream, a request goes on a connection kept from an earlier
// exchange with the same destination (Pool) or a new one; a kept
// connection that turns out closed before answering is replaced once.
// `conn_host` is "" for a forward proxy's client (the request line names
// the target), else the host the connection was decided for (the Host
// header must name it).
void ServeRequests(ExchangePeers& peers, Stream& client, std::string head,
                   const std::string& conn_host, uint16_t conn_port, proxy::v1::Path via);

// ServeHttp serves one request; true when the client connection may carry
// the next one (HTTP/1.1 without "Connection: close", a response whose end
// is known, all of both bodies carried).
bool ServeHttp(ExchangePeers& peers, Stream& client, const std::string& head,
               const std::string& conn_host, uint16_t conn_port, proxy::v1::Path via);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_HTTP_EXCHANGE_H_
