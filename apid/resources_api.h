// The management API's other resources over their daemons: network
// policies (policyd's rules) and policy logs (proxyd's decision log), per
// sandbox and in the owner's scope; secrets (secretsd; metadata only,
// values are write-only); images (vmmd's image store).
#ifndef AIRLOCK_APID_RESOURCES_API_H_
#define AIRLOCK_APID_RESOURCES_API_H_

#include <string>

#include "apid/auth.h"
#include "apid/policy_client.h"
#include "apid/proxy_client.h"
#include "apid/router.h"
#include "apid/secrets_client.h"
#include "apid/vmm_client.h"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {

class ResourcesApi {
 public:
  ResourcesApi(Authenticator* auth, VmmClient* vmm, PolicyClient* policy, ProxyClient* proxy,
               SecretsClient* secrets)
      : auth_(auth), vmm_(vmm), policy_(policy), proxy_(proxy), secrets_(secrets) {}

  void Register(Router* router);

 private:
  HttpResponse NetworkPolicies(const std::string& uid);
  HttpResponse PolicyLogs(const HttpRequest& req, const std::string& uid);
  HttpResponse ListSecrets(const HttpRequest& req);
  HttpResponse GetSecret(const HttpRequest& req, const std::string& id);
  HttpResponse CreateSecret(const HttpRequest& req);
  HttpResponse UpdateSecret(const HttpRequest& req, const std::string& id);
  std::optional<ApiError> Material(const std::string& display_name,
                                   const std::string& service_type,
                                   const airlock::api::wire::v1::CustomSecretMaterial* custom,
                                   const airlock::api::wire::v1::TokenSecretMaterial* token,
                                   bool oauth, const airlock::secrets::v1::SecretInfo* existing,
                                   airlock::secrets::v1::SetRequest* set);
  HttpResponse DeleteSecret(const HttpRequest& req, const std::string& id);
  HttpResponse ListImages(const HttpRequest& req);
  HttpResponse GetImage(const HttpRequest& req, const std::string& id);
  HttpResponse DeleteImage(const HttpRequest& req, const std::string& id);

  Authenticator* auth_;
  VmmClient* vmm_;
  PolicyClient* policy_;
  ProxyClient* proxy_;
  SecretsClient* secrets_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_RESOURCES_API_H_
