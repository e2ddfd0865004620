#include "apid/management_api.h"

#include <time.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "apid/sandbox_view.h"
#include "apid/signer.h"
#include "apid/wire_json.h"
#include "common/log.h"
#include "common/sizes.h"
#include "nlohmann/json.hpp"
#include "protos/api/v1/wire.pb.h"

namespace airlock::apid {

namespace vmm = airlock::vmm::v1;
namespace wire = airlock::api::wire::v1;

namespace {

constexpr int kDefaultPageSize = 25;
constexpr int kMaxPageSize = 100;
constexpr int64_t kEndpointTtl = 300;

HttpResponse Error(const ApiError& e) { return ErrorResponse(e); }
HttpResponse Error(const absl::Status& s) { return ErrorResponse(FromStatus(s)); }

// CanonicalPayload is the request as the ledger compares it: the method,
// path and the body with object keys sorted (whitespace and key order do
// not make a different payload).
std::string CanonicalPayload(const HttpRequest& req) {
  std::string body = req.body;
  nlohmann::json j = nlohmann::json::parse(body, nullptr, false);
  if (!j.is_discarded()) body = j.dump();
  return Sha256Hex(absl::StrCat(req.method, " ", req.path, "\n", body));
}

std::string NewUid(const std::string& agent) {
  return absl::StrCat(agent.empty() ? "shell" : agent, "-", RandomHex(5));
}

// The five sizes the API offers, by name, from the shared table.
absl::StatusOr<std::string> SizeFor(const wire::Resources& r) {
  if (!r.has_cpus() || !r.has_memory_mib()) {
    return absl::InvalidArgumentError(
        "resources needs both cpus and memoryMib, as one of the supported pairs: "
        "1/2048, 2/4096, 4/8192, 8/16384, 16/32768");
  }
  for (const char* name : {"micro", "small", "medium", "large", "xl"}) {
    auto size = LookupSize(name);
    if (size.ok() && size->cpus == static_cast<uint32_t>(r.cpus()) &&
        size->memory_mib == static_cast<uint64_t>(r.memory_mib())) {
      return std::string(name);
    }
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "resources ", r.cpus(), " CPUs / ", r.memory_mib(),
      " MiB is not a supported size: use 1/2048, 2/4096, 4/8192, 8/16384 or 16/32768"));
}

bool Present(const google::protobuf::Value& v) {
  return v.kind_case() != google::protobuf::Value::KIND_NOT_SET &&
         v.kind_case() != google::protobuf::Value::kNullValue;
}

// ValidDisplayName applies the API's label rule (1..64 of [A-Za-z0-9_-]).
absl::Status ValidDisplayName(const std::string& d, bool allow_empty) {
  if (d.empty() && allow_empty) return absl::OkStatus();
  if (d.empty() || d.size() > 64) {
    return absl::InvalidArgumentError("displayName must be 1 to 64 characters");
  }
  for (char c : d) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-') {
      return absl::InvalidArgumentError(absl::StrCat(
          "displayName \"", d, "\" may hold only letters, digits, '_' and '-'"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

ManagementApi::ManagementApi(ManagementOptions options, Authenticator* auth, TokenStore* tokens,
                             IdempotencyLedger* ledger, VmmClient* vmm, PolicyClient* policy,
                             Background* background)
    : options_(std::move(options)),
      auth_(auth),
      tokens_(tokens),
      ledger_(ledger),
      vmm_(vmm),
      policy_(policy),
      background_(background) {}

void ManagementApi::Register(Router* r) {
  r->Add("POST", "/v2/auth/token", [this](const HttpRequest& req, const PathParams&) {
    return Exchange(req);
  });
  // Every other management route needs an access token first.
  auto authed = [this](std::function<HttpResponse(const HttpRequest&, const Claims&,
                                                  const PathParams&)> fn) {
    return [this, fn](const HttpRequest& req, const PathParams& p) {
      Claims caller;
      if (auto e = auth_->Management(req, &caller)) return Error(*e);
      return fn(req, caller, p);
    };
  };
  r->Add("GET", "/v1/sandboxes", authed([this](auto& req, auto& c, auto&) {
           return List(req, c);
         }));
  r->Add("POST", "/v1/sandboxes", authed([this](auto& req, auto& c, auto&) {
           return Create(req, c);
         }));
  r->Add("GET", "/v1/sandboxes/{sandbox}", authed([this](auto& req, auto&, auto& p) {
           return Get(req, p.at("sandbox"));
         }));
  r->Add("PATCH", "/v1/sandboxes/{sandbox}", authed([this](auto& req, auto& c, auto& p) {
           return Update(req, c, p.at("sandbox"));
         }));
  r->Add("DELETE", "/v1/sandboxes/{sandbox}", authed([this](auto& req, auto& c, auto& p) {
           return Delete(req, c, p.at("sandbox"));
         }));
  r->Add("POST", "/v1/sandboxes/{sandbox}/start", authed([this](auto& req, auto& c, auto& p) {
           return Lifecycle(req, c, p.at("sandbox"), true);
         }));
  r->Add("POST", "/v1/sandboxes/{sandbox}/stop", authed([this](auto& req, auto& c, auto& p) {
           return Lifecycle(req, c, p.at("sandbox"), false);
         }));
  r->Add("POST", "/v1/sandboxes/{sandbox}/renew-timeout",
         authed([this](auto& req, auto&, auto& p) { return Renew(req, p.at("sandbox")); }));
  r->Add("POST", "/v1/sandboxes/{sandbox}/endpoint-credentials",
         authed([this](auto& req, auto& c, auto& p) {
           return EndpointCredential(req, c, p.at("sandbox"));
         }));
  r->Add("GET", "/v1/sandboxes/{sandbox}/ports",
         authed([this](auto&, auto&, auto& p) { return ListPorts(p.at("sandbox")); }));
  r->Add("POST", "/v1/sandboxes/{sandbox}/ports", authed([this](auto& req, auto& c, auto& p) {
           return Keyed(req, c, "createPort:" + p.at("sandbox"), CanonicalPayload(req),
                        p.at("sandbox"),
                        [&](const std::string&, bool) { return CreatePort(req, p.at("sandbox")); });
         }));
  r->Add("GET", "/v1/sandboxes/{sandbox}/ports/{port}", authed([this](auto&, auto&, auto& p) {
           return GetPort(p.at("sandbox"), p.at("port"));
         }));
  r->Add("DELETE", "/v1/sandboxes/{sandbox}/ports/{port}",
         authed([this](auto& req, auto&, auto& p) {
           return DeletePort(req, p.at("sandbox"), p.at("port"));
         }));

  // What Airlock does not have: 501 naming the operation, after auth.
  struct Missing {
    const char* method;
    const char* pattern;
    const char* operation;
  };
  static const Missing kMissing[] = {
      {"POST", "/v1/sandboxes/{sandbox}/snapshots", "createSnapshot"},
      {"GET", "/v1/snapshots", "listSnapshots"},
      {"GET", "/v1/snapshots/{snapshot}", "getSnapshot"},
      {"DELETE", "/v1/snapshots/{snapshot}", "deleteSnapshot"},
      {"GET", "/v1/volumes", "listVolumes"},
      {"POST", "/v1/volumes", "createVolume"},
      {"GET", "/v1/volumes/{volume}", "getVolume"},
      {"DELETE", "/v1/volumes/{volume}", "deleteVolume"},
      {"GET", "/v1/sandboxes/{sandbox}/mcp-gateway", "getMcpGateway"},
      {"POST", "/v1/sandboxes/{sandbox}/mcp-gateway/servers", "addMcpGatewayServer"},
      {"POST", "/v1/sandboxes/{sandbox}/mcp-gateway/start", "startMcpGateway"},
      {"POST", "/v1/sandboxes/{sandbox}/mcp-gateway/stop", "stopMcpGateway"},
      {"POST", "/v1/sandboxes/{sandbox}/ssh-certificates", "issueSSHCert"},
  };
  for (const Missing& m : kMissing) {
    std::string op = m.operation;
    r->Add(m.method, m.pattern, authed([op](auto&, auto&, auto&) {
             return Error(ApiError::Unimplemented(op));
           }));
  }
}

HttpResponse ManagementApi::Exchange(const HttpRequest& req) {
  wire::TokenExchangeRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (body.identifier().empty() || body.secret().empty()) {
    return Error(ApiError::InvalidArgument("the token exchange needs identifier and secret"));
  }
  int64_t now = time(nullptr);
  auto record = tokens_->Exchange(body.identifier(), body.secret(), now);
  if (!record.ok()) return Error(record.status());
  wire::TokenExchangeResponse out;
  out.set_access_token(auth_->IssueAccess(*record, now, options_.access_ttl_s));
  HttpResponse r = JsonResponse(200, out);
  r.headers["Cache-Control"] = "no-store";
  return r;
}

HttpResponse ManagementApi::View(const std::string& uid, int status) {
  auto sb = vmm_->Get(uid);
  if (!sb.ok()) {
    if (sb.status().code() == absl::StatusCode::kNotFound) {
      return Error(ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist")));
    }
    return Error(sb.status());
  }
  if (!sb->installs_agent_image().empty()) {
    return Error(ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist")));
  }
  wire::Sandbox view = ToWire(*sb, options_.base_url, background_->Deleting(uid));
  HttpResponse r = JsonResponse(status, view);
  r.headers["ETag"] = view.core().etag();
  return r;
}

std::optional<ApiError> ManagementApi::Precondition(const HttpRequest& req,
                                                    const std::string& uid) {
  std::string want = req.Header("if-match");
  if (want.empty()) return ApiError::EtagRequired();
  auto sb = vmm_->Get(uid);
  if (!sb.ok()) {
    if (sb.status().code() == absl::StatusCode::kNotFound) {
      return ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist"));
    }
    return FromStatus(sb.status());
  }
  if (!sb->installs_agent_image().empty()) {
    return ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist"));
  }
  std::string etag = ToWire(*sb, options_.base_url, background_->Deleting(uid)).core().etag();
  if (want != etag && want != "*") return ApiError::EtagMismatch(etag);
  return std::nullopt;
}

HttpResponse ManagementApi::Keyed(const HttpRequest& req, const Claims& caller,
                                  const std::string& scope, const std::string& payload,
                                  const std::string& target,
                                  const std::function<HttpResponse(const std::string&, bool)>& op) {
  std::string key = req.Header("idempotency-key");
  if (key.empty()) return op(target, false);
  if (key.size() > 256) {
    return Error(ApiError::InvalidArgument("Idempotency-Key is over 256 characters"));
  }
  std::string full_scope = absl::StrCat(caller.subject, "|", scope);
  std::string inflight = absl::StrCat(full_scope, "\n", key);
  std::string use_target = target;
  bool resumed = false;
  {
    std::lock_guard<std::mutex> lock(keyed_mu_);
    if (inflight_.count(inflight)) {
      ApiError e = FromStatus(absl::AbortedError(
          "a request with this Idempotency-Key is still running; retry when it has answered"));
      return Error(e);
    }
    auto found = ledger_->Find(full_scope, key);
    if (!found.ok()) return Error(found.status());
    if (found->has_value()) {
      const LedgerEntry& e = **found;
      if (e.request_hash != payload) return Error(ApiError::IdempotencyConflict());
      if (e.status != 0) {
        HttpResponse r;
        r.status = e.status;
        r.body = e.body;
        if (!e.etag.empty()) r.headers["ETag"] = e.etag;
        return r;
      }
      // An attempt that did not finish (apid stopped during it): run again
      // on the same target, so a create finds the sandbox it made.
      if (!e.target.empty()) use_target = e.target;
      resumed = true;
    } else if (absl::Status s = ledger_->Reserve(full_scope, key, payload, target, time(nullptr));
               !s.ok()) {
      return Error(s);
    }
    inflight_.insert(inflight);
  }
  HttpResponse r;
  try {
    r = op(use_target, resumed);
  } catch (...) {
    std::lock_guard<std::mutex> lock(keyed_mu_);
    inflight_.erase(inflight);
    throw;
  }
  std::lock_guard<std::mutex> lock(keyed_mu_);
  inflight_.erase(inflight);
  if (r.status >= 500) {
    // The outcome is unknown (a peer's answer was lost): the reservation
    // stays, so a retry acts on the same target.
  } else if (r.status < 200 || r.status > 299) {
    // A refusal changed nothing: there is no result to replay, and a
    // corrected retry under the same key runs.
    (void)ledger_->Forget(full_scope, key);
  } else {
    auto etag = r.headers.find("ETag");
    (void)ledger_->Complete(full_scope, key, r.status, r.body,
                            etag == r.headers.end() ? "" : etag->second);
  }
  return r;
}

HttpResponse ManagementApi::List(const HttpRequest& req, const Claims&) {
  int page_size = kDefaultPageSize;
  if (std::string ps = req.Param("pageSize"); !ps.empty()) {
    if (!absl::SimpleAtoi(ps, &page_size) || page_size < 0) {
      return Error(ApiError::InvalidArgument("pageSize must be a number from 0 to 100"));
    }
    if (page_size == 0) page_size = kDefaultPageSize;
    page_size = std::min(page_size, kMaxPageSize);
  }
  // filter: comma-separated exact field=value terms.
  std::vector<std::pair<std::string, std::string>> terms;
  for (absl::string_view t : absl::StrSplit(req.Param("filter"), ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(t, absl::MaxSplits('=', 1));
    std::string field(absl::StripAsciiWhitespace(kv.first));
    if (field == "displayName") field = "display_name";
    static const std::set<std::string> kFields = {"name", "display_name", "uid", "status",
                                                  "agent"};
    if (!kFields.count(field) || t.find('=') == absl::string_view::npos) {
      return Error(ApiError::InvalidArgument(absl::StrCat(
          "filter term \"", t, "\": use field=value with name, display_name, uid, status or "
          "agent")));
    }
    terms.emplace_back(field, std::string(absl::StripAsciiWhitespace(kv.second)));
  }
  std::string order = std::string(absl::StripAsciiWhitespace(req.Param("orderBy")));
  bool desc = false;
  if (absl::EndsWith(order, " desc")) {
    desc = true;
    order = std::string(absl::StripAsciiWhitespace(order.substr(0, order.size() - 5)));
  } else if (absl::EndsWith(order, " asc")) {
    order = std::string(absl::StripAsciiWhitespace(order.substr(0, order.size() - 4)));
  }
  if (order.empty()) order = "name";
  if (order == "createdAt") order = "created_at";
  if (order != "name" && order != "created_at") {
    return Error(ApiError::InvalidArgument(
        "orderBy must be name or created_at, optionally followed by \" desc\""));
  }
  // A page token is the offset, bound to the filter and order it came from.
  std::string binding = Sha256Hex(absl::StrCat(req.Param("filter"), "|", order, desc)).substr(0, 12);
  size_t offset = 0;
  if (std::string tok = req.Param("pageToken"); !tok.empty()) {
    std::string raw;
    std::vector<std::string> parts;
    if (absl::WebSafeBase64Unescape(tok, &raw)) parts = absl::StrSplit(raw, ':');
    if (parts.size() != 3 || parts[0] != "v1" || parts[2] != binding ||
        !absl::SimpleAtoi(parts[1], &offset)) {
      return Error(ApiError::InvalidArgument(
          "pageToken is not one this list returned (or the filter or orderBy changed)"));
    }
  }
  auto all = vmm_->List();
  if (!all.ok()) return Error(all.status());
  std::vector<wire::Sandbox> views;
  for (const auto& sb : *all) {
    if (!sb.installs_agent_image().empty()) continue;  // vmmd's own, never the caller's
    wire::Sandbox v = ToWire(sb, options_.base_url, background_->Deleting(sb.spec().name()));
    bool keep = true;
    for (const auto& [field, value] : terms) {
      const std::string& have = field == "name"           ? v.name()
                                : field == "uid"          ? v.uid()
                                : field == "display_name" ? v.display_name()
                                : field == "status"       ? v.core().status()
                                                          : v.core().agent();
      if (have != value && !(field == "name" && v.uid() == value)) keep = false;
    }
    if (keep) views.push_back(std::move(v));
  }
  std::stable_sort(views.begin(), views.end(), [&](const wire::Sandbox& a, const wire::Sandbox& b) {
    if (order == "created_at" && a.core().created_at().seconds() != b.core().created_at().seconds()) {
      return desc ? a.core().created_at().seconds() > b.core().created_at().seconds()
                  : a.core().created_at().seconds() < b.core().created_at().seconds();
    }
    return desc ? a.uid() > b.uid() : a.uid() < b.uid();
  });
  wire::ListSandboxesResponse out;
  for (size_t i = offset; i < views.size() && out.sandboxes_size() < page_size; ++i) {
    *out.add_sandboxes() = views[i];
  }
  size_t next = offset + out.sandboxes_size();
  if (next < views.size()) {
    out.set_next_page_token(absl::WebSafeBase64Escape(absl::StrCat("v1:", next, ":", binding)));
  }
  return JsonResponse(200, out);
}

HttpResponse ManagementApi::Create(const HttpRequest& req, const Claims& caller) {
  wire::CreateSandboxRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  // Everything is checked before anything is done.
  if (Present(body.mcp())) return Error(ApiError::Unimplemented("mcp (MCP gateways)"));
  if (!body.policy_ids().empty()) return Error(ApiError::Unimplemented("policyIds"));
  if (Present(body.startup_execution())) return Error(ApiError::Unimplemented("startupExecution"));
  if (Present(body.features().managed_volumes())) {
    return Error(ApiError::Unimplemented("features.managedVolumes"));
  }
  if (Present(body.features().stored_secrets())) {
    return Error(ApiError::Unimplemented("features.storedSecrets"));
  }
  if (!body.image().empty() && !body.image_ref().empty()) {
    return Error(ApiError::InvalidArgument("give image or imageRef, not both"));
  }
  if (!body.display_name().empty() && !body.display_name_prefix().empty()) {
    return Error(ApiError::InvalidArgument("give displayName or displayNamePrefix, not both"));
  }
  if (!body.pull_policy().empty() && body.pull_policy() != "unspecified" &&
      body.pull_policy() != "always") {
    return Error(ApiError::InvalidArgument("pullPolicy must be unspecified or always"));
  }
  if (body.has_platform() && (body.platform().os() != "linux" ||
                              body.platform().architecture() != "amd64")) {
    return Error(ApiError::InvalidArgument("platform must be linux/amd64 on this host"));
  }
  vmm::SandboxSpec spec;
  spec.set_agent(body.agent());
  std::string display = body.display_name();
  if (!body.display_name_prefix().empty()) {
    display = absl::StrCat(body.display_name_prefix(), "-",
                           RandomHex(2));
  }
  if (absl::Status s = ValidDisplayName(display, true); !s.ok()) return Error(s);
  spec.set_display_name(display);
  for (const auto& [k, v] : body.environment()) (*spec.mutable_env())[k] = v;
  for (const auto& [k, v] : body.labels()) (*spec.mutable_labels())[k] = v;
  if (body.has_resources()) {
    auto size = SizeFor(body.resources());
    if (!size.ok()) return Error(size.status());
    spec.set_size(*size);
  }
  std::string image = body.image_ref();
  if (!body.image().empty()) {
    if (!absl::StartsWith(body.image(), "images/") || body.image().size() <= 7) {
      return Error(ApiError::InvalidArgument("image must be images/<id>"));
    }
    image = body.image().substr(7);
  }
  spec.set_template_(image);
  for (const auto& k : body.kits()) {
    if (!k.artifact().inline_().empty()) {
      return Error(ApiError::Unimplemented("inline kit artifacts (give artifact.ref.ref)"));
    }
    if (k.artifact().ref().ref().empty()) {
      return Error(ApiError::InvalidArgument("each kit needs artifact.ref.ref"));
    }
    spec.add_kits(k.artifact().ref().ref());
  }
  std::vector<std::string> allow, deny;
  for (const auto& p : body.network_policies()) {
    if (p.mode() != "denyAll") {
      return Error(ApiError::InvalidArgument(
          "networkPolicies[].mode must be denyAll (Airlock denies what no rule allows)"));
    }
    allow.insert(allow.end(), p.allow_networks().begin(), p.allow_networks().end());
    deny.insert(deny.end(), p.deny_networks().begin(), p.deny_networks().end());
  }
  if (body.features().has_timeouts()) {
    const wire::TimeoutOptions& t = body.features().timeouts();
    std::string action = t.has_on_timeout() ? t.on_timeout() : "delete";
    if (action == "keep" || action == "restart") {
      return Error(ApiError::Unimplemented("features.timeouts.onTimeout " + action));
    }
    if (action != "delete" && action != "stop") {
      return Error(ApiError::InvalidArgument("features.timeouts.onTimeout must be delete or stop"));
    }
    int64_t secs = t.has_timeout() ? t.timeout().seconds() + (t.timeout().nanos() > 0 ? 1 : 0)
                                   : 3600;
    if (secs <= 0) {
      return Error(ApiError::InvalidArgument("features.timeouts.timeout must be positive"));
    }
    spec.set_timeout_seconds(static_cast<uint64_t>(secs));
    spec.set_on_timeout(action == "stop" ? vmm::TIMEOUT_STOP : vmm::TIMEOUT_DELETE);
  }
  bool pull_always = body.pull_policy() == "always";
  return Keyed(req, caller, "createSandbox", CanonicalPayload(req), NewUid(body.agent()),
               [&](const std::string& uid, bool resumed) -> HttpResponse {
    spec.set_name(uid);
    if (resumed) {
      // A retry of a create that got as far as vmmd answers with it.
      auto existing = vmm_->Get(uid);
      if (existing.ok()) return View(uid, 202);
      if (existing.status().code() != absl::StatusCode::kNotFound) return Error(existing.status());
    } else if (vmm_->Get(uid).ok()) {
      return Error(FromStatus(absl::AbortedError("a fresh sandbox id was taken; retry")));
    }
    if (absl::Status s = vmm_->EnsureImage(image.empty() ? "base" : image, pull_always); !s.ok()) {
      return Error(s);
    }
    // A sandbox starts with only the rules made for it.
    if (absl::Status s = policy_->ClearSandboxRules(uid); !s.ok()) return Error(s);
    if (absl::Status s = policy_->AddSandboxRules(uid, allow, deny); !s.ok()) {
      return Error(ApiError::InvalidArgument(absl::StrCat("networkPolicies: ", s.message())));
    }
    auto created = vmm_->Create(spec);
    if (!created.ok()) {
      absl::Status s = created.status();
      // vmmd may have made it and the answer was lost: then it is ours.
      if (s.code() != absl::StatusCode::kAlreadyExists && vmm_->Get(uid).ok()) {
        return View(uid, 202);
      }
      if (s.code() != absl::StatusCode::kAlreadyExists) (void)policy_->ClearSandboxRules(uid);
      if (s.code() == absl::StatusCode::kNotFound) {
        return Error(ApiError::InvalidArgument(std::string(s.message())));
      }
      return Error(s);
    }
    AIRLOCK_LOG_INFO("sandbox created through the API", {{"sandbox", uid}, {"token", caller.subject}});
    wire::Sandbox view = ToWire(*created, options_.base_url, false);
    bool settled = created->state() == vmm::RUNNING || created->state() == vmm::FAILED;
    HttpResponse r = JsonResponse(settled ? 201 : 202, view);
    r.headers["ETag"] = view.core().etag();
    return r;
  });
}

HttpResponse ManagementApi::Get(const HttpRequest& req, const std::string& uid) {
  HttpResponse r = View(uid, 200);
  if (r.status == 200) {
    std::string inm = req.Header("if-none-match");
    if (!inm.empty() && EtagMatches(inm, r.headers["ETag"])) {
      HttpResponse not_modified;
      not_modified.status = 304;
      not_modified.headers["ETag"] = r.headers["ETag"];
      return not_modified;
    }
  }
  return r;
}

HttpResponse ManagementApi::Update(const HttpRequest& req, const Claims& caller,
                                   const std::string& uid) {
  wire::UpdateSandboxRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (req.Header("idempotency-key").empty()) {
    return Error(ApiError::InvalidArgument("updateSandbox needs an Idempotency-Key header"));
  }
  std::string display;
  const auto& v = body.display_name();
  if (v.kind_case() == google::protobuf::Value::kStringValue) {
    display = v.string_value();
    if (absl::Status s = ValidDisplayName(display, false); !s.ok()) return Error(s);
  } else if (v.kind_case() != google::protobuf::Value::kNullValue) {
    return Error(ApiError::InvalidArgument("displayName must be present: a string, or null to clear"));
  }
  return Keyed(req, caller, "updateSandbox:" + uid, CanonicalPayload(req), uid,
               [&](const std::string&, bool) -> HttpResponse {
    if (auto e = Precondition(req, uid)) return Error(*e);
    auto sb = vmm_->SetDisplayName(uid, display);
    if (!sb.ok()) return Error(sb.status());
    return View(uid, 200);
  });
}

HttpResponse ManagementApi::Delete(const HttpRequest& req, const Claims& caller,
                                   const std::string& uid) {
  if (req.Header("if-match").empty()) return Error(ApiError::EtagRequired());
  // Deletion converges by itself: a retry (with or without its
  // Idempotency-Key) deletes what is left, so nothing is replayed.
  (void)caller;
  auto op = [&]() -> HttpResponse {
    if (auto e = Precondition(req, uid)) {
      if (e->status == 404) {
        HttpResponse gone;
        gone.status = 204;
        return gone;
      }
      return Error(*e);
    }
    if (background_->BeginDelete(uid)) {
      background_->Run([this, uid] {
        absl::Status s = vmm_->Remove(uid);
        if (s.ok() || s.code() == absl::StatusCode::kNotFound) {
          (void)policy_->ClearSandboxRules(uid);
          if (options_.on_deleted) options_.on_deleted(uid);
        } else {
          AIRLOCK_LOG_WARN("delete failed", {{"sandbox", uid}, {"error", std::string(s.message())}});
        }
        background_->EndDelete(uid);
      });
    }
    HttpResponse r = View(uid, 202);
    if (r.status == 404) {
      HttpResponse gone;
      gone.status = 204;
      return gone;
    }
    return r;
  };
  return op();
}

HttpResponse ManagementApi::Lifecycle(const HttpRequest& req, const Claims& caller,
                                      const std::string& uid, bool start) {
  wire::EmptyRequest body;
  if (auto e = ParseBody(req.body, &body, /*empty_ok=*/true)) return Error(*e);
  const std::string op = start ? "startSandbox:" : "stopSandbox:";
  return Keyed(req, caller, op + uid, CanonicalPayload(req), uid,
               [&](const std::string&, bool) -> HttpResponse {
    if (auto e = Precondition(req, uid)) return Error(*e);
    if (start) {
      auto sb = vmm_->Start(uid);
      if (!sb.ok()) return Error(sb.status());
      return View(uid, sb->state() == vmm::RUNNING ? 200 : 202);
    }
    auto before = vmm_->Get(uid);
    if (!before.ok()) return Error(before.status());
    if (before->state() == vmm::STOPPED || before->state() == vmm::FAILED) return View(uid, 200);
    if (before->state() != vmm::RUNNING) {
      return Error(ApiError::FailedPrecondition(absl::StrCat(
          "sandboxes/", uid, " is ", StatusName(before->state()), "; stop it once it is running")));
    }
    background_->Run([this, uid] {
      absl::Status s = vmm_->Stop(uid).status();
      if (!s.ok()) AIRLOCK_LOG_WARN("stop failed", {{"sandbox", uid}, {"error", std::string(s.message())}});
    });
    // Answer once vmmd has taken the stop on (STOPPING), or it is done.
    for (int i = 0; i < 50; ++i) {
      auto now = vmm_->Get(uid);
      if (now.ok() && now->state() != vmm::RUNNING) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    auto now = vmm_->Get(uid);
    bool done = now.ok() && now->state() == vmm::STOPPED;
    return View(uid, done ? 200 : 202);
  });
}

HttpResponse ManagementApi::Renew(const HttpRequest& req, const std::string& uid) {
  wire::RenewSandboxTimeoutRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (!body.has_timeout()) return Error(ApiError::InvalidArgument("timeout is required (e.g. \"600s\")"));
  int64_t secs = body.timeout().seconds() + (body.timeout().nanos() > 0 ? 1 : 0);
  if (secs <= 0) return Error(ApiError::InvalidArgument("timeout must be positive"));
  auto sb = vmm_->RenewTimeout(uid, static_cast<uint64_t>(secs));
  if (!sb.ok()) {
    if (sb.status().code() == absl::StatusCode::kNotFound) {
      return Error(ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist")));
    }
    return Error(sb.status());
  }
  return View(uid, 200);
}

HttpResponse ManagementApi::EndpointCredential(const HttpRequest& req, const Claims& caller,
                                               const std::string& uid) {
  wire::CreateEndpointCredentialRequest body;
  auto no_store = [](HttpResponse r) {
    r.headers["Cache-Control"] = "no-store";
    return r;
  };
  if (auto e = ParseBody(req.body, &body)) return no_store(Error(*e));
  if (body.permissions().empty()) {
    return no_store(Error(ApiError::InvalidArgument(
        "permissions needs at least one of sandboxesExec, sandboxesFilesRead, "
        "sandboxesFilesWrite")));
  }
  std::vector<std::string> perms;
  for (const auto& p : body.permissions()) {
    const auto& allowed = EndpointPermissions();
    if (std::find(allowed.begin(), allowed.end(), p) == allowed.end()) {
      return no_store(Error(ApiError::InvalidArgument(absl::StrCat(
          "permission \"", p, "\" is not an endpoint permission: use sandboxesExec, "
          "sandboxesFilesRead or sandboxesFilesWrite"))));
    }
    if (std::find(perms.begin(), perms.end(), p) != perms.end()) {
      return no_store(Error(ApiError::InvalidArgument(absl::StrCat("permission \"", p, "\" is repeated"))));
    }
    perms.push_back(p);
  }
  int64_t ttl = kEndpointTtl;
  if (body.has_ttl()) ttl = std::clamp<int64_t>(body.ttl().seconds(), 1, kEndpointTtl);
  auto sb = vmm_->Get(uid);
  if (!sb.ok() && sb.status().code() != absl::StatusCode::kNotFound) {
    return no_store(Error(sb.status()));
  }
  if (!sb.ok() || !sb->installs_agent_image().empty()) {
    return no_store(Error(ApiError::NotFound(absl::StrCat("sandboxes/", uid, " does not exist"))));
  }
  int64_t expires = time(nullptr) + ttl;
  std::string audience = EndpointUri(options_.base_url, uid);
  wire::EndpointCredential out;
  out.set_token(auth_->IssueEndpoint(caller, uid, perms, audience, expires));
  out.mutable_expire_time()->set_seconds(expires);
  for (const auto& p : perms) out.add_permissions(p);
  out.set_sandbox(absl::StrCat("sandboxes/", uid));
  out.set_audience(audience);
  return no_store(JsonResponse(200, out));
}

namespace {
wire::Port PortView(const std::string& uid, const vmm::PortMapping& m) {
  wire::Port p;
  p.set_number(static_cast<int32_t>(m.sandbox_port()));
  p.set_protocol("tcp");
  std::string ip = m.host_ip().empty() ? "127.0.0.1" : m.host_ip();
  p.set_url(absl::StrCat("tcp://", ip, ":", m.host_port()));
  p.set_name(absl::StrCat("sandboxes/", uid, "/ports/", m.sandbox_port()));
  p.set_etag(absl::StrCat("\"", Sha256Hex(absl::StrCat(p.name(), p.url())).substr(0, 16), "\""));
  return p;
}
}  // namespace

HttpResponse ManagementApi::ListPorts(const std::string& uid) {
  auto ports = vmm_->ListPorts(uid);
  if (!ports.ok()) return Error(ports.status());
  std::sort(ports->begin(), ports->end(),
            [](const auto& a, const auto& b) { return a.sandbox_port() < b.sandbox_port(); });
  wire::ListPortsResponse out;
  for (const auto& m : *ports) *out.add_published() = PortView(uid, m);
  return JsonResponse(200, out);
}

HttpResponse ManagementApi::CreatePort(const HttpRequest& req, const std::string& uid) {
  wire::CreatePortRequest body;
  if (auto e = ParseBody(req.body, &body)) return Error(*e);
  if (!body.has_port() || body.port().number() < 1 || body.port().number() > 65535) {
    return Error(ApiError::InvalidArgument("port.number must be 1 to 65535"));
  }
  if (!body.port().protocol().empty() && body.port().protocol() != "tcp" &&
      body.port().protocol() != "unspecified") {
    return Error(ApiError::InvalidArgument("port.protocol must be tcp"));
  }
  auto existing = vmm_->ListPorts(uid);
  if (!existing.ok()) return Error(existing.status());
  for (const auto& m : *existing) {
    if (m.sandbox_port() == static_cast<uint32_t>(body.port().number())) {
      ApiError e = FromStatus(absl::AlreadyExistsError(
          absl::StrCat("sandboxes/", uid, " already publishes port ", body.port().number())));
      return Error(e);
    }
  }
  auto m = vmm_->PublishPort(uid, static_cast<uint32_t>(body.port().number()));
  if (!m.ok()) return Error(m.status());
  wire::Port p = PortView(uid, *m);
  HttpResponse r = JsonResponse(201, p);
  r.headers["ETag"] = p.etag();
  return r;
}

HttpResponse ManagementApi::GetPort(const std::string& uid, const std::string& port) {
  auto ports = vmm_->ListPorts(uid);
  if (!ports.ok()) return Error(ports.status());
  for (const auto& m : *ports) {
    if (absl::StrCat(m.sandbox_port()) == port) {
      wire::Port p = PortView(uid, m);
      HttpResponse r = JsonResponse(200, p);
      r.headers["ETag"] = p.etag();
      return r;
    }
  }
  return Error(ApiError::NotFound(absl::StrCat("sandboxes/", uid, " publishes no port ", port)));
}

HttpResponse ManagementApi::DeletePort(const HttpRequest& req, const std::string& uid,
                                      const std::string& port) {
  std::string want = req.Header("if-match");
  if (want.empty()) return Error(ApiError::EtagRequired());
  auto ports = vmm_->ListPorts(uid);
  if (!ports.ok()) return Error(ports.status());
  for (const auto& m : *ports) {
    if (absl::StrCat(m.sandbox_port()) == port) {
      std::string etag = PortView(uid, m).etag();
      if (want != etag && want != "*") return Error(ApiError::EtagMismatch(etag));
      if (absl::Status s = vmm_->UnpublishPort(uid, m); !s.ok()) return Error(s);
    }
  }
  HttpResponse r;
  r.status = 204;
  return r;
}

}  // namespace airlock::apid
