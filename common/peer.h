// Where a peer daemon is and how to dial it: a Unix socket on this host,
// or HOST:PORT on another host over mutual TLS. Plaintext TCP is never
// dialed, as it is never served (common/config.h).
#ifndef AIRLOCK_COMMON_PEER_H_
#define AIRLOCK_COMMON_PEER_H_

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/config.h"

namespace airlock {

// PeerTlsFiles names the PEM files a client presents over TCP: its
// certificate and key, and the CA the server's certificate must chain to.
struct PeerTlsFiles {
  std::string cert;
  std::string key;
  std::string ca;
};

// PeerTls is PeerTlsFiles read into memory, once, at start-up.
struct PeerTls {
  std::string cert_pem;
  std::string key_pem;
  std::string ca_pem;
};

// Peer is one daemon to dial. Copyable; dialing never fails (gRPC connects
// lazily), so every error is found when the Peer is made.
class Peer {
 public:
  Peer() = default;
  // Unix is the daemon serving on the socket `path`.
  static Peer Unix(std::string path);

  // Dial returns a new channel to the peer. A TCP peer's server must
  // present a certificate for the host in HOST:PORT that chains to the CA,
  // and it sees this side's client certificate.
  std::shared_ptr<grpc::Channel> Dial() const;

  // Address is the peer as the user gave it: the socket path or HOST:PORT.
  const std::string& address() const { return address_; }
  bool is_tcp() const { return tls_ != nullptr; }
  // For a Unix peer, its socket path; empty for TCP.
  const std::string& unix_path() const { return is_tcp() ? empty_ : address_; }

 private:
  friend absl::StatusOr<Peer> ParsePeer(absl::string_view option, absl::string_view value,
                                        std::shared_ptr<const PeerTls> tls);
  std::string address_;
  std::shared_ptr<const PeerTls> tls_;
  static const std::string empty_;
};

// ParsePeer reads an endpoint option's value: an absolute path (or
// "unix:PATH") is a Unix socket; "HOST:PORT" (IPv6 as "[ADDR]:PORT") is
// TCP, which needs `tls` (null means no --peer-tls-* files were given:
// INVALID_ARGUMENT saying which to give). `option` ("--policyd") names the
// option in errors.
absl::StatusOr<Peer> ParsePeer(absl::string_view option, absl::string_view value,
                               std::shared_ptr<const PeerTls> tls);

// ReadPeerTls reads the three files; all three or none must be given
// (none returns null). `names` holds the options (or variables) that gave
// each file, for errors.
absl::StatusOr<std::shared_ptr<const PeerTls>> ReadPeerTls(const PeerTlsFiles& files,
                                                          const PeerTlsFiles& names);

// PeerOptions are the options of a daemon that calls `peers` ("policyd",
// "secretsd"): --NAME (Unix path or HOST:PORT) for each, its older alias
// --NAME-socket, and --peer-tls-cert, --peer-tls-key, --peer-tls-ca.
std::vector<OptionSpec> PeerOptions(const std::vector<std::string>& peers);

// PeerFromConfig is the peer `name` of a daemon configured with
// PeerOptions: --NAME or --NAME-socket (giving both is an error), default
// <runtime-dir>/NAME.sock.
absl::StatusOr<Peer> PeerFromConfig(const DaemonConfig& config, const std::string& name);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_PEER_H_
