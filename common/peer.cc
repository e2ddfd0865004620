#include "common/peer.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace airlock {
namespace {

grpc::ChannelArguments PeerChannelArgs() {
  grpc::ChannelArguments args;
  // Streams such as exec and file transfers carry large messages.
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // Retry a refused connection quickly instead of gRPC's default backoff of
  // a second and more, so a daemon that just (re)started is seen at once.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 50);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 500);
  return args;
}

// ValidTcpAddress accepts HOST:PORT and [IPV6]:PORT with a port 1..65535.
bool ValidTcpAddress(absl::string_view v) {
  size_t colon = v.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  absl::string_view host = v.substr(0, colon);
  int port = 0;
  if (!absl::SimpleAtoi(v.substr(colon + 1), &port) || port < 1 || port > 65535) return false;
  if (host.front() == '[') return host.size() > 2 && host.back() == ']';
  // An unbracketed IPv6 address is ambiguous.
  if (absl::StrContains(host, ':')) return false;
  for (char c : host) {
    if (!(absl::ascii_isalnum(c) || c == '.' || c == '-' || c == '_')) return false;
  }
  return true;
}

absl::StatusOr<std::string> ReadPem(absl::string_view option, const std::string& path) {
  std::ifstream f(path);
  std::stringstream buf;
  if (f) buf << f.rdbuf();
  if (!f || buf.str().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(option, "=", path, ": cannot read the file (missing, unreadable or empty)"));
  }
  return buf.str();
}

}  // namespace

const std::string Peer::empty_;

Peer Peer::Unix(std::string path) {
  Peer p;
  p.address_ = std::move(path);
  return p;
}

std::shared_ptr<grpc::Channel> Peer::Dial() const {
  if (tls_ == nullptr) {
    return grpc::CreateCustomChannel(absl::StrCat("unix:", address_),
                                     grpc::InsecureChannelCredentials(), PeerChannelArgs());
  }
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = tls_->ca_pem;
  ssl.pem_private_key = tls_->key_pem;
  ssl.pem_cert_chain = tls_->cert_pem;
  // The target's host is checked against the server certificate's names.
  return grpc::CreateCustomChannel(absl::StrCat("dns:///", address_),
                                   grpc::SslCredentials(ssl), PeerChannelArgs());
}

absl::StatusOr<Peer> ParsePeer(absl::string_view option, absl::string_view value,
                               std::shared_ptr<const PeerTls> tls) {
  absl::string_view v = value;
  if (absl::ConsumePrefix(&v, "unix:") || absl::StartsWith(v, "/")) {
    if (!absl::StartsWith(v, "/")) {
      return absl::InvalidArgumentError(
          absl::StrCat(option, "=", value, ": a Unix socket path must be absolute"));
    }
    return Peer::Unix(std::string(v));
  }
  if (!ValidTcpAddress(v)) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, "=", value,
        ": expected an absolute Unix socket path or HOST:PORT (IPv6 as [ADDR]:PORT)"));
  }
  if (tls == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, "=", value,
        " is TCP, which is dialed only with mutual TLS: give --peer-tls-cert, "
        "--peer-tls-key and --peer-tls-ca (plaintext TCP is never dialed)"));
  }
  Peer p;
  p.address_ = std::string(v);
  p.tls_ = std::move(tls);
  return p;
}

absl::StatusOr<std::shared_ptr<const PeerTls>> ReadPeerTls(const PeerTlsFiles& files,
                                                          const PeerTlsFiles& names) {
  int given = !files.cert.empty() + !files.key.empty() + !files.ca.empty();
  if (given == 0) return std::shared_ptr<const PeerTls>();
  if (given != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        names.cert, ", ", names.key, " and ", names.ca, " go together: give all three or none"));
  }
  auto cert = ReadPem(names.cert, files.cert);
  if (!cert.ok()) return cert.status();
  auto key = ReadPem(names.key, files.key);
  if (!key.ok()) return key.status();
  auto ca = ReadPem(names.ca, files.ca);
  if (!ca.ok()) return ca.status();
  auto tls = std::make_shared<PeerTls>();
  tls->cert_pem = *std::move(cert);
  tls->key_pem = *std::move(key);
  tls->ca_pem = *std::move(ca);
  return std::shared_ptr<const PeerTls>(std::move(tls));
}

std::vector<OptionSpec> PeerOptions(const std::vector<std::string>& peers) {
  std::vector<OptionSpec> out;
  for (const std::string& name : peers) {
    out.push_back({name,
                   absl::StrCat(name, "'s endpoint: a Unix socket path or HOST:PORT "
                                      "(mutual TLS) (default: <runtime-dir>/",
                                name, ".sock)"),
                   ""});
    out.push_back({absl::StrCat(name, "-socket"), absl::StrCat("same as --", name), ""});
  }
  out.push_back({"peer-tls-cert", "PEM client certificate presented to TCP peers", ""});
  out.push_back({"peer-tls-key", "PEM private key of --peer-tls-cert", ""});
  out.push_back({"peer-tls-ca", "PEM CA that TCP peers' server certificates must chain to", ""});
  return out;
}

absl::StatusOr<Peer> PeerFromConfig(const DaemonConfig& c, const std::string& name) {
  auto opt = [&c](const std::string& key) -> std::string {
    auto it = c.options.find(key);
    return it == c.options.end() ? "" : it->second;
  };
  std::string value = opt(name);
  std::string alias = opt(name + "-socket");
  if (!value.empty() && !alias.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", name, " and --", name, "-socket name the same peer: give one"));
  }
  if (value.empty()) value = alias;
  if (value.empty()) return Peer::Unix(absl::StrCat(c.runtime_dir, "/", name, ".sock"));
  auto tls = ReadPeerTls({opt("peer-tls-cert"), opt("peer-tls-key"), opt("peer-tls-ca")},
                         {"--peer-tls-cert", "--peer-tls-key", "--peer-tls-ca"});
  if (!tls.ok()) return tls.status();
  return ParsePeer(absl::StrCat("--", name), value, *tls);
}

}  // namespace airlock
