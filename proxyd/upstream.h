// Where proxyd sends a sandbox's allowed connections: name resolution on
// the host (an operator's static map first, then the host resolver), the
// address ranges a name must never silently reach, the synthetic addresses
// the guest's DNS answers carry, and the outbound connect.
#ifndef AIRLOCK_PROXYD_UPSTREAM_H_
#define AIRLOCK_PROXYD_UPSTREAM_H_

#include <netinet/in.h>

#include <array>
#include <chrono>
#include <map>
#include <memory>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"

namespace airlock::proxyd {

using Address = std::array<uint8_t, 16>;  // IPv4 mapped into ::ffff:0:0/96

// IsProtected is true for addresses a host name from the host resolver may
// not lead to unless a rule names the address or its range: loopback,
// unspecified, RFC 1918 and other private or shared ranges, link-local
// (169.254.169.254 among them), multicast, reserved, the synthetic range
// and their IPv6 counterparts. (DNS rebinding cannot turn an allowed name
// into a path to the host's own services.)
bool IsProtected(const Address& addr);

std::string AddressText(const Address& addr);

// SyntheticNames gives each name a guest asks DNS for its own address in
// 198.18.0.0/15 (the benchmarking range, never routed), and maps it back
// when the guest connects there: the transparent path then knows the name
// without trusting anything the guest sends. Denied names get an address
// too, so a denial looks the same (403 or reset) however it was reached.
class SyntheticNames {
 public:
  // AddressFor returns the name's address, assigning the next one.
  std::array<uint8_t, 4> AddressFor(const std::string& name);
  // NameOf returns the name behind a synthetic address, or "".
  std::string NameOf(const Address& addr) const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<std::string> names_;  // index + 1 = host part of the address
  uint32_t next_reuse_ = 0;          // once full, the index reused next
};

// IsSynthetic is true for 198.18.0.0/15.
bool IsSynthetic(const Address& addr);

struct Resolved {
  Address address{};
  // From the operator's static map: trusted as written, even when the
  // address is protected (that is how a loopback upstream is reached).
  bool from_static_map = false;
};

class Resolver {
 public:
  using Clock = std::chrono::steady_clock;
  // Lookup asks the system's resolver for a name's first address, IPv4
  // first (a blocking call: a fiber runs it aside).
  using Lookup = std::function<absl::StatusOr<Address>(const std::string& host)>;

  // How long an answer of the system's resolver is kept. Every request
  // asked it before: a lookup here takes 0.2 to 0.3 ms, and now and then
  // waits out a lost packet (5 s). The address's checks (protected ranges)
  // apply to a kept answer as to a new one; a name that moves is followed
  // within this time. Failures are not kept.
  static constexpr std::chrono::seconds kKeepFor{30};
  static constexpr size_t kMaxKept = 4096;

  // `static_map` is "name=address" entries (the --resolve option);
  // `lookup` and `now` stand in for the system's resolver and clock in
  // tests.
  static absl::StatusOr<Resolver> Make(const std::vector<std::string>& static_map,
                                       Lookup lookup = nullptr,
                                       std::function<Clock::time_point()> now = Clock::now);

  // Resolve returns the first address of `host` (an IP literal is itself),
  // IPv4 first.
  absl::StatusOr<Resolved> Resolve(const std::string& host) const;

 private:
  struct Kept {
    std::mutex mu;
    std::unordered_map<std::string, std::pair<Address, Clock::time_point>> answers;
  };
  std::map<std::string, Address> static_map_;
  Lookup lookup_;
  std::function<Clock::time_point()> now_;
  std::shared_ptr<Kept> kept_ = std::make_shared<Kept>();
};

// Destination is where an allowed connection goes, checked and not yet
// connected: the address its name resolved to (after the protected-range
// check), or no address when only the operator's proxy can resolve the
// name; `via_proxy` when the connection is a tunnel through that proxy.
struct Destination {
  std::string host;
  uint16_t port = 0;
  bool resolved = false;
  Address address{};
  bool via_proxy = false;

  // PoolKey names the destination for kept connections (UpstreamPool):
  // two requests share a connection only when host, port, address (or
  // proxy) and `tls` are all the same.
  std::string PoolKey(bool tls) const;
};

// ConnectTo opens a TCP connection, left non-blocking (its waits go
// through Poll, fibers.h); the error says where and why.
absl::StatusOr<int> ConnectTo(const Address& addr, uint16_t port, std::chrono::seconds timeout);

// ProxyTunnel asks the HTTP proxy already connected on `fd` for a tunnel to
// `host`:`port` (CONNECT) and reads its answer. OK on a 2xx; otherwise
// UNAVAILABLE with the proxy's status line, e.g. "upstream proxy
// proxy.corp:3128 answered CONNECT example.com:443 with 403 Forbidden".
// `proxy` names the proxy in errors.
absl::Status ProxyTunnel(int fd, const std::string& proxy, const std::string& host, uint16_t port,
                         std::chrono::seconds timeout);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_UPSTREAM_H_
