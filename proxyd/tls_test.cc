#include "proxyd/tls.h"

#include <dirent.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

// Contains explains a missing substring with the whole text.
::testing::AssertionResult Contains(absl::string_view text, absl::string_view part) {
  if (absl::StrContains(text, part)) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

using UniqueX509 = std::unique_ptr<X509, OpenSslFree>;
using UniquePkey = std::unique_ptr<EVP_PKEY, OpenSslFree>;

UniqueX509 ParsePem(const std::string& pem) {
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  UniqueX509 x(PEM_read_bio_X509(bio, nullptr, nullptr, nullptr));
  BIO_free(bio);
  return x;
}

std::string PublicKeyDer(X509* x) {
  unsigned char* der = nullptr;
  int n = i2d_PUBKEY(X509_get0_pubkey(x), &der);
  std::string out(reinterpret_cast<char*>(der), n > 0 ? n : 0);
  OPENSSL_free(der);
  return out;
}

std::string CommonName(X509* x) {
  char buf[256] = {};
  X509_NAME_get_text_by_NID(X509_get_subject_name(x), NID_commonName, buf, sizeof(buf));
  return buf;
}

// Validity is notAfter - notBefore in seconds.
long Validity(X509* x) {
  int days = 0, seconds = 0;
  EXPECT_EQ(ASN1_TIME_diff(&days, &seconds, X509_get0_notBefore(x), X509_get0_notAfter(x)), 1);
  return days * 86400L + seconds;
}

bool IsCritical(X509* x, int nid) {
  int i = X509_get_ext_by_NID(x, nid, -1);
  return i >= 0 && X509_EXTENSION_get_critical(X509_get_ext(x, i)) == 1;
}

// VerifiesAgainst runs X509_verify_cert for a TLS server leaf with `ca` as
// the only trust anchor.
bool VerifiesAgainst(X509* leaf, X509* ca) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  bool ok = X509_verify_cert(ctx) == 1;
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  ERR_clear_error();
  return ok;
}

// SubjectAltNames lists "DNS:name" and "IP:<raw bytes as hex>" entries.
std::vector<std::string> SubjectAltNames(X509* x) {
  std::vector<std::string> out;
  auto* names =
      static_cast<GENERAL_NAMES*>(X509_get_ext_d2i(x, NID_subject_alt_name, nullptr, nullptr));
  for (int i = 0; names != nullptr && i < sk_GENERAL_NAME_num(names); ++i) {
    const GENERAL_NAME* name = sk_GENERAL_NAME_value(names, i);
    if (name->type == GEN_DNS) {
      const ASN1_STRING* s = name->d.dNSName;
      out.push_back(
          absl::StrCat("DNS:", std::string(reinterpret_cast<const char*>(ASN1_STRING_get0_data(s)),
                                           ASN1_STRING_length(s))));
    } else if (name->type == GEN_IPADD) {
      const ASN1_STRING* s = name->d.iPAddress;
      std::string hex;
      for (int j = 0; j < ASN1_STRING_length(s); ++j) {
        absl::StrAppend(&hex, absl::Hex(ASN1_STRING_get0_data(s)[j], absl::kZeroPad2));
      }
      out.push_back("IP:" + hex);
    } else {
      out.push_back(absl::StrCat("type ", name->type));
    }
  }
  GENERAL_NAMES_free(names);
  return out;
}

std::set<std::string> DirEntries(const std::string& dir) {
  std::set<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = d ? readdir(d) : nullptr) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.insert(name);
  }
  if (d) closedir(d);
  return out;
}

mode_t Mode(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 07777;
  return st.st_mode & 07777;
}

void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  FILE* f = fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr) << path;
  fwrite(data.data(), 1, data.size(), f);
  fclose(f);
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

// WriteCustomCa writes a P-256 CA to `dir` that expires `not_after_s`
// seconds from now, for the cases LoadOrCreate never produces itself.
void WriteCustomCa(const std::string& dir, long not_after_s) {
  EVP_PKEY_CTX* kctx = EVP_PKEY_CTX_new_id(EVP_PKEY_EC, nullptr);
  EVP_PKEY* raw_key = nullptr;
  ASSERT_EQ(EVP_PKEY_keygen_init(kctx), 1);
  ASSERT_EQ(EVP_PKEY_CTX_set_ec_paramgen_curve_nid(kctx, NID_X9_62_prime256v1), 1);
  ASSERT_EQ(EVP_PKEY_keygen(kctx, &raw_key), 1);
  EVP_PKEY_CTX_free(kctx);
  UniquePkey key(raw_key);

  UniqueX509 x(X509_new());
  X509_set_version(x.get(), 2);
  ASN1_INTEGER_set(X509_get_serialNumber(x.get()), 7);
  X509_NAME* name = X509_get_subject_name(x.get());
  X509_NAME_add_entry_by_NID(name, NID_commonName, MBSTRING_UTF8,
                             reinterpret_cast<const unsigned char*>("custom test CA"), -1, -1, 0);
  X509_set_issuer_name(x.get(), name);
  X509_gmtime_adj(X509_getm_notBefore(x.get()), -2 * 86400);
  X509_gmtime_adj(X509_getm_notAfter(x.get()), not_after_s);
  X509_set_pubkey(x.get(), key.get());
  X509V3_CTX v3;
  X509V3_set_ctx_nodb(&v3);
  X509V3_set_ctx(&v3, x.get(), x.get(), nullptr, nullptr, 0);
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE"},
                            std::pair{NID_key_usage, "critical,keyCertSign"},
                            std::pair{NID_subject_key_identifier, "hash"}}) {
    X509_EXTENSION* ext = X509V3_EXT_nconf_nid(nullptr, &v3, nid, value);
    ASSERT_NE(ext, nullptr);
    X509_add_ext(x.get(), ext, -1);
    X509_EXTENSION_free(ext);
  }
  ASSERT_GT(X509_sign(x.get(), key.get(), EVP_sha256()), 0);

  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_PrivateKey(bio, key.get(), nullptr, nullptr, 0, nullptr, nullptr);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  WriteFile(dir + "/ca.key", std::string(data, n), 0600);
  BIO_free(bio);
  bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, x.get());
  n = BIO_get_mem_data(bio, &data);
  WriteFile(dir + "/ca.crt", std::string(data, n), 0644);
  BIO_free(bio);
}

// HandshakeResult is what both ends of Handshake saw.
struct HandshakeResult {
  absl::Status server = absl::UnknownError("not run");
  absl::Status client = absl::UnknownError("not run");
  std::string echoed;
  std::string client_alpn;
  std::string server_alpn;
  bool has_sni = false;
  std::string sni;
  int version = 0;
};

std::string Alpn(SSL* ssl) {
  const unsigned char* p = nullptr;
  unsigned int n = 0;
  SSL_get0_alpn_selected(ssl, &p, &n);
  return std::string(reinterpret_cast<const char*>(p), p ? n : 0);
}

// Handshake connects a server on `server_ctx` and a client on `client_ctx`
// verifying `host` over a socketpair; on success the client sends "ping"
// and reads the server's echo.
HandshakeResult Handshake(SSL_CTX* server_ctx, SSL_CTX* client_ctx, const std::string& host) {
  signal(SIGPIPE, SIG_IGN);
  HandshakeResult r;
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    ADD_FAILURE() << "socketpair";
    return r;
  }
  // A broken handshake fails the test instead of hanging it.
  timeval timeout{10, 0};
  for (int fd : fds) {
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  }
  std::thread server([&r, server_ctx, fd = fds[0]] {
    absl::StatusOr<UniqueSsl> ssl = AcceptClientTls(server_ctx, fd);
    r.server = ssl.status();
    if (!ssl.ok()) return;
    const char* sni = SSL_get_servername(ssl->get(), TLSEXT_NAMETYPE_host_name);
    r.has_sni = sni != nullptr;
    r.sni = sni ? sni : "";
    r.server_alpn = Alpn(ssl->get());
    char buf[16];
    int n = SSL_read(ssl->get(), buf, sizeof(buf));
    if (n > 0) SSL_write(ssl->get(), buf, n);
  });
  {
    absl::StatusOr<UniqueSsl> ssl = StartUpstreamTls(client_ctx, fds[1], host);
    r.client = ssl.status();
    if (ssl.ok()) {
      r.client_alpn = Alpn(ssl->get());
      r.version = SSL_version(ssl->get());
      SSL_write(ssl->get(), "ping", 4);
      char buf[16];
      while (r.echoed.size() < 4) {
        int n = SSL_read(ssl->get(), buf, sizeof(buf));
        if (n <= 0) break;
        r.echoed.append(buf, n);
      }
    }
  }
  close(fds[1]);  // ends the server's wait when the client gave up
  server.join();
  close(fds[0]);
  return r;
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(tmp_.path(), "/tmp") << "mkdtemp failed"; }

  std::string Path(const std::string& name) const { return tmp_.path() + "/" + name; }

  // NewCa creates a CA in a fresh subdirectory `name`.
  std::unique_ptr<CertificateAuthority> NewCa(const std::string& name = "ca") {
    EXPECT_EQ(mkdir(Path(name).c_str(), 0700), 0);
    absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
        CertificateAuthority::LoadOrCreate(Path(name));
    EXPECT_TRUE(ca.ok()) << ca.status();
    return ca.ok() ? std::move(*ca) : nullptr;
  }

  airlock::testing::ShortTempDir tmp_;
};

TEST_F(TlsTest, CreatesCaWithPrivateKeyAndReloadsTheSameOne) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(Mode(Path("ca/ca.key")), 0600);
  EXPECT_EQ(Mode(Path("ca/ca.crt")), 0644);
  EXPECT_EQ(DirEntries(Path("ca")), (std::set<std::string>{"ca.crt", "ca.key"}));
  EXPECT_EQ(ReadFileToString(Path("ca/ca.crt")), ca->certificate_pem());
  const std::string key = ReadFileToString(Path("ca/ca.key"));
  EXPECT_TRUE(Contains(key, "PRIVATE KEY"));

  UniqueX509 cert = ParsePem(ca->certificate_pem());
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(CommonName(cert.get()), "Airlock sandbox egress CA");
  EXPECT_EQ(EVP_PKEY_id(X509_get0_pubkey(cert.get())), EVP_PKEY_EC);
  EXPECT_GE(X509_check_ca(cert.get()), 1);
  EXPECT_TRUE(IsCritical(cert.get(), NID_basic_constraints));
  EXPECT_TRUE(IsCritical(cert.get(), NID_key_usage));
  EXPECT_EQ(X509_get_key_usage(cert.get()), static_cast<uint32_t>(KU_KEY_CERT_SIGN | KU_CRL_SIGN));
  EXPECT_NE(X509_get0_subject_key_id(cert.get()), nullptr);
  EXPECT_GE(Validity(cert.get()), 3650L * 86400 + 3600);
  EXPECT_LE(Validity(cert.get()), 3653L * 86400 + 3600);
  time_t almost_an_hour_ago = time(nullptr) - 3500;
  EXPECT_LT(X509_cmp_time(X509_get0_notBefore(cert.get()), &almost_an_hour_ago), 0);

  absl::StatusOr<std::unique_ptr<CertificateAuthority>> again =
      CertificateAuthority::LoadOrCreate(Path("ca"));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ((*again)->certificate_pem(), ca->certificate_pem());
  EXPECT_EQ(ReadFileToString(Path("ca/ca.key")), key);
  EXPECT_EQ(Mode(Path("ca/ca.key")), 0600);
}

TEST_F(TlsTest, FileModesDoNotDependOnUmask) {
  mode_t old = umask(077);
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  umask(old);
  ASSERT_NE(ca, nullptr);
  EXPECT_EQ(Mode(Path("ca/ca.key")), 0600);
  EXPECT_EQ(Mode(Path("ca/ca.crt")), 0644);
}

TEST_F(TlsTest, RefusesKeyOthersCanRead) {
  ASSERT_NE(NewCa(), nullptr);
  const std::string key = Path("ca/ca.key");
  for (mode_t mode : {0640, 0604, 0620}) {
    ASSERT_EQ(chmod(key.c_str(), mode), 0);
    absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
        CertificateAuthority::LoadOrCreate(Path("ca"));
    ASSERT_FALSE(ca.ok()) << std::oct << mode;
    EXPECT_EQ(ca.status().code(), absl::StatusCode::kPermissionDenied);
    EXPECT_TRUE(Contains(ca.status().message(), key));
    EXPECT_TRUE(Contains(ca.status().message(), "chmod 600"));
  }
  ASSERT_EQ(chmod(key.c_str(), 0600), 0);
  EXPECT_TRUE(CertificateAuthority::LoadOrCreate(Path("ca")).ok());
}

TEST_F(TlsTest, CertificateWithoutKeyIsRefusedAndKept) {
  ASSERT_NE(NewCa(), nullptr);
  const std::string cert = ReadFileToString(Path("ca/ca.crt"));
  ASSERT_EQ(unlink(Path("ca/ca.key").c_str()), 0);
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
      CertificateAuthority::LoadOrCreate(Path("ca"));
  ASSERT_FALSE(ca.ok());
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(ca.status().message(), Path("ca/ca.key")));
  EXPECT_EQ(ReadFileToString(Path("ca/ca.crt")), cert);
  EXPECT_EQ(DirEntries(Path("ca")), (std::set<std::string>{"ca.crt"}));
}

TEST_F(TlsTest, KeyWithoutCertificateGetsANewCertificate) {
  std::unique_ptr<CertificateAuthority> first = NewCa();
  ASSERT_NE(first, nullptr);
  ASSERT_EQ(unlink(Path("ca/ca.crt").c_str()), 0);
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> second =
      CertificateAuthority::LoadOrCreate(Path("ca"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_NE((*second)->certificate_pem(), first->certificate_pem());
  EXPECT_EQ(ReadFileToString(Path("ca/ca.crt")), (*second)->certificate_pem());
  EXPECT_EQ(Mode(Path("ca/ca.crt")), 0644);
  UniqueX509 a = ParsePem(first->certificate_pem());
  UniqueX509 b = ParsePem((*second)->certificate_pem());
  ASSERT_TRUE(a && b);
  EXPECT_EQ(PublicKeyDer(a.get()), PublicKeyDer(b.get()));
}

TEST_F(TlsTest, RefusesCertificateOfAnotherKey) {
  ASSERT_NE(NewCa("a"), nullptr);
  ASSERT_NE(NewCa("b"), nullptr);
  WriteFile(Path("a/ca.crt"), ReadFileToString(Path("b/ca.crt")), 0644);
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
      CertificateAuthority::LoadOrCreate(Path("a"));
  ASSERT_FALSE(ca.ok());
  EXPECT_TRUE(Contains(ca.status().message(), "is not the certificate of the key"));
}

TEST_F(TlsTest, RefusesExpiredCa) {
  ASSERT_EQ(mkdir(Path("old").c_str(), 0700), 0);
  WriteCustomCa(Path("old"), -3600);
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
      CertificateAuthority::LoadOrCreate(Path("old"));
  ASSERT_FALSE(ca.ok());
  EXPECT_TRUE(Contains(ca.status().message(), "has expired"));
}

TEST_F(TlsTest, MissingDirectoryIsNamed) {
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
      CertificateAuthority::LoadOrCreate(Path("absent"));
  ASSERT_FALSE(ca.ok());
  EXPECT_EQ(ca.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(ca.status().message(), Path("absent")));
}

TEST_F(TlsTest, LeafForDnsNameVerifiesAgainstTheCa) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  std::unique_ptr<CertificateAuthority> other = NewCa("other");
  ASSERT_TRUE(ca && other);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  X509* leaf = SSL_CTX_get0_certificate(ctx->get());
  ASSERT_NE(leaf, nullptr);
  UniqueX509 ca_cert = ParsePem(ca->certificate_pem());
  UniqueX509 other_cert = ParsePem(other->certificate_pem());

  EXPECT_TRUE(VerifiesAgainst(leaf, ca_cert.get()));
  EXPECT_FALSE(VerifiesAgainst(leaf, other_cert.get()));
  EXPECT_EQ(SubjectAltNames(leaf), std::vector<std::string>{"DNS:api.example.test"});
  EXPECT_EQ(X509_check_host(leaf, "api.example.test", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(leaf, "other.example.test", 0, 0, nullptr), 1);
  EXPECT_EQ(CommonName(leaf), "api.example.test");
  EXPECT_EQ(X509_check_ca(leaf), 0);
  EXPECT_EQ(X509_get_extended_key_usage(leaf), static_cast<uint32_t>(XKU_SSL_SERVER));
  EXPECT_EQ(ASN1_OCTET_STRING_cmp(X509_get0_authority_key_id(leaf),
                                  X509_get0_subject_key_id(ca_cert.get())),
            0);
  EXPECT_EQ(Validity(leaf), 30L * 86400 + 3600);
  const ASN1_INTEGER* serial = X509_get0_serialNumber(leaf);
  EXPECT_EQ(ASN1_STRING_type(serial), V_ASN1_INTEGER);  // not V_ASN1_NEG_INTEGER
  EXPECT_EQ(ASN1_STRING_length(serial), 16);
}

TEST_F(TlsTest, LeafForIpLiteralHasIpSubjectAltName) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  UniqueX509 ca_cert = ParsePem(ca->certificate_pem());
  for (auto [host, san] : {std::pair{"127.0.0.1", "IP:7f000001"},
                           std::pair{"::1", "IP:00000000000000000000000000000001"}}) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor(host);
    ASSERT_TRUE(ctx.ok()) << ctx.status();
    X509* leaf = SSL_CTX_get0_certificate(ctx->get());
    EXPECT_EQ(SubjectAltNames(leaf), std::vector<std::string>{san});
    EXPECT_EQ(X509_check_ip_asc(leaf, host, 0), 1) << host;
    EXPECT_TRUE(VerifiesAgainst(leaf, ca_cert.get())) << host;
  }
}

TEST_F(TlsTest, LongHostNameIsCutInCommonNameOnly) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  const std::string host =
      std::string(60, 'a') + "." + std::string(60, 'b') + "." + std::string(60, 'c') + ".test";
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor(host);
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  X509* leaf = SSL_CTX_get0_certificate(ctx->get());
  EXPECT_EQ(CommonName(leaf), host.substr(0, 64));
  EXPECT_EQ(SubjectAltNames(leaf), std::vector<std::string>{"DNS:" + host});
}

TEST_F(TlsTest, RefusesHostNamesThatAreNotNames) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  for (const std::string& host :
       {std::string(""), std::string("a b.test"), std::string("evil.test,DNS:bank.test"),
        std::string("a..test"), std::string("x\0y.test", 8), std::string("[::1]"),
        std::string("fe80::1%eth0"), std::string("a:b.test"), std::string(64, 'x') + ".test"}) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor(host);
    ASSERT_FALSE(ctx.ok()) << host;
    EXPECT_EQ(ctx.status().code(), absl::StatusCode::kInvalidArgument) << host;
  }
  EXPECT_EQ(ca->cached_leaves(), 0u);
}

TEST_F(TlsTest, CachesOneContextPerHost) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> a = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> b = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> upper = ca->ServerContextFor("API.Example.TEST");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> c = ca->ServerContextFor("other.example.test");
  ASSERT_TRUE(a.ok() && b.ok() && upper.ok() && c.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(a->get(), upper->get());
  EXPECT_NE(a->get(), c->get());
  EXPECT_EQ(ca->cached_leaves(), 2u);
}

TEST_F(TlsTest, ConcurrentCallersForOneHostShareOneContext) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  constexpr int kThreads = 8;
  std::vector<std::shared_ptr<SSL_CTX>> got(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor("same.example.test");
      if (ctx.ok()) got[i] = *ctx;
    });
  }
  for (std::thread& t : threads) t.join();
  absl::StatusOr<std::shared_ptr<SSL_CTX>> now = ca->ServerContextFor("same.example.test");
  ASSERT_TRUE(now.ok());
  for (const std::shared_ptr<SSL_CTX>& ctx : got) EXPECT_EQ(ctx.get(), now->get());
  EXPECT_EQ(ca->cached_leaves(), 1u);
}

TEST_F(TlsTest, CacheDropsTheLeastRecentlyUsedHost) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  auto get = [&](size_t i) {
    absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = ca->ServerContextFor(absl::StrCat("h", i));
    EXPECT_TRUE(ctx.ok()) << ctx.status();
    return ctx.ok() ? *ctx : nullptr;
  };
  // Held so that no evicted context's address can be reused.
  std::shared_ptr<SSL_CTX> h0 = get(0), h1 = get(1);
  for (size_t i = 2; i < CertificateAuthority::kMaxCachedLeaves; ++i) get(i);
  EXPECT_EQ(ca->cached_leaves(), CertificateAuthority::kMaxCachedLeaves);
  EXPECT_EQ(get(0), h0);  // now h1 is the least recently used
  get(CertificateAuthority::kMaxCachedLeaves);
  EXPECT_EQ(ca->cached_leaves(), CertificateAuthority::kMaxCachedLeaves);
  EXPECT_EQ(get(0), h0);
  EXPECT_NE(get(1), h1);
}

TEST_F(TlsTest, LeafNeverOutlivesTheCa) {
  ASSERT_EQ(mkdir(Path("short").c_str(), 0700), 0);
  WriteCustomCa(Path("short"), 2 * 86400);
  absl::StatusOr<std::unique_ptr<CertificateAuthority>> ca =
      CertificateAuthority::LoadOrCreate(Path("short"));
  ASSERT_TRUE(ca.ok()) << ca.status();
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = (*ca)->ServerContextFor("api.example.test");
  ASSERT_TRUE(ctx.ok()) << ctx.status();
  X509* leaf = SSL_CTX_get0_certificate(ctx->get());
  UniqueX509 ca_cert = ParsePem((*ca)->certificate_pem());
  int days = -1, seconds = -1;
  ASSERT_EQ(
      ASN1_TIME_diff(&days, &seconds, X509_get0_notAfter(leaf), X509_get0_notAfter(ca_cert.get())),
      1);
  EXPECT_EQ(days, 0);
  EXPECT_EQ(seconds, 0);
  EXPECT_TRUE(VerifiesAgainst(leaf, ca_cert.get()));
}

TEST_F(TlsTest, ContextsRequireTls12) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({});
  ASSERT_TRUE(server.ok() && client.ok());
  EXPECT_EQ(SSL_CTX_get_min_proto_version(server->get()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_min_proto_version(client->get()), TLS1_2_VERSION);
  EXPECT_EQ(SSL_CTX_get_verify_mode(client->get()) & SSL_VERIFY_PEER, SSL_VERIFY_PEER);
}

TEST_F(TlsTest, HandshakeWithTrustedCaSucceeds) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({Path("ca/ca.crt")});
  ASSERT_TRUE(server.ok()) << server.status();
  ASSERT_TRUE(client.ok()) << client.status();
  HandshakeResult r = Handshake(server->get(), client->get(), "api.example.test");
  ASSERT_TRUE(r.client.ok()) << r.client;
  ASSERT_TRUE(r.server.ok()) << r.server;
  EXPECT_EQ(r.echoed, "ping");
  EXPECT_TRUE(r.has_sni);
  EXPECT_EQ(r.sni, "api.example.test");
  EXPECT_EQ(r.client_alpn, "http/1.1");
  EXPECT_EQ(r.server_alpn, "http/1.1");
  EXPECT_GE(r.version, TLS1_2_VERSION);
}

TEST_F(TlsTest, HandshakeWithIpLiteralVerifiesTheAddressAndSendsNoSni) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("127.0.0.1");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({Path("ca/ca.crt")});
  ASSERT_TRUE(server.ok() && client.ok());
  HandshakeResult r = Handshake(server->get(), client->get(), "127.0.0.1");
  ASSERT_TRUE(r.client.ok()) << r.client;
  EXPECT_EQ(r.echoed, "ping");
  EXPECT_FALSE(r.has_sni) << r.sni;

  HandshakeResult wrong = Handshake(server->get(), client->get(), "127.0.0.2");
  ASSERT_FALSE(wrong.client.ok());
  EXPECT_TRUE(Contains(wrong.client.message(), "certificate verify failed"));
}

TEST_F(TlsTest, HandshakeForAnotherHostFailsVerification) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({Path("ca/ca.crt")});
  ASSERT_TRUE(server.ok() && client.ok());
  HandshakeResult r = Handshake(server->get(), client->get(), "other.example.test");
  ASSERT_FALSE(r.client.ok());
  EXPECT_EQ(r.client.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_TRUE(Contains(r.client.message(),
                       "upstream certificate for other.example.test: certificate verify "
                       "failed: hostname mismatch"));
  EXPECT_FALSE(r.server.ok());
  EXPECT_TRUE(r.echoed.empty());
}

TEST_F(TlsTest, HandshakeWithoutTheCaFailsVerification) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({});
  ASSERT_TRUE(server.ok() && client.ok());
  HandshakeResult r = Handshake(server->get(), client->get(), "api.example.test");
  ASSERT_FALSE(r.client.ok());
  EXPECT_EQ(r.client.code(), absl::StatusCode::kUnauthenticated);
  // The chain ends in the CA, which the server sends and nobody trusts.
  EXPECT_TRUE(Contains(r.client.message(),
                       "upstream certificate for api.example.test: certificate verify failed: "
                       "self-signed certificate in certificate chain"));
  ASSERT_FALSE(r.server.ok());
  EXPECT_TRUE(Contains(r.server.message(), "TLS handshake with the sandbox client failed"));
  EXPECT_TRUE(Contains(r.server.message(), "does the sandbox trust the Airlock CA"));
}

TEST_F(TlsTest, ServerAnswersNoAlpnWhenHttp11IsNotOffered) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({Path("ca/ca.crt")});
  ASSERT_TRUE(server.ok() && client.ok());
  static const unsigned char kH2[] = "\x02h2";
  ASSERT_EQ(SSL_CTX_set_alpn_protos(client->get(), kH2, 3), 0);
  HandshakeResult r = Handshake(server->get(), client->get(), "api.example.test");
  ASSERT_TRUE(r.client.ok()) << r.client;
  ASSERT_TRUE(r.server.ok()) << r.server;
  EXPECT_EQ(r.server_alpn, "");
  EXPECT_EQ(r.client_alpn, "");

  static const unsigned char kBoth[] = "\x02h2\x08http/1.1";
  ASSERT_EQ(SSL_CTX_set_alpn_protos(client->get(), kBoth, sizeof(kBoth) - 1), 0);
  r = Handshake(server->get(), client->get(), "api.example.test");
  ASSERT_TRUE(r.client.ok()) << r.client;
  EXPECT_EQ(r.server_alpn, "http/1.1");
}

TEST_F(TlsTest, ExtraCaFileMayHoldSeveralCertificates) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  std::unique_ptr<CertificateAuthority> other = NewCa("other");
  ASSERT_TRUE(ca && other);
  WriteFile(Path("bundle.pem"), other->certificate_pem() + ca->certificate_pem(), 0644);
  absl::StatusOr<std::shared_ptr<SSL_CTX>> server = ca->ServerContextFor("api.example.test");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({Path("bundle.pem")});
  ASSERT_TRUE(server.ok() && client.ok()) << client.status();
  HandshakeResult r = Handshake(server->get(), client->get(), "api.example.test");
  ASSERT_TRUE(r.client.ok()) << r.client;
  EXPECT_EQ(r.echoed, "ping");
}

TEST_F(TlsTest, BadExtraCaFilesAreNamed) {
  std::unique_ptr<CertificateAuthority> ca = NewCa();
  ASSERT_NE(ca, nullptr);
  const std::string missing = Path("missing.pem");
  absl::StatusOr<std::shared_ptr<SSL_CTX>> ctx = MakeUpstreamContext({Path("ca/ca.crt"), missing});
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(Contains(ctx.status().message(), missing));

  WriteFile(Path("junk.pem"), "not a certificate\n", 0644);
  ctx = MakeUpstreamContext({Path("junk.pem")});
  ASSERT_FALSE(ctx.ok());
  EXPECT_EQ(ctx.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(ctx.status().message(), Path("junk.pem")));

  WriteFile(
      Path("half.pem"),
      ca->certificate_pem() + "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
      0644);
  ctx = MakeUpstreamContext({Path("half.pem")});
  ASSERT_FALSE(ctx.ok());
  EXPECT_TRUE(Contains(ctx.status().message(), Path("half.pem")));
  EXPECT_TRUE(Contains(ctx.status().message(), "certificate 2"));
}

TEST_F(TlsTest, UpstreamRefusesHostNamesThatAreNotNames) {
  absl::StatusOr<std::shared_ptr<SSL_CTX>> client = MakeUpstreamContext({});
  ASSERT_TRUE(client.ok());
  absl::StatusOr<UniqueSsl> ssl = StartUpstreamTls(client->get(), -1, "evil.test\nx");
  ASSERT_FALSE(ssl.ok());
  EXPECT_EQ(ssl.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace airlock::proxyd
