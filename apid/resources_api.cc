#include "apid/resources_api.h"

#include <google/protobuf/util/time_util.h>

#include <algorithm>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apid/network_policy_view.h"
#include "apid/sandbox_view.h"
#include "apid/signer.h"
#include "apid/wire_json.h"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {

namespace wire = airlock::api::wire::v1;
namespace spb = airlock::secrets::v1;

namespace {

HttpResponse Error(const ApiError& e) { return ErrorResponse(e); }
HttpResponse Error(const absl::Status& s) { return ErrorResponse(FromStatus(s)); }

// Page reads pageSize (default and cap given) and an offset page token
// minted by MakeToken with the same `kind`.
std::optional<ApiError> Page(const HttpRequest& req, const std::string& kind, int def, int cap,
                             int* size, size_t* offset) {
  *size = def;
  *offset = 0;
  if (std::string ps = req.Param("pageSize"); !ps.empty()) {
    if (!absl::SimpleAtoi(ps, size) || *size < 0) {
      return ApiError::InvalidArgument("pageSize must be a non-negative number");
    }
    if (*size == 0) *size = def;
    *size = std::min(*size, cap);
  }
  if (std::string tok = req.Param("pageToken"); !tok.empty()) {
    std::string raw;
    if (!absl::WebSafeBase64Unescape(tok, &raw) || !absl::StartsWith(raw, kind + ":") ||
        !absl::SimpleAtoi(raw.substr(kind.size() + 1), offset)) {
      return ApiError::InvalidArgument("pageToken is not one this list returned");
    }
  }
  return std::nullopt;
}

std::string MakeToken(const std::string& kind, size_t next) {
  return absl::WebSafeBase64Escape(absl::StrCat(kind, ":", next));
}

// Filters parses "field=value,..." against the allowed fields.
std::optional<ApiError> Filters(const HttpRequest& req, const std::vector<std::string>& allowed,
                                std::map<std::string, std::string>* out) {
  for (absl::string_view t : absl::StrSplit(req.Param("filter"), ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(t, absl::MaxSplits('=', 1));
    std::string field(absl::StripAsciiWhitespace(kv.first));
    if (field == "displayName") field = "display_name";
    if (t.find('=') == absl::string_view::npos ||
        std::find(allowed.begin(), allowed.end(), field) == allowed.end()) {
      return ApiError::InvalidArgument(absl::StrCat("filter term \"", t, "\": use field=value with ",
                                                    absl::StrJoin(allowed, ", ")));
    }
    (*out)[field] = std::string(absl::StripAsciiWhitespace(kv.second));
  }
  return std::nullopt;
}

std::optional<ApiError> TimeParam(const HttpRequest& req, const std::string& name, int64_t* ms) {
  *ms = 0;
  std::string v = req.Param(name);
  if (v.empty()) return std::nullopt;
  google::protobuf::Timestamp t;
  if (!google::protobuf::util::TimeUtil::FromString(v, &t)) {
    return ApiError::InvalidArgument(absl::StrCat(name, " must be an RFC 3339 time"));
  }
  *ms = t.seconds() * 1000 + t.nanos() / 1000000;
  return std::nullopt;
}

wire::Secret SecretView(const spb::SecretInfo& s) {
  wire::Secret out;
  out.set_uid(s.id());
  out.set_name(absl::StrCat("secrets/", s.id()));
  if (!s.registry().empty()) {
    out.set_type("registryV2");
    out.set_service_type("registry");
    out.set_display_name(s.registry());
  } else if (!s.service().empty()) {
    out.set_type("token");
    out.set_service_type(s.service());
    out.set_display_name(s.service());
  } else {
    out.set_type("custom");
    out.set_display_name(s.env());
    wire::CustomInjection* inj = out.mutable_injection();
    for (const auto& h : s.hosts()) inj->add_hosts(h);
    inj->set_env_var(s.env());
    out.set_placeholder(s.sentinel());
  }
  out.mutable_created_at()->set_seconds(s.created_at());
  out.mutable_updated_at()->set_seconds(s.created_at());
  out.set_etag(absl::StrCat("\"", Sha256Hex(absl::StrCat(s.id(), "|", s.created_at(), "|",
                                                          s.sentinel())).substr(0, 16),
                            "\""));
  return out;
}

std::string ImageUid(const airlock::vmm::v1::Image& img) {
  return std::string(absl::StripPrefix(img.id(), "sha256:"));
}

wire::Image ImageView(const airlock::vmm::v1::Image& img) {
  wire::Image out;
  out.set_uid(ImageUid(img));
  out.set_name(absl::StrCat("images/", out.uid()));
  out.set_description(img.description());
  out.set_status("completed");
  if (!img.names().empty()) {
    out.set_image_ref(img.names(0));
    out.set_display_name(img.names(0));
  }
  out.set_image_digest(img.digest());
  out.mutable_platform()->set_os("linux");
  out.mutable_platform()->set_architecture("amd64");
  out.set_total_size_bytes(static_cast<int64_t>(img.size_bytes()));
  out.mutable_created_at()->set_seconds(img.created_at());
  out.mutable_updated_at()->set_seconds(img.created_at());
  out.set_source(absl::StartsWith(img.source(), "save ") ? "sandbox" : "image");
  out.set_etag(absl::StrCat(
      "\"", Sha256Hex(absl::StrCat(img.id(), "|", absl::StrJoin(img.names(), ","))).substr(0, 16),
      "\""));
  return out;
}

HttpResponse WithEtag(HttpResponse r, const std::string& etag) {
  r.headers["ETag"] = etag;
  return r;
}

}  // namespace

void ResourcesApi::Register(Router* r) {
  auto authed = [this](std::function<HttpResponse(const HttpRequest&, const PathParams&)> fn) {
    return [this, fn](const HttpRequest& req, const PathParams& p) {
      Claims caller;
      if (auto e = auth_->Management(req, &caller)) return Error(*e);
      return fn(req, p);
    };
  };
  r->Add("GET", "/v1/sandboxes/{sandbox}/network-policies",
         authed([this](auto&, auto& p) { return NetworkPolicies(p.at("sandbox")); }));
  r->Add("GET", "/v1/network-policies", authed([this](auto&, auto&) { return NetworkPolicies(""); }));
  r->Add("GET", "/v1/sandboxes/{sandbox}/policy-logs",
         authed([this](auto& req, auto& p) { return PolicyLogs(req, p.at("sandbox")); }));
  r->Add("GET", "/v1/policy-logs", authed([this](auto& req, auto&) { return PolicyLogs(req, ""); }));
  r->Add("GET", "/v1/secrets", authed([this](auto& req, auto&) { return ListSecrets(req); }));
  r->Add("POST", "/v1/secrets", authed([this](auto& req, auto&) { return CreateSecret(req); }));
  r->Add("GET", "/v1/secrets/{secret}",
         authed([this](auto& req, auto& p) { return GetSecret(req, p.at("secret")); }));
  r->Add("DELETE", "/v1/secrets/{secret}",
         authed([this](auto& req, auto& p) { return DeleteSecret(req, p.at("secret")); }));
  r->Add("PUT", "/v1/secrets/{secret}",
         authed([this](auto& req, auto& p) { return UpdateSecret(req, p.at("secret")); }));
  r->Add("GET", "/v1/images", authed([this](auto& req, auto&) { return ListImages(req); }));
  r->Add("GET", "/v1/images/{image}",
         authed([this](auto& req, auto& p) { return GetImage(req, p.at("image")); }));
  r->Add("DELETE", "/v1/images/{image}",
         authed([this](auto& req, auto& p) { return DeleteImage(req, p.at("image")); }));
  r->Add("POST", "/v1/images", authed([](auto&, auto&) {
           return Error(ApiError::Unimplemented(
               "createImage (bring images with airlock template pull, load or save)"));
         }));
  r->Add("GET", "/v1/images/{image}/pull-spec",
         authed([](auto&, auto&) { return Error(ApiError::Unimplemented("getImagePullSpec")); }));
}

HttpResponse ResourcesApi::NetworkPolicies(const std::string& uid) {
  if (!uid.empty()) {
    auto sb = vmm_->Get(uid);
    if (!sb.ok()) return Error(sb.status());
  }
  auto rules = policy_->Rules(uid);
  if (!rules.ok()) return Error(rules.status());
  std::vector<airlock::policy::v1::Rule> applying;
  for (const auto& r : rules->rules()) {
    // The owner scope is the global rules; a sandbox sees those and its own.
    if (r.sandbox().empty() || (!uid.empty() && r.sandbox() == uid)) applying.push_back(r);
  }
  return JsonResponse(200, apid::NetworkPolicies(applying));
}

HttpResponse ResourcesApi::PolicyLogs(const HttpRequest& req, const std::string& uid) {
  int size;
  size_t offset;
  if (auto e = Page(req, "l1", 100, 1000, &size, &offset)) return Error(*e);
  std::map<std::string, std::string> filters;
  if (auto e = Filters(req, {"domain"}, &filters)) return Error(*e);
  int64_t since = 0, until = 0;
  if (auto e = TimeParam(req, "since", &since)) return Error(*e);
  if (auto e = TimeParam(req, "until", &until)) return Error(*e);
  if (!uid.empty()) {
    auto sb = vmm_->Get(uid);
    if (!sb.ok()) return Error(sb.status());
  }
  auto decisions = proxy_->Decisions(uid, 100000);
  if (!decisions.ok()) return Error(decisions.status());
  auto entries = PolicyLog(*decisions, since, until);
  wire::ListPolicyLogEntriesResponse out;
  bool domain_ok = !filters.count("domain") || filters["domain"] == "network";
  for (size_t i = offset; domain_ok && i < entries.size() && out.entries_size() < size; ++i) {
    *out.add_entries() = entries[i];
  }
  size_t next = offset + out.entries_size();
  if (domain_ok && next < entries.size()) out.set_next_page_token(MakeToken("l1", next));
  return JsonResponse(200, out);
}

HttpResponse ResourcesApi::ListSecrets(const HttpRequest& req) {
  int size;
  size_t offset;
  if (auto e = Page(req, "s1", 25, 100, &size, &offset)) return Error(*e);
  std::map<std::string, std::string> filters;
  if (auto e = Filters(req, {"name", "display_name", "uid"}, &filters)) return Error(*e);
  auto all = secrets_->List();
  if (!all.ok()) return Error(all.status());
  std::vector<wire::Secret> views;
  for (const auto& s : *all) {
    if (s.scope() != spb::GLOBAL) continue;  // a sandbox's own secrets are not the owner's
    wire::Secret v = SecretView(s);
    if (filters.count("name") && v.name() != filters["name"]) continue;
    if (filters.count("uid") && v.uid() != filters["uid"]) continue;
    if (filters.count("display_name") && v.display_name() != filters["display_name"]) continue;
    views.push_back(std::move(v));
  }
  wire::ListSecretsResponse out;
  for (size_t i = offset; i < views.size() && out.secrets_size() < size; ++i) {
    *out.add_secrets() = views[i];
  }
  size_t next = offset + out.secrets_size();
  if (next < views.size()) out.set_next_page_token(MakeToken("s1", next));
  return JsonResponse(200, out);
}

HttpResponse ResourcesApi::GetSecret(const HttpRequest& req, const std::string& id) {
  auto all = secrets_->List();
  if (!all.ok()) return Error(all.status());
  for (const auto& s : *all) {
    if (s.id() != id || s.scope() != spb::GLOBAL) continue;
    wire::Secret v = SecretView(s);
    std::string inm = req.Header("if-none-match");
    if (!inm.empty() && EtagMatches(inm, v.etag())) {
      HttpResponse nm;
      nm.status = 304;
      return WithEtag(nm, v.etag());
    }
    return WithEtag(JsonResponse(200, v), v.etag());
  }
  return Error(ApiError::NotFound(absl::StrCat("secrets/", id, " does not exist")));
}

// Material turns secret material into a SetRequest: `token` for a
// built-in service, `custom` for any hosts. `existing` is the secret an
// update replaces (its variable, service and placeholder are kept).
std::optional<ApiError> ResourcesApi::Material(const std::string& display_name,
                                               const std::string& service_type,
                                               const wire::CustomSecretMaterial* custom,
                                               const wire::TokenSecretMaterial* token,
                                               bool oauth, const spb::SecretInfo* existing,
                                               spb::SetRequest* set) {
  int kinds = (custom != nullptr) + (token != nullptr) + oauth;
  if (kinds != 1) return ApiError::InvalidArgument("give exactly one of custom, token or oauth");
  if (oauth) return ApiError::Unimplemented("oauth secret material");
  set->set_scope(spb::GLOBAL);
  if (token != nullptr) {
    if (token->value().empty()) return ApiError::InvalidArgument("token.value is required");
    std::string service = service_type;
    if (existing != nullptr) {
      if (existing->service().empty()) {
        return ApiError::InvalidArgument("this secret is custom: update it with custom material");
      }
      if (!service.empty() && service != existing->service()) {
        return ApiError::InvalidArgument("serviceType cannot change; create another secret");
      }
      service = existing->service();
    }
    auto services = secrets_->Services();
    if (!services.ok()) return FromStatus(services.status());
    if (std::find(services->begin(), services->end(), service) == services->end()) {
      return ApiError::InvalidArgument(absl::StrCat(
          "serviceType \"", service, "\" is not a built-in service (",
          absl::StrJoin(*services, ", "), "); use custom material for anything else"));
    }
    set->set_service(service);
    set->set_value(token->value());
    return std::nullopt;
  }
  if (!service_type.empty()) {
    return ApiError::InvalidArgument("serviceType is assigned by the server for custom material");
  }
  if (existing != nullptr && !existing->service().empty()) {
    return ApiError::InvalidArgument("this secret is a service token: update it with token material");
  }
  if (custom->value().empty()) return ApiError::InvalidArgument("custom.value is required");
  const auto& inj = custom->injection();
  if (inj.hosts().empty() || inj.hosts_size() > 10) {
    return ApiError::InvalidArgument("custom.injection.hosts needs 1 to 10 host names");
  }
  if (inj.header().empty()) return ApiError::InvalidArgument("custom.injection.header is required");
  if (!inj.format().empty() && inj.format() != "%s") {
    return ApiError::Unimplemented(
        "custom.injection.format other than \"%s\" (Airlock swaps the placeholder for the value "
        "where it appears)");
  }
  set->set_value(custom->value());
  std::string env = inj.env_var().empty() ? display_name : inj.env_var();
  if (existing != nullptr) {
    if (!inj.env_var().empty() && inj.env_var() != existing->env()) {
      return ApiError::InvalidArgument("injection.envVar cannot change; create another secret");
    }
    env = existing->env();
  }
  set->set_env(env);
  for (const auto& h : inj.hosts()) set->add_hosts(h);
  std::string placeholder = inj.placeholder_template();
  for (size_t at; (at = placeholder.find("{rand}")) != std::string::npos;) {
    placeholder.replace(at, 6, RandomHex(8));
  }
  // The placeholder is stable across value rotation.
  if (placeholder.empty() && existing != nullptr) placeholder = existing->sentinel();
  set->set_placeholder(placeholder);
  return std::nullopt;
}

HttpResponse ResourcesApi::CreateSecret(const HttpRequest& req) {
  wire::CreateSecretRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (body.display_name().empty() || body.display_name().find('/') != std::string::npos) {
    return Error(ApiError::InvalidArgument("displayName is required and has no '/'"));
  }
  spb::SetRequest set;
  if (auto e = Material(body.display_name(), body.service_type(),
                        body.has_custom() ? &body.custom() : nullptr,
                        body.has_token() ? &body.token() : nullptr, body.has_oauth(), nullptr, &set)) {
    return Error(*e);
  }
  // secretsd keys a secret by its service or variable: a create must not
  // replace one (that is PUT, under If-Match).
  auto all = secrets_->List();
  if (!all.ok()) return Error(all.status());
  for (const auto& s : *all) {
    if (s.scope() != spb::GLOBAL || !s.registry().empty()) continue;
    bool same = set.service().empty() ? (s.service().empty() && s.env() == set.env())
                                      : s.service() == set.service();
    if (same) {
      return Error(FromStatus(absl::AlreadyExistsError(absl::StrCat(
          "secrets/", s.id(), " already holds this ",
          set.service().empty() ? "variable" : "service", "; update it with PUT"))));
    }
  }
  auto info = secrets_->Set(set);
  if (!info.ok()) return Error(info.status());
  wire::Secret v = SecretView(*info);
  return WithEtag(JsonResponse(201, v), v.etag());
}

HttpResponse ResourcesApi::UpdateSecret(const HttpRequest& req, const std::string& id) {
  wire::UpdateSecretBody body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  std::string want = req.Header("if-match");
  if (want.empty()) return Error(ApiError::EtagRequired());
  auto all = secrets_->List();
  if (!all.ok()) return Error(all.status());
  const spb::SecretInfo* existing = nullptr;
  for (const auto& s : *all) {
    if (s.id() == id && s.scope() == spb::GLOBAL && s.registry().empty()) existing = &s;
  }
  if (existing == nullptr) return Error(ApiError::NotFound(absl::StrCat("secrets/", id, " does not exist")));
  std::string etag = SecretView(*existing).etag();
  if (want != etag && want != "*") return Error(ApiError::EtagMismatch(etag));
  spb::SetRequest set;
  if (auto e = Material(existing->env(), body.service_type(),
                        body.has_custom() ? &body.custom() : nullptr,
                        body.has_token() ? &body.token() : nullptr, body.has_oauth(), existing, &set)) {
    return Error(*e);
  }
  auto info = secrets_->Set(set);
  if (!info.ok()) return Error(info.status());
  if (info->id() != id) {
    return Error(FromStatus(absl::InternalError("the update made another secret")));
  }
  wire::Secret v = SecretView(*info);
  return WithEtag(JsonResponse(200, v), v.etag());
}

HttpResponse ResourcesApi::DeleteSecret(const HttpRequest& req, const std::string& id) {
  std::string want = req.Header("if-match");
  if (want.empty()) return Error(ApiError::EtagRequired());
  auto all = secrets_->List();
  if (!all.ok()) return Error(all.status());
  for (const auto& s : *all) {
    if (s.id() != id || s.scope() != spb::GLOBAL) continue;
    std::string etag = SecretView(s).etag();
    if (want != etag && want != "*") return Error(ApiError::EtagMismatch(etag));
    if (absl::Status st = secrets_->Delete(id); !st.ok()) return Error(st);
    break;
  }
  // Deleting an absent secret succeeds.
  return JsonResponse(200, wire::EmptyResponse());
}

HttpResponse ResourcesApi::ListImages(const HttpRequest& req) {
  int size;
  size_t offset;
  if (auto e = Page(req, "i1", 25, 100, &size, &offset)) return Error(*e);
  std::map<std::string, std::string> filters;
  if (auto e = Filters(req, {"name", "display_name", "uid", "status"}, &filters)) return Error(*e);
  auto all = vmm_->ListImages();
  if (!all.ok()) return Error(all.status());
  std::vector<wire::Image> views;
  for (const auto& img : *all) {
    wire::Image v = ImageView(img);
    if (filters.count("name") && v.name() != filters["name"]) continue;
    if (filters.count("uid") && v.uid() != filters["uid"]) continue;
    if (filters.count("display_name") && v.display_name() != filters["display_name"]) continue;
    if (filters.count("status") && v.status() != filters["status"]) continue;
    views.push_back(std::move(v));
  }
  wire::ListImagesResponse out;
  for (size_t i = offset; i < views.size() && out.images_size() < size; ++i) {
    *out.add_images() = views[i];
  }
  size_t next = offset + out.images_size();
  if (next < views.size()) out.set_next_page_token(MakeToken("i1", next));
  return JsonResponse(200, out);
}

HttpResponse ResourcesApi::GetImage(const HttpRequest& req, const std::string& id) {
  if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return Error(ApiError::NotFound(absl::StrCat("images/", id, " does not exist")));
  }
  auto img = vmm_->InspectImage("sha256:" + id);
  if (!img.ok()) return Error(img.status());
  if (ImageUid(*img) != id) {
    return Error(ApiError::NotFound(absl::StrCat("images/", id, " does not exist")));
  }
  wire::Image v = ImageView(*img);
  std::string inm = req.Header("if-none-match");
  if (!inm.empty() && EtagMatches(inm, v.etag())) {
    HttpResponse nm;
    nm.status = 304;
    return WithEtag(nm, v.etag());
  }
  return WithEtag(JsonResponse(200, v), v.etag());
}

HttpResponse ResourcesApi::DeleteImage(const HttpRequest& req, const std::string& id) {
  std::string want = req.Header("if-match");
  if (want.empty()) return Error(ApiError::EtagRequired());
  if (id.empty() || id.find_first_not_of("0123456789abcdef") != std::string::npos) {
    HttpResponse gone;
    gone.status = 204;
    return gone;
  }
  auto img = vmm_->InspectImage("sha256:" + id);
  if (!img.ok() && img.status().code() == absl::StatusCode::kNotFound) {
    HttpResponse gone;
    gone.status = 204;
    return gone;
  }
  if (!img.ok()) return Error(img.status());
  std::string etag = ImageView(*img).etag();
  if (want != etag && want != "*") return Error(ApiError::EtagMismatch(etag));
  if (absl::Status s = vmm_->RemoveImage(img->id()); !s.ok()) return Error(s);
  HttpResponse gone;
  gone.status = 204;
  return gone;
}

}  // namespace airlock::apid
