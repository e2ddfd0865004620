// For proxyd's tests: a fresh Airlock CA in a temporary directory, a
// server context for one host from it (proxyd's side of an intercepted
// connection) and a client context that trusts it (the guest's side).
#ifndef AIRLOCK_PROXYD_TEST_TLS_H_
#define AIRLOCK_PROXYD_TEST_TLS_H_

#include <memory>
#include <string>

#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {

struct TestTls {
  airlock::testing::ShortTempDir dir;
  std::unique_ptr<CertificateAuthority> ca;
  std::shared_ptr<SSL_CTX> server;
  std::shared_ptr<SSL_CTX> client;
};

// MakeTestTls fills `out` for `host`; call it under ASSERT_NO_FATAL_FAILURE.
inline void MakeTestTls(const std::string& host, TestTls* out) {
  auto ca = CertificateAuthority::LoadOrCreate(out->dir.path());
  ASSERT_TRUE(ca.ok()) << ca.status();
  out->ca = std::move(*ca);
  auto server = out->ca->ServerContextFor(host);
  ASSERT_TRUE(server.ok()) << server.status();
  out->server = *server;
  auto client = MakeUpstreamContext({out->dir.path() + "/ca.crt"});
  ASSERT_TRUE(client.ok()) << client.status();
  out->client = *client;
}

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_TEST_TLS_H_
