// The guest side of egress. The guest has no NIC: a dummy interface holds
// the default route and nftables (set up in the initramfs, see
// guest/egress.nft) redirects every outbound TCP connection to the agent's
// transparent listener and rejects everything else (UDP, ICMP, IPv6). The
// agent also runs a forward proxy endpoint and a DNS stub on loopback. It
// carries none of this itself: each connection and query goes to proxyd
// as a stream of the one tunnel proxyd opens on the sandbox's egress port
// (common/egress_transport.h); proxyd decides by policy and carries the
// bytes. The guest cannot name the sandbox it belongs to; proxyd knows it
// from the port it is attached to.
#ifndef AIRLOCK_GUEST_EGRESS_H_
#define AIRLOCK_GUEST_EGRESS_H_

#include <netinet/in.h>

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "common/egress_mux.h"
#include "common/egress_transport.h"
#include "protos/agent/v1/agent.pb.h"

namespace airlock::guest {

// Name of the virtio-serial port proxyd attaches to.
inline constexpr char kEgressPortName[] = "airlock.egress";
// Where the agent listens inside the guest.
inline constexpr uint16_t kTransparentPort = 15001;
inline constexpr uint16_t kForwardProxyPort = 3128;
inline constexpr char kDnsAddress[] = "127.0.0.53";
// Where the interception CA is written in the guest.
inline constexpr char kCaPath[] = "/usr/local/share/ca-certificates/airlock-egress-ca.crt";
inline constexpr char kSystemBundle[] = "/etc/ssl/certs/ca-certificates.crt";

// The environment every guest process gets for egress.
inline constexpr const char* kEgressEnvironment[] = {
    "HTTP_PROXY=http://127.0.0.1:3128",
    "HTTPS_PROXY=http://127.0.0.1:3128",
    "http_proxy=http://127.0.0.1:3128",
    "https_proxy=http://127.0.0.1:3128",
    "NO_PROXY=localhost,127.0.0.1,::1",
    "no_proxy=localhost,127.0.0.1,::1",
    "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
    "REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt",
    "GIT_SSL_CAINFO=/etc/ssl/certs/ca-certificates.crt",
    "NODE_EXTRA_CA_CERTS=/usr/local/share/ca-certificates/airlock-egress-ca.crt",
};

// InstallCa adds `pem` to the guest's trust store: its own file plus the
// system bundle (appended once), under `root` ("" for /).
absl::Status InstallCa(const std::string& root, const std::string& pem);

// WriteEgressConfig points the guest's resolver at the agent's DNS stub and
// puts the egress environment in /etc/environment and /etc/profile.d, so
// login shells and su see it too.
absl::Status WriteEgressConfig(const std::string& root);

class EgressService {
 public:
  EgressService() = default;
  ~EgressService();

  // Listen opens the transparent and forward listeners and the DNS socket
  // on the given loopback ports, and starts their threads. Tests pass
  // other ports (0 picks one); `dns_address` empty skips DNS.
  // `forwarded` also takes what egress.nft redirects from the guest's own
  // bridges (containers): the transparent listener on every address, and
  // a second DNS socket on the same port of every address (the
  // `dns_address` one still answers the guest's own resolver).
  absl::Status Listen(uint16_t transparent_port, uint16_t forward_port,
                      const std::string& dns_address, uint16_t dns_port,
                      bool forwarded = false);
  uint16_t transparent_port() const { return transparent_port_; }
  uint16_t forward_port() const { return forward_port_; }
  uint16_t dns_port() const { return dns_port_; }

  // Serve carries every guest connection and DNS query as streams of one
  // multiplexed tunnel (common/egress_mux.h) over `tunnel`
  // (common/egress_transport.h), until it ends; a new tunnel ends the
  // previous one. The caller owns `tunnel` and keeps it until Serve
  // returns.
  void Serve(EgressTransport* tunnel);

  // The root the CA is installed under; tests point it at a temp dir.
  void set_root(std::string root) { root_ = std::move(root); }

 private:
  struct PendingDns {
    int fd = -1;  // the socket the query came in on, which answers it
    sockaddr_storage from{};
    socklen_t from_len = 0;
    std::chrono::steady_clock::time_point since;
  };

  void AcceptLoop(int listen_fd, airlock::agent::v1::EgressVia via);
  void DnsLoop(int fd);
  void ExpireDns();
  void AnswerDns(uint64_t id, const std::string& packet);

  std::string root_;
  int transparent_fd_ = -1, forward_fd_ = -1, dns_fd_ = -1, dns_any_fd_ = -1;
  uint16_t transparent_port_ = 0, forward_port_ = 0, dns_port_ = 0;

  std::vector<std::thread> threads_;

  std::mutex mu_;
  bool stopping_ = false;
  uint64_t next_id_ = 1;  // odd stream ids, never reused
  // The live tunnel's mux and transport (null: none).
  std::shared_ptr<EgressMux> mux_;
  EgressTransport* tunnel_ = nullptr;
  std::map<uint64_t, PendingDns> dns_;
};

// ResetAndClose aborts a TCP connection with a reset.
void ResetAndClose(int fd);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_EGRESS_H_
