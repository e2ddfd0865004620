// SecretsClient: proxyd's one client of secretsd.
//
// Resolve asks what to place in a request; the answer is kept in a
// CredentialCache, and Cached gives it back while secretsd's revision
// watch vouches for it. The watch is a thread that keeps a WatchRevisions
// stream open: it pings every quarter lease, feeds each answer and pushed
// change to the cache, and acknowledges a change only once the cache has
// it, which is when secretsd lets the change's caller return. With no
// stream (secretsd down, restarting, or refusing this proxyd) nothing is
// cached and every request asks, as before the cache.
#ifndef AIRLOCK_PROXYD_SECRETS_CLIENT_H_
#define AIRLOCK_PROXYD_SECRETS_CLIENT_H_

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "proxyd/credential_cache.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "proxyd/inject.h"

namespace airlock::proxyd {

class SecretsClient {
 public:
  explicit SecretsClient(std::shared_ptr<grpc::Channel> channel);
  ~SecretsClient();  // Stop
  SecretsClient(const SecretsClient&) = delete;
  SecretsClient& operator=(const SecretsClient&) = delete;

  // Start opens the watch (reopened, after a pause, whenever it ends).
  void Start();
  void Stop();

  // Cached is the answer kept for this request while the watch vouches
  // for it; nullopt: Resolve.
  std::optional<std::vector<Placement>> Cached(const std::string& sandbox,
                                               const std::string& host, uint16_t port);
  // Resolve asks secretsd (a blocking call: a fiber runs it aside) and
  // keeps the answer. `ctx` carries the caller's deadline and
  // cancellation. An error is secretsd's, with its message.
  absl::StatusOr<std::vector<Placement>> Resolve(grpc::ClientContext* ctx,
                                                 const std::string& sandbox,
                                                 const std::string& host, uint16_t port);
  // Forget drops what was kept for `sandbox`.
  void Forget(const std::string& sandbox);

  // watching says whether the watch has an answer from the secretsd now
  // running (for tests and diagnostics).
  bool watching() const { return watching_; }
  CredentialCache& cache() { return cache_; }

 private:
  void Watch();
  // WatchOnce runs one stream until it ends (`ended_with` says how); true
  // when it got an answer.
  bool WatchOnce(grpc::Status* ended_with);

  // One stub for every call (a stub is safe to share between threads).
  std::unique_ptr<airlock::secrets::v1::Secrets::Stub> stub_;
  CredentialCache cache_;
  std::atomic<bool> watching_{false};
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;
  grpc::ClientContext* stream_ctx_ = nullptr;  // guarded by mu_
  std::thread thread_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_SECRETS_CLIENT_H_
