// The management half of the REST API: the token exchange and
// /v1/sandboxes (create, get, list, update, delete, start, stop, renew
// timeout, ports, endpoint credentials), over vmmd and policyd. A sandbox
// made here is an ordinary Airlock sandbox; its uid is its Airlock name.
// Operations Airlock does not have answer 501 with their name.
#ifndef AIRLOCK_APID_MANAGEMENT_API_H_
#define AIRLOCK_APID_MANAGEMENT_API_H_

#include <functional>
#include <mutex>
#include <set>
#include <string>

#include "apid/auth.h"
#include "apid/background.h"
#include "apid/idempotency.h"
#include "apid/policy_client.h"
#include "apid/router.h"
#include "apid/token_store.h"
#include "apid/vmm_client.h"

namespace airlock::apid {

struct ManagementOptions {
  // Base URL clients reach apid at ("http://127.0.0.1:7777").
  std::string base_url;
  // Lifetime of an exchanged access token.
  int64_t access_ttl_s = 900;
  // Called once a sandbox deleted through the API is gone.
  std::function<void(const std::string& uid)> on_deleted;
};

class ManagementApi {
 public:
  ManagementApi(ManagementOptions options, Authenticator* auth, TokenStore* tokens,
                IdempotencyLedger* ledger, VmmClient* vmm, PolicyClient* policy,
                Background* background);

  // Register adds every management route to `router`.
  void Register(Router* router);

 private:
  HttpResponse Exchange(const HttpRequest& req);
  HttpResponse List(const HttpRequest& req, const Claims& caller);
  HttpResponse Create(const HttpRequest& req, const Claims& caller);
  HttpResponse Get(const HttpRequest& req, const std::string& uid);
  HttpResponse Update(const HttpRequest& req, const Claims& caller, const std::string& uid);
  HttpResponse Delete(const HttpRequest& req, const Claims& caller, const std::string& uid);
  HttpResponse Lifecycle(const HttpRequest& req, const Claims& caller, const std::string& uid,
                         bool start);
  HttpResponse Renew(const HttpRequest& req, const std::string& uid);
  HttpResponse EndpointCredential(const HttpRequest& req, const Claims& caller,
                                  const std::string& uid);
  HttpResponse ListPorts(const std::string& uid);
  HttpResponse CreatePort(const HttpRequest& req, const std::string& uid);
  HttpResponse GetPort(const std::string& uid, const std::string& port);
  HttpResponse DeletePort(const HttpRequest& req, const std::string& uid, const std::string& port);

  // Keyed runs `op` under the Idempotency-Key of `req` (if any): a replay
  // returns the first successful response, another payload 409, the same
  // key while the first is still running 409 (aborted); a refusal is not
  // kept; after a 5xx (outcome unknown) the reservation stays. `scope`
  // names the operation; `target` is what it acts on (a create's fresh
  // uid); an attempt that never finished hands its own target to the
  // retry, which `op` sees as `resumed`.
  HttpResponse Keyed(const HttpRequest& req, const Claims& caller, const std::string& scope,
                     const std::string& payload, const std::string& target,
                     const std::function<HttpResponse(const std::string& target, bool resumed)>& op);
  // View fetches `uid` and renders it with its ETag header.
  HttpResponse View(const std::string& uid, int status);
  // Precondition checks If-Match against the sandbox's current ETag.
  std::optional<ApiError> Precondition(const HttpRequest& req, const std::string& uid);

  ManagementOptions options_;
  Authenticator* auth_;
  TokenStore* tokens_;
  IdempotencyLedger* ledger_;
  VmmClient* vmm_;
  PolicyClient* policy_;
  Background* background_;
  // Guards the ledger's read-then-write and the keys whose operation runs.
  std::mutex keyed_mu_;
  std::set<std::string> inflight_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_MANAGEMENT_API_H_
