#include "apid/api_service.h"

#include <time.h>

#include "common/status.h"

namespace airlock::apid {

namespace pb = airlock::api::v1;

namespace {
void Fill(const TokenRecord& r, pb::TokenInfo* out) {
  out->set_name(r.name);
  out->set_created_at(r.created_at);
  out->set_last_used_at(r.last_used_at);
}
}  // namespace

grpc::Status ApiService::CreateToken(grpc::ServerContext*, const pb::CreateTokenRequest* req,
                                     pb::CreateTokenResponse* resp) {
  auto made = tokens_->Create(req->name(), time(nullptr));
  if (!made.ok()) return ToGrpc(made.status());
  Fill(made->first, resp->mutable_token());
  resp->set_secret(made->second);
  return grpc::Status::OK;
}

grpc::Status ApiService::ListTokens(grpc::ServerContext*, const pb::ListTokensRequest*,
                                    pb::ListTokensResponse* resp) {
  auto all = tokens_->List();
  if (!all.ok()) return ToGrpc(all.status());
  for (const auto& r : *all) Fill(r, resp->add_tokens());
  return grpc::Status::OK;
}

grpc::Status ApiService::RemoveToken(grpc::ServerContext*, const pb::RemoveTokenRequest* req,
                                     pb::RemoveTokenResponse*) {
  return ToGrpc(tokens_->Remove(req->name()));
}

grpc::Status ApiService::GetUrls(grpc::ServerContext*, const pb::GetUrlsRequest*,
                                 pb::GetUrlsResponse* resp) {
  resp->set_management(base_url_);
  resp->set_token_exchange(base_url_ + "/v2/auth/token");
  return grpc::Status::OK;
}

}  // namespace airlock::apid
