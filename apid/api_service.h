// apid's gRPC surface on its Unix socket (airlock.api.v1.Api), for the
// CLI: API tokens and the URLs to give clients.
#ifndef AIRLOCK_APID_API_SERVICE_H_
#define AIRLOCK_APID_API_SERVICE_H_

#include <string>

#include "apid/token_store.h"
#include "protos/api/v1/api.grpc.pb.h"

namespace airlock::apid {

class ApiService final : public airlock::api::v1::Api::Service {
 public:
  ApiService(TokenStore* tokens, std::string base_url)
      : tokens_(tokens), base_url_(std::move(base_url)) {}

  grpc::Status CreateToken(grpc::ServerContext*, const airlock::api::v1::CreateTokenRequest*,
                           airlock::api::v1::CreateTokenResponse*) override;
  grpc::Status ListTokens(grpc::ServerContext*, const airlock::api::v1::ListTokensRequest*,
                          airlock::api::v1::ListTokensResponse*) override;
  grpc::Status RemoveToken(grpc::ServerContext*, const airlock::api::v1::RemoveTokenRequest*,
                           airlock::api::v1::RemoveTokenResponse*) override;
  grpc::Status GetUrls(grpc::ServerContext*, const airlock::api::v1::GetUrlsRequest*,
                       airlock::api::v1::GetUrlsResponse*) override;

 private:
  TokenStore* tokens_;
  std::string base_url_;
};

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_API_SERVICE_H_
