#include "proxyd/tls.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "common/fd_io.h"
#include "proxyd/fibers.h"

namespace airlock::proxyd {
namespace {

template <auto kFree>
struct Free {
  template <typename T>
  void operator()(T* p) const {
    kFree(p);
  }
};
using UniqueX509 = std::unique_ptr<X509, OpenSslFree>;
using UniquePkey = std::unique_ptr<EVP_PKEY, OpenSslFree>;
using UniqueBio = std::unique_ptr<BIO, Free<BIO_free>>;
using UniquePkeyCtx = std::unique_ptr<EVP_PKEY_CTX, Free<EVP_PKEY_CTX_free>>;
using UniqueExtension = std::unique_ptr<X509_EXTENSION, Free<X509_EXTENSION_free>>;
using UniqueGeneralNames = std::unique_ptr<GENERAL_NAMES, Free<GENERAL_NAMES_free>>;
using UniqueGeneralName = std::unique_ptr<GENERAL_NAME, Free<GENERAL_NAME_free>>;
using UniqueBignum = std::unique_ptr<BIGNUM, Free<BN_free>>;
using UniqueAsn1Integer = std::unique_ptr<ASN1_INTEGER, Free<ASN1_INTEGER_free>>;

constexpr char kKeyFile[] = "ca.key";
constexpr char kCertFile[] = "ca.crt";
constexpr char kCaCommonName[] = "Airlock sandbox egress CA";
// Backdating covers clients whose clock is a little behind the host's.
constexpr long kBackdateSeconds = 3600;
constexpr int kCaLifetimeDays = 3652;  // ten years
constexpr int kLeafLifetimeDays = 30;
// A cached leaf is replaced a day before it expires, so no connection is
// handed a certificate about to run out.
constexpr absl::Duration kLeafRefreshAfter = absl::Hours(24 * (kLeafLifetimeDays - 1));
// ub-common-name in RFC 5280.
constexpr size_t kMaxCommonName = 64;
constexpr unsigned char kAlpnHttp11[] = "\x08http/1.1";

// DrainOpenSslErrors empties this thread's OpenSSL error queue into
// "reason; reason", or "" when it was empty.
std::string DrainOpenSslErrors() {
  std::string out;
  while (auto e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string text;
    if (reason != nullptr) {
      text = reason;
    } else {
      char buf[256];
      ERR_error_string_n(e, buf, sizeof(buf));
      text = buf;
    }
    if (absl::StrContains(out, text)) continue;
    if (!out.empty()) out += "; ";
    out += text;
  }
  return out;
}

absl::Status CryptoError(absl::string_view what) {
  std::string errors = DrainOpenSslErrors();
  return absl::InternalError(
      absl::StrCat(what, ": ", errors.empty() ? "unknown OpenSSL error" : errors));
}

absl::Status SysError(absl::string_view what, int err) {
  std::string message = absl::StrCat(what, ": ", strerror(err));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

// NoPassword refuses encrypted PEM: OpenSSL's default would prompt on the
// terminal, which would hang a daemon.
int NoPassword(char*, int, int, void*) { return -1; }

absl::StatusOr<std::string> ReadFd(int fd, const std::string& path) {
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SysError(absl::StrCat("reading ", path), errno);
    if (n == 0) return out;
    out.append(buf, n);
  }
}

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return SysError(path, errno);
  return ReadFd(fd.get(), path);
}

// WriteFileAtomically gives `dir`/`name` the content `data` and mode
// `mode` (regardless of umask), or leaves it as it was: the data goes to a
// fresh temporary file that is synced and then renamed over the name.
absl::Status WriteFileAtomically(int dirfd, const std::string& dir, const std::string& name,
                                 absl::string_view data, mode_t mode) {
  std::string tmp = name + ".tmp";
  std::string tmp_path = absl::StrCat(dir, "/", tmp);
  // A leftover from a crash; the caller holds the directory lock.
  if (unlinkat(dirfd, tmp.c_str(), 0) != 0 && errno != ENOENT) {
    return SysError(absl::StrCat("removing ", tmp_path), errno);
  }
  int raw = openat(dirfd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (raw < 0) return SysError(absl::StrCat("creating ", tmp_path), errno);
  {
    UniqueFd fd(raw);
    if (fchmod(fd.get(), mode) != 0) return SysError(absl::StrCat("chmod ", tmp_path), errno);
    if (!WriteAll(fd.get(), data)) return SysError(absl::StrCat("writing ", tmp_path), errno);
    if (fsync(fd.get()) != 0) return SysError(absl::StrCat("syncing ", tmp_path), errno);
  }
  if (renameat(dirfd, tmp.c_str(), dirfd, name.c_str()) != 0) {
    int err = errno;
    unlinkat(dirfd, tmp.c_str(), 0);
    return SysError(absl::StrCat("renaming ", tmp_path, " to ", name), err);
  }
  if (fsync(dirfd) != 0) return SysError(absl::StrCat("syncing ", dir), errno);
  return absl::OkStatus();
}

// HostName is a validated host: a lower-case DNS name or an IP literal.
struct HostName {
  std::string text;
  bool is_ip = false;
  unsigned char ip[16] = {};
  size_t ip_len = 0;
};

absl::StatusOr<HostName> ParseHost(absl::string_view raw) {
  auto bad = [raw](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid host name \"", absl::CHexEscape(raw), "\": ", why));
  };
  HostName h;
  h.text = absl::AsciiStrToLower(raw);
  if (h.text.empty()) return bad("empty");
  for (char c : h.text) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.' && c != ':') {
      return bad("only letters, digits, '-', '_', '.' and IP literals are allowed");
    }
  }
  if (inet_pton(AF_INET, h.text.c_str(), h.ip) == 1) {
    h.is_ip = true;
    h.ip_len = 4;
    return h;
  }
  if (inet_pton(AF_INET6, h.text.c_str(), h.ip) == 1) {
    h.is_ip = true;
    h.ip_len = 16;
    return h;
  }
  if (absl::StrContains(h.text, ':')) return bad("not an IP address, and ':' is not allowed");
  if (h.text.size() > 253) return bad("longer than 253 characters");
  for (absl::string_view label : absl::StrSplit(h.text, '.')) {
    if (label.empty()) return bad("empty label");
    if (label.size() > 63) return bad("label longer than 63 characters");
  }
  return h;
}

absl::StatusOr<UniquePkey> NewP256Key() {
  UniquePkeyCtx ctx(EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr));
  EVP_PKEY* key = nullptr;
  if (!ctx || EVP_PKEY_keygen_init(ctx.get()) <= 0 ||
      EVP_PKEY_CTX_set_ec_paramgen_curve_nid(ctx.get(), NID_X9_62_prime256v1) <= 0 ||
      EVP_PKEY_keygen(ctx.get(), &key) <= 0) {
    return CryptoError("generating a P-256 key");
  }
  return UniquePkey(key);
}

// SetRandomSerial gives `x` a positive 16-byte random serial (RFC 5280
// wants at most 20 bytes; CAs use at least 64 random bits).
absl::Status SetRandomSerial(X509* x) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return CryptoError("random serial");
  bytes[0] &= 0x7f;  // positive without a leading zero byte...
  bytes[0] |= 0x40;  // ...and never shorter than 16 bytes, never zero
  UniqueBignum bn(BN_bin2bn(bytes, sizeof(bytes), nullptr));
  if (!bn) return CryptoError("random serial");
  UniqueAsn1Integer serial(BN_to_ASN1_INTEGER(bn.get(), nullptr));
  if (!serial || X509_set_serialNumber(x, serial.get()) != 1) return CryptoError("random serial");
  return absl::OkStatus();
}

// AddExtension adds an extension written in openssl.cnf syntax; `issuer`
// supplies the authority key identifier, `subject` the key to hash.
absl::Status AddExtension(X509* issuer, X509* subject, int nid, const char* value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, subject, nullptr, nullptr, 0);
  UniqueExtension ext(X509V3_EXT_nconf_nid(nullptr, &ctx, nid, value));
  if (!ext || X509_add_ext(subject, ext.get(), -1) != 1) {
    return CryptoError(absl::StrCat("adding ", OBJ_nid2sn(nid), " \"", value, "\""));
  }
  return absl::OkStatus();
}

// AddSubjectAltName adds the single name for `host`. It builds the
// GENERAL_NAME directly rather than through the "DNS:..." text syntax, so
// no host text can add names of its own.
absl::Status AddSubjectAltName(X509* x, const HostName& host) {
  UniqueGeneralNames names(sk_GENERAL_NAME_new_null());
  UniqueGeneralName name(GENERAL_NAME_new());
  if (!names || !name) return CryptoError("subjectAltName");
  if (host.is_ip) {
    ASN1_OCTET_STRING* ip = ASN1_OCTET_STRING_new();
    if (ip == nullptr || ASN1_OCTET_STRING_set(ip, host.ip, static_cast<int>(host.ip_len)) != 1) {
      ASN1_OCTET_STRING_free(ip);
      return CryptoError("subjectAltName");
    }
    GENERAL_NAME_set0_value(name.get(), GEN_IPADD, ip);
  } else {
    ASN1_IA5STRING* dns = ASN1_IA5STRING_new();
    if (dns == nullptr ||
        ASN1_STRING_set(dns, host.text.data(), static_cast<int>(host.text.size())) != 1) {
      ASN1_IA5STRING_free(dns);
      return CryptoError("subjectAltName");
    }
    GENERAL_NAME_set0_value(name.get(), GEN_DNS, dns);
  }
  if (sk_GENERAL_NAME_push(names.get(), name.get()) == 0) return CryptoError("subjectAltName");
  name.release();  // owned by `names` now
  if (X509_add1_ext_i2d(x, NID_subject_alt_name, names.get(), 0, X509V3_ADD_DEFAULT) != 1) {
    return CryptoError("subjectAltName");
  }
  return absl::OkStatus();
}

absl::Status SetCommonName(X509_NAME* name, absl::string_view cn) {
  if (X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.data()),
                                 static_cast<int>(cn.size()), -1, 0) != 1) {
    return CryptoError("commonName");
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueX509> IssueCaCertificate(EVP_PKEY* key) {
  UniqueX509 x(X509_new());
  if (!x || X509_set_version(x.get(), 2 /* v3 */) != 1) return CryptoError("new CA certificate");
  if (absl::Status s = SetRandomSerial(x.get()); !s.ok()) return s;
  X509_NAME* name = X509_get_subject_name(x.get());
  if (absl::Status s = SetCommonName(name, kCaCommonName); !s.ok()) return s;
  if (X509_set_issuer_name(x.get(), name) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(x.get()), -kBackdateSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(x.get()), kCaLifetimeDays, 0, nullptr) == nullptr ||
      X509_set_pubkey(x.get(), key) != 1) {
    return CryptoError("new CA certificate");
  }
  // pathlen:0 because this CA only ever signs leaves.
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            std::pair{NID_key_usage, "critical,keyCertSign,cRLSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    if (absl::Status s = AddExtension(x.get(), x.get(), nid, value); !s.ok()) return s;
  }
  if (X509_sign(x.get(), key, EVP_sha256()) <= 0) return CryptoError("signing the CA certificate");
  return x;
}

absl::StatusOr<UniqueX509> IssueLeaf(const HostName& host, EVP_PKEY* leaf_key, X509* ca,
                                     EVP_PKEY* ca_key) {
  UniqueX509 x(X509_new());
  if (!x || X509_set_version(x.get(), 2 /* v3 */) != 1) return CryptoError("new leaf");
  if (absl::Status s = SetRandomSerial(x.get()); !s.ok()) return s;
  absl::string_view cn = host.text;
  if (absl::Status s = SetCommonName(X509_get_subject_name(x.get()), cn.substr(0, kMaxCommonName));
      !s.ok()) {
    return s;
  }
  if (X509_set_issuer_name(x.get(), X509_get_subject_name(ca)) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(x.get()), -kBackdateSeconds) == nullptr ||
      X509_time_adj_ex(X509_getm_notAfter(x.get()), kLeafLifetimeDays, 0, nullptr) == nullptr ||
      X509_set_pubkey(x.get(), leaf_key) != 1) {
    return CryptoError("new leaf");
  }
  // A leaf outliving its CA would only fail verification later and less
  // clearly.
  int days = 0, seconds = 0;
  if (ASN1_TIME_diff(&days, &seconds, X509_get0_notAfter(x.get()), X509_get0_notAfter(ca)) != 1) {
    return CryptoError("comparing leaf and CA expiry");
  }
  if ((days < 0 || seconds < 0) && X509_set1_notAfter(x.get(), X509_get0_notAfter(ca)) != 1) {
    return CryptoError("capping leaf expiry");
  }
  for (auto [nid, value] :
       {std::pair{NID_basic_constraints, "critical,CA:FALSE"},
        std::pair{NID_key_usage, "critical,digitalSignature"},
        std::pair{NID_ext_key_usage, "serverAuth"}, std::pair{NID_subject_key_identifier, "hash"},
        std::pair{NID_authority_key_identifier, "keyid:always"}}) {
    if (absl::Status s = AddExtension(ca, x.get(), nid, value); !s.ok()) return s;
  }
  if (absl::Status s = AddSubjectAltName(x.get(), host); !s.ok()) return s;
  if (X509_sign(x.get(), ca_key, EVP_sha256()) <= 0) return CryptoError("signing the leaf");
  return x;
}

absl::StatusOr<std::string> CertificatePem(X509* x) {
  UniqueBio bio(BIO_new(BIO_s_mem()));
  if (!bio || PEM_write_bio_X509(bio.get(), x) != 1) return CryptoError("encoding certificate");
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, n);
}

absl::StatusOr<std::string> PrivateKeyPem(EVP_PKEY* key) {
  UniqueBio bio(BIO_new(BIO_s_mem()));
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return CryptoError("encoding private key");
  }
  char* data = nullptr;
  long n = BIO_get_mem_data(bio.get(), &data);
  std::string pem(data, n);
  OPENSSL_cleanse(data, n);
  return pem;
}

absl::StatusOr<UniqueX509> ParseCertificate(const std::string& pem, const std::string& path) {
  UniqueBio bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (!bio) return CryptoError(path);
  UniqueX509 x(PEM_read_bio_X509(bio.get(), nullptr, NoPassword, nullptr));
  if (!x) {
    std::string errors = DrainOpenSslErrors();
    return absl::InvalidArgumentError(
        absl::StrCat(path, " is not a PEM certificate: ", errors.empty() ? "unreadable" : errors));
  }
  return x;
}

// LoadKey reads the CA key, refusing one that others may read: whoever
// reads it can intercept every sandbox's TLS.
absl::StatusOr<UniquePkey> LoadKey(int dirfd, const std::string& path) {
  UniqueFd fd(openat(dirfd, kKeyFile, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return SysError(path, errno);
  struct stat st;
  if (fstat(fd.get(), &st) != 0) return SysError(path, errno);
  if (!S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " is not a regular file"));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "CA key %s has mode %04o, so users other than its owner can read or change it; run "
        "chmod 600 %s",
        path, st.st_mode & 07777, path));
  }
  absl::StatusOr<std::string> pem = ReadFd(fd.get(), path);
  if (!pem.ok()) return pem.status();
  UniqueBio bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
  UniquePkey key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassword, nullptr) : nullptr);
  OPENSSL_cleanse(pem->data(), pem->size());
  if (!key) {
    std::string errors = DrainOpenSslErrors();
    return absl::InvalidArgumentError(absl::StrCat(
        path, " is not an unencrypted PEM private key: ", errors.empty() ? "unreadable" : errors));
  }
  return key;
}

absl::StatusOr<UniqueX509> LoadCertificate(const std::string& path, EVP_PKEY* key,
                                           const std::string& key_path) {
  absl::StatusOr<std::string> pem = ReadFile(path);
  if (!pem.ok()) return pem.status();
  absl::StatusOr<UniqueX509> x = ParseCertificate(*pem, path);
  if (!x.ok()) return x.status();
  if (X509_check_private_key(x->get(), key) != 1) {
    DrainOpenSslErrors();
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not the certificate of the key in ", key_path));
  }
  if (X509_check_ca(x->get()) < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a CA certificate (no basicConstraints CA:TRUE)"));
  }
  if (X509_cmp_current_time(X509_get0_notAfter(x->get())) <= 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the CA certificate ", path,
        " has expired; move it and its key away to create a new CA, then make sandboxes "
        "trust the new certificate"));
  }
  return x;
}

int SelectHttp11(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
                 unsigned int inlen, void*) {
  constexpr absl::string_view kHttp11 = "http/1.1";
  for (unsigned int i = 0; i < inlen;) {
    unsigned int len = in[i];
    if (i + 1 + len > inlen) break;
    if (absl::string_view(reinterpret_cast<const char*>(in + i + 1), len) == kHttp11) {
      *out = in + i + 1;
      *outlen = static_cast<unsigned char>(len);
      return SSL_TLSEXT_ERR_OK;
    }
    i += 1 + len;
  }
  return SSL_TLSEXT_ERR_NOACK;
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> NewServerContext(X509* leaf, EVP_PKEY* leaf_key,
                                                          X509* ca) {
  SSL_CTX* raw = SSL_CTX_new(TLS_server_method());
  if (raw == nullptr) return CryptoError("new server context");
  std::shared_ptr<SSL_CTX> ctx(raw, SSL_CTX_free);
  if (SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION) != 1 ||
      SSL_CTX_use_certificate(raw, leaf) != 1 || SSL_CTX_use_PrivateKey(raw, leaf_key) != 1 ||
      SSL_CTX_add1_chain_cert(raw, ca) != 1 || SSL_CTX_check_private_key(raw) != 1) {
    return CryptoError("server context");
  }
  SSL_CTX_set_alpn_select_cb(raw, SelectHttp11, nullptr);
  return ctx;
}

// HandshakeFailure says why SSL_connect/SSL_accept returned `rc`.
std::string HandshakeFailure(SSL* ssl, int rc, int saved_errno) {
  int err = SSL_get_error(ssl, rc);
  std::string errors = DrainOpenSslErrors();
  if (!errors.empty()) return errors;
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      return "timed out waiting for the peer";
    case SSL_ERROR_ZERO_RETURN:
      return "the peer closed the connection";
    case SSL_ERROR_SYSCALL:
      if (saved_errno != 0) return strerror(saved_errno);
      return "the peer closed the connection during the handshake";
    default:
      return "handshake failed";
  }
}

// Handshake runs SSL_connect (or SSL_accept) to its end, waiting through
// `wait` (for POLLIN or POLLOUT; false when the wait timed out) whenever
// the transport is not ready. Returns the last call's result, errno as it
// left it.
int Handshake(SSL* ssl, bool accept, const std::function<bool(short)>& wait) {
  while (true) {
    // The thread's error queue and errno may hold what other fibers left
    // while this one waited.
    ERR_clear_error();
    errno = 0;
    int rc = accept ? SSL_accept(ssl) : SSL_connect(ssl);
    if (rc == 1) return rc;
    int err = SSL_get_error(ssl, rc);
    if (err != SSL_ERROR_WANT_READ && err != SSL_ERROR_WANT_WRITE) return rc;
    int saved_errno = errno;
    if (!wait(err == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT)) {
      errno = saved_errno;
      return rc;
    }
  }
}

// SocketWait waits through Poll for a socket (so a fiber's loop goes on
// meanwhile), each wait at most ten minutes, as any silence of a carried
// connection.
std::function<bool(short)> SocketWait(int fd) {
  return [fd](short events) {
    pollfd p = {fd, events, 0};
    return Poll(&p, 1, 600000) > 0;
  };
}

}  // namespace

absl::StatusOr<std::unique_ptr<CertificateAuthority>> CertificateAuthority::LoadOrCreate(
    const std::string& dir) {
  ERR_clear_error();
  UniqueFd dirfd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirfd.get() < 0) return SysError(absl::StrCat("CA directory ", dir), errno);
  // Serializes check-then-create with any other process doing the same;
  // released when dirfd closes.
  if (flock(dirfd.get(), LOCK_EX) != 0) return SysError(absl::StrCat("locking ", dir), errno);

  const std::string key_path = absl::StrCat(dir, "/", kKeyFile);
  const std::string cert_path = absl::StrCat(dir, "/", kCertFile);
  struct stat st;
  bool have_key = fstatat(dirfd.get(), kKeyFile, &st, 0) == 0;
  if (!have_key && errno != ENOENT) return SysError(key_path, errno);
  bool have_cert = fstatat(dirfd.get(), kCertFile, &st, 0) == 0;
  if (!have_cert && errno != ENOENT) return SysError(cert_path, errno);
  if (have_cert && !have_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        cert_path, " exists but ", key_path,
        " does not; restore the key, or remove the certificate to create a new CA (sandboxes "
        "must then trust the new certificate)"));
  }

  UniquePkey key;
  if (have_key) {
    absl::StatusOr<UniquePkey> loaded = LoadKey(dirfd.get(), key_path);
    if (!loaded.ok()) return loaded.status();
    key = std::move(*loaded);
  } else {
    absl::StatusOr<UniquePkey> made = NewP256Key();
    if (!made.ok()) return made.status();
    key = std::move(*made);
  }

  UniqueX509 cert;
  if (have_cert) {
    absl::StatusOr<UniqueX509> loaded = LoadCertificate(cert_path, key.get(), key_path);
    if (!loaded.ok()) return loaded.status();
    cert = std::move(*loaded);
  } else {
    absl::StatusOr<UniqueX509> issued = IssueCaCertificate(key.get());
    if (!issued.ok()) return issued.status();
    cert = std::move(*issued);
  }
  absl::StatusOr<std::string> cert_pem = CertificatePem(cert.get());
  if (!cert_pem.ok()) return cert_pem.status();

  // The key first: ca.crt without ca.key is refused above, while ca.key
  // without ca.crt (a crash in between) is repaired.
  if (!have_key) {
    absl::StatusOr<std::string> key_pem = PrivateKeyPem(key.get());
    if (!key_pem.ok()) return key_pem.status();
    absl::Status written = WriteFileAtomically(dirfd.get(), dir, kKeyFile, *key_pem, 0600);
    OPENSSL_cleanse(key_pem->data(), key_pem->size());
    if (!written.ok()) return written;
  }
  if (!have_cert) {
    absl::Status written = WriteFileAtomically(dirfd.get(), dir, kCertFile, *cert_pem, 0644);
    if (!written.ok()) return written;
  }

  absl::StatusOr<UniquePkey> leaf_key = NewP256Key();
  if (!leaf_key.ok()) return leaf_key.status();
  return std::unique_ptr<CertificateAuthority>(new CertificateAuthority(
      std::move(cert), std::move(key), std::move(*leaf_key), std::move(*cert_pem)));
}

CertificateAuthority::CertificateAuthority(std::unique_ptr<X509, OpenSslFree> cert,
                                           std::unique_ptr<EVP_PKEY, OpenSslFree> key,
                                           std::unique_ptr<EVP_PKEY, OpenSslFree> leaf_key,
                                           std::string pem)
    : cert_(std::move(cert)),
      key_(std::move(key)),
      leaf_key_(std::move(leaf_key)),
      certificate_pem_(std::move(pem)) {}

absl::StatusOr<std::shared_ptr<SSL_CTX>> CertificateAuthority::ServerContextFor(
    const std::string& host) {
  absl::StatusOr<HostName> name = ParseHost(host);
  if (!name.ok()) return name.status();
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = by_host_.find(name->text);
    if (it != by_host_.end() && absl::Now() < it->second->refresh_at) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->ctx;
    }
  }

  // Minting happens unlocked so one new host does not stall the others;
  // two threads racing on the same new host both mint, and the first to
  // insert wins.
  absl::Time minted_at = absl::Now();
  ERR_clear_error();
  absl::StatusOr<UniqueX509> leaf = IssueLeaf(*name, leaf_key_.get(), cert_.get(), key_.get());
  if (!leaf.ok()) return leaf.status();
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx =
      NewServerContext(leaf->get(), leaf_key_.get(), cert_.get());
  if (!ctx.ok()) return ctx.status();

  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_host_.find(name->text);
  if (it != by_host_.end()) {
    if (absl::Now() < it->second->refresh_at) {
      lru_.splice(lru_.begin(), lru_, it->second);
      return it->second->ctx;
    }
    lru_.erase(it->second);
    by_host_.erase(it);
  }
  lru_.push_front(CachedContext{name->text, *ctx, minted_at + kLeafRefreshAfter});
  by_host_[name->text] = lru_.begin();
  if (lru_.size() > kMaxCachedLeaves) {
    by_host_.erase(lru_.back().host);
    lru_.pop_back();
  }
  return *ctx;
}

size_t CertificateAuthority::cached_leaves() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lru_.size();
}

absl::StatusOr<std::shared_ptr<SSL_CTX>> MakeUpstreamContext(
    const std::vector<std::string>& extra_ca_files) {
  ERR_clear_error();
  SSL_CTX* raw = SSL_CTX_new(TLS_client_method());
  if (raw == nullptr) return CryptoError("new upstream context");
  std::shared_ptr<SSL_CTX> ctx(raw, SSL_CTX_free);
  if (SSL_CTX_set_min_proto_version(raw, TLS1_2_VERSION) != 1) {
    return CryptoError("upstream context");
  }
  if (SSL_CTX_set_default_verify_paths(raw) != 1) {
    return CryptoError("loading the system trust store");
  }
  X509_STORE* store = SSL_CTX_get_cert_store(raw);
  for (const std::string& path : extra_ca_files) {
    absl::StatusOr<std::string> pem = ReadFile(path);
    if (!pem.ok()) {
      return absl::Status(pem.status().code(),
                          absl::StrCat("extra CA file: ", pem.status().message()));
    }
    UniqueBio bio(BIO_new_mem_buf(pem->data(), static_cast<int>(pem->size())));
    if (!bio) return CryptoError(path);
    for (int count = 0;; ++count) {
      UniqueX509 cert(PEM_read_bio_X509(bio.get(), nullptr, NoPassword, nullptr));
      if (!cert) {
        auto last = ERR_peek_last_error();
        // Running out of PEM blocks after at least one is the normal end.
        if (count > 0 && ERR_GET_LIB(last) == ERR_LIB_PEM &&
            ERR_GET_REASON(last) == PEM_R_NO_START_LINE) {
          ERR_clear_error();
          break;
        }
        std::string errors = DrainOpenSslErrors();
        return absl::InvalidArgumentError(absl::StrCat(
            "extra CA file ", path, ": ",
            count == 0 ? "no PEM certificate in it" : absl::StrCat("certificate ", count + 1),
            errors.empty() ? "" : absl::StrCat(" (", errors, ")")));
      }
      if (X509_STORE_add_cert(store, cert.get()) != 1) {
        return CryptoError(
            absl::StrCat("extra CA file ", path, ": adding certificate ", count + 1));
      }
    }
  }
  SSL_CTX_set_verify(raw, SSL_VERIFY_PEER, nullptr);
  // Returns 0 on success, unlike the rest of the API.
  if (SSL_CTX_set_alpn_protos(raw, kAlpnHttp11, sizeof(kAlpnHttp11) - 1) != 0) {
    return CryptoError("upstream ALPN");
  }
  return ctx;
}

absl::StatusOr<UniqueSsl> StartUpstreamTls(SSL_CTX* ctx, int fd, const std::string& host) {
  absl::StatusOr<HostName> name = ParseHost(host);
  if (!name.ok()) return name.status();
  ERR_clear_error();
  UniqueSsl ssl(SSL_new(ctx));
  if (!ssl || SSL_set_fd(ssl.get(), fd) != 1) return CryptoError("new upstream connection");
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (name->is_ip) {
    if (X509_VERIFY_PARAM_set1_ip(param, name->ip, name->ip_len) != 1) {
      return CryptoError("upstream IP verification");
    }
  } else {
    X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
    if (SSL_set_tlsext_host_name(ssl.get(), name->text.c_str()) != 1 ||
        X509_VERIFY_PARAM_set1_host(param, name->text.data(), name->text.size()) != 1) {
      return CryptoError("upstream host name verification");
    }
  }
  int rc = Handshake(ssl.get(), /*accept=*/false, SocketWait(fd));
  int saved_errno = errno;
  if (rc == 1) return ssl;
  long verify = SSL_get_verify_result(ssl.get());
  if (verify != X509_V_OK) {
    DrainOpenSslErrors();
    return absl::UnauthenticatedError(
        absl::StrCat("upstream certificate for ", name->text,
                     ": certificate verify failed: ", X509_verify_cert_error_string(verify)));
  }
  return absl::UnavailableError(
      absl::StrCat("TLS handshake with upstream ", name->text,
                   " failed: ", HandshakeFailure(ssl.get(), rc, saved_errno)));
}

absl::StatusOr<UniqueSsl> AcceptClientTls(SSL_CTX* server_ctx, int fd) {
  BIO* bio = BIO_new_socket(fd, BIO_NOCLOSE);
  if (bio == nullptr) return CryptoError("new sandbox connection");
  return AcceptClientTls(server_ctx, bio, SocketWait(fd));
}

absl::StatusOr<UniqueSsl> AcceptClientTls(SSL_CTX* server_ctx, BIO* bio,
                                          const std::function<bool(short)>& wait) {
  ERR_clear_error();
  UniqueSsl ssl(SSL_new(server_ctx));
  if (!ssl) {
    BIO_free(bio);
    return CryptoError("new sandbox connection");
  }
  SSL_set_bio(ssl.get(), bio, bio);  // the session owns it from here
  int rc = Handshake(ssl.get(), /*accept=*/true, wait);
  int saved_errno = errno;
  if (rc == 1) return ssl;
  std::string why = HandshakeFailure(ssl.get(), rc, saved_errno);
  if (absl::StrContains(why, "unknown ca")) {
    absl::StrAppend(&why, " (does the sandbox trust the Airlock CA certificate?)");
  }
  return absl::UnavailableError(
      absl::StrCat("TLS handshake with the sandbox client failed: ", why));
}

}  // namespace airlock::proxyd
