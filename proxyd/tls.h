// TLS for intercepted connections. To enforce HTTP rules (methods, paths)
// on HTTPS, proxyd terminates the sandbox's TLS with a leaf certificate
// minted on the fly by a per-install CA that only sandboxes trust, and
// opens its own TLS connection to the real upstream, verified against the
// host's trust store exactly as a normal client would. This file holds both
// ends; it uses only OpenSSL API that BoringSSL also provides.
#ifndef AIRLOCK_PROXYD_TLS_H_
#define AIRLOCK_PROXYD_TLS_H_

#include <openssl/ssl.h>

#include <cstddef>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace airlock::proxyd {

// OpenSslFree frees the OpenSSL objects this API hands out or keeps.
struct OpenSslFree {
  void operator()(SSL* p) const { SSL_free(p); }
  void operator()(X509* p) const { X509_free(p); }
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};

// UniqueSsl owns one TLS connection. Freeing it does not close the socket,
// which stays the caller's.
using UniqueSsl = std::unique_ptr<SSL, OpenSslFree>;

// CertificateAuthority is the per-install interception CA: an EC P-256 key
// and self-signed certificate kept in a directory, and the leaf certificates
// it mints for the hosts sandboxes connect to. It is thread-safe.
class CertificateAuthority {
 public:
  // kMaxCachedLeaves bounds the context cache; beyond it the least recently
  // used host is dropped (connections using it keep their reference).
  static constexpr size_t kMaxCachedLeaves = 1024;

  // LoadOrCreate loads `dir`/ca.key and `dir`/ca.crt, or creates both when
  // neither exists. `dir` must exist. A key readable or writable by group or
  // others is refused (the error names it and says to chmod 600), as are an
  // expired certificate and one that does not match the key. A new key is
  // written with mode 0600 and the certificate 0644, each through a
  // temporary file and a rename, so a crash never leaves a partial file;
  // an flock on `dir` keeps two processes from creating two CAs, and an
  // existing CA is never replaced. When ca.key exists without ca.crt (a
  // crash between the two renames) a new certificate is issued for the key.
  static absl::StatusOr<std::unique_ptr<CertificateAuthority>> LoadOrCreate(const std::string& dir);

  CertificateAuthority(const CertificateAuthority&) = delete;
  CertificateAuthority& operator=(const CertificateAuthority&) = delete;

  // certificate_pem is the CA certificate, for sandboxes to trust.
  const std::string& certificate_pem() const { return certificate_pem_; }

  // ServerContextFor returns a TLS server context (TLS 1.2 and later; ALPN
  // answers "http/1.1" when the client offers it and nothing otherwise)
  // presenting a leaf for `host` and the CA certificate. The leaf has
  // CN=`host` (cut to 64 characters), one subjectAltName (DNS:`host`, or
  // IP:`host` for an IPv4/IPv6 literal written without brackets),
  // serverAuth only, and is valid from an hour ago for 30 days but never
  // past the CA. Host names are case-insensitive; anything but letters,
  // digits, '-', '_' and dot-separated labels is INVALID_ARGUMENT. The
  // context for a host is cached and returned again until its leaf has a
  // day left to live.
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ServerContextFor(const std::string& host);

  // cached_leaves is how many hosts have a cached context.
  size_t cached_leaves() const;

 private:
  struct CachedContext {
    std::string host;
    std::shared_ptr<SSL_CTX> ctx;
    absl::Time refresh_at;
  };
  using CacheList = std::list<CachedContext>;

  CertificateAuthority(std::unique_ptr<X509, OpenSslFree> cert,
                       std::unique_ptr<EVP_PKEY, OpenSslFree> key,
                       std::unique_ptr<EVP_PKEY, OpenSslFree> leaf_key, std::string pem);

  const std::unique_ptr<X509, OpenSslFree> cert_;
  const std::unique_ptr<EVP_PKEY, OpenSslFree> key_;
  // One key for every leaf, made fresh for each process: leaves differ by
  // name only, and a P-256 key generation per host would cost more than
  // the signature.
  const std::unique_ptr<EVP_PKEY, OpenSslFree> leaf_key_;
  const std::string certificate_pem_;

  mutable std::mutex mu_;
  CacheList lru_;  // most recently used first
  std::unordered_map<std::string, CacheList::iterator> by_host_;
};

// MakeUpstreamContext returns a TLS client context (TLS 1.2 and later,
// offering ALPN "http/1.1") that requires a peer certificate chaining to
// the host's default trust store or to a certificate in one of
// `extra_ca_files` (PEM, one or more certificates each). A file that cannot
// be read or holds no valid certificate is an error naming it.
absl::StatusOr<std::shared_ptr<SSL_CTX>> MakeUpstreamContext(
    const std::vector<std::string>& extra_ca_files);

// StartUpstreamTls performs the client handshake with `host` on the
// connected socket `fd` (waiting through Poll, fibers.h, while it is not
// ready): it sends SNI (not for an IP literal) and
// requires the certificate to be valid for `host` (as a DNS name, or as an
// IP address for a literal). A certificate that fails verification is
// UNAUTHENTICATED with the reason, e.g. "upstream certificate for
// api.example.com: certificate verify failed: unable to get local issuer
// certificate"; other failures are UNAVAILABLE. `ctx` is normally from
// MakeUpstreamContext.
absl::StatusOr<UniqueSsl> StartUpstreamTls(SSL_CTX* ctx, int fd, const std::string& host);

// AcceptClientTls performs the server handshake with a sandbox on the
// connected socket `fd` (waiting as StartUpstreamTls does), using a context from ServerContextFor.
// Failure is UNAVAILABLE with the reason (e.g. the client's alert).
absl::StatusOr<UniqueSsl> AcceptClientTls(SSL_CTX* server_ctx, int fd);
// The same over `bio` (taken in every case), waiting through `wait` (for
// POLLIN or POLLOUT; false when the wait timed out) while it is not
// ready: a guest connection's pipe (Stream::NewBio).
absl::StatusOr<UniqueSsl> AcceptClientTls(SSL_CTX* server_ctx, BIO* bio,
                                          const std::function<bool(short)>& wait);

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_TLS_H_
