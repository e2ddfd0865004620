#include "vmmd/store/registry_client.h"

#include <curl/curl.h>
#include <sys/stat.h>

#include <map>
#include <memory>
#include <mutex>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"

namespace airlock::vmmd {
namespace {

constexpr char kAccept[] =
    "Accept: application/vnd.oci.image.index.v1+json, "
    "application/vnd.oci.image.manifest.v1+json, "
    "application/vnd.docker.distribution.manifest.list.v2+json, "
    "application/vnd.docker.distribution.manifest.v2+json";
constexpr size_t kMaxDocument = 4 << 20;

void InitCurlOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Response {
  long status = 0;
  // Where the answer came from, after redirects.
  std::string effective_url;
  std::map<std::string, std::string> headers;  // lowercase names
  std::string body;
};

// Sink receives a 200's body as it streams; an error stops the transfer.
using Sink = std::function<absl::Status(absl::string_view)>;

struct Transfer {
  CURL* curl = nullptr;
  Response* resp = nullptr;
  const Sink* sink = nullptr;
  absl::Status sink_error;
};

size_t OnHeader(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  absl::string_view line(data, size * n);
  // A redirect starts a new response: forget the previous headers.
  if (absl::StartsWith(line, "HTTP/")) t->resp->headers.clear();
  size_t colon = line.find(':');
  if (colon != absl::string_view::npos) {
    t->resp->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * n;
}

// OnBody streams a 200's body to the sink and keeps any other (small)
// body, such as an error document.
size_t OnBody(char* data, size_t size, size_t n, void* user) {
  auto* t = static_cast<Transfer*>(user);
  absl::string_view chunk(data, size * n);
  long code = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &code);
  if (t->sink != nullptr && code == 200) {
    t->sink_error = (*t->sink)(chunk);
    return t->sink_error.ok() ? chunk.size() : 0;
  }
  if (t->resp->body.size() + chunk.size() > kMaxDocument) return 0;
  t->resp->body.append(chunk.data(), chunk.size());
  return chunk.size();
}

class Session {
 public:
  Session(const Reference& ref, const RegistryOptions& options)
      : ref_(ref), options_(options) {
    host_ = ref.registry == "docker.io" ? options.docker_io_endpoint : ref.registry;
    scheme_ = options.insecure.count(host_) ? "http" : "https";
    if (options.credentials) creds_ = options.credentials(ref.registry);
  }

  std::string Url(const std::string& kind, const std::string& what) const {
    return absl::StrCat(scheme_, "://", host_, "/v2/", ref_.repository, "/", kind, "/", what);
  }

  // Get fetches `url`; a 401 is answered once with the credentials the
  // challenge asks for. With `sink`, a 200's body streams there.
  absl::StatusOr<Response> Get(const std::string& url, bool manifest, const Sink* sink) {
    auto r = Do(url, manifest, sink);
    if (!r.ok() || r->status != 401) return r;
    // Only the registry itself may ask for its credentials, not a blob
    // store a redirect led to.
    std::string origin = absl::StrCat(scheme_, "://", host_, "/");
    if (!absl::StartsWith(r->effective_url, origin)) {
      return absl::UnauthenticatedError(absl::StrCat(
          "registry ", ref_.registry, " redirected to ", r->effective_url,
          ", which asked for credentials; they are only ever sent to the registry"));
    }
    if (absl::Status s = Authenticate(r->headers["www-authenticate"]); !s.ok()) return s;
    r = Do(url, manifest, sink);
    if (r.ok() && r->status == 401) {
      return absl::UnauthenticatedError(absl::StrCat(
          "registry ", ref_.registry, " refused ",
          creds_.empty() ? "anonymous access" : "the stored credentials", " to ", ref_.repository,
          creds_.empty() ? absl::StrCat("; store credentials with `airlock secret set --registry ",
                                        ref_.registry, "`")
                         : "; check them with the registry and store them again"));
    }
    return r;
  }

  const std::string& host() const { return host_; }

 private:
  void Configure(CURL* c, curl_slist* headers) const {
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(c, CURLOPT_MAXREDIRS, 5L);
    // The Authorization header goes to the registry only, never to the
    // blob store a redirect points at.
    curl_easy_setopt(c, CURLOPT_UNRESTRICTED_AUTH, 0L);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, scheme_ == "https" ? "https" : "http,https");
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "airlock-vmmd");
    if (!options_.certs_dir.empty()) {
      std::string ca = absl::StrCat(options_.certs_dir, "/", host_, "/ca.crt");
      struct stat st;
      if (stat(ca.c_str(), &st) == 0) curl_easy_setopt(c, CURLOPT_CAINFO, ca.c_str());
    }
  }

  // Perform runs one GET of `url` with `headers`; a 200's body streams to
  // `sink` when given. `what` names the far end in errors.
  absl::StatusOr<Response> Perform(const std::string& url, curl_slist* headers, const Sink* sink,
                                   const std::string& what) const {
    InitCurlOnce();
    std::unique_ptr<CURL, void (*)(CURL*)> c(curl_easy_init(), curl_easy_cleanup);
    Response resp;
    Transfer t;
    t.curl = c.get();
    t.resp = &resp;
    t.sink = sink;
    Configure(c.get(), headers);
    curl_easy_setopt(c.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(c.get(), CURLOPT_HEADERFUNCTION, OnHeader);
    curl_easy_setopt(c.get(), CURLOPT_HEADERDATA, &t);
    curl_easy_setopt(c.get(), CURLOPT_WRITEFUNCTION, OnBody);
    curl_easy_setopt(c.get(), CURLOPT_WRITEDATA, &t);
    CURLcode rc = curl_easy_perform(c.get());
    curl_easy_getinfo(c.get(), CURLINFO_RESPONSE_CODE, &resp.status);
    char* effective = nullptr;
    curl_easy_getinfo(c.get(), CURLINFO_EFFECTIVE_URL, &effective);
    if (effective != nullptr) resp.effective_url = effective;
    if (!t.sink_error.ok()) return t.sink_error;
    if (rc != CURLE_OK) {
      return absl::UnavailableError(absl::StrCat("cannot reach ", what, ": ",
                                                 curl_easy_strerror(rc)));
    }
    return resp;
  }

  absl::StatusOr<Response> Do(const std::string& url, bool manifest, const Sink* sink) {
    curl_slist* headers = nullptr;
    if (manifest) headers = curl_slist_append(headers, kAccept);
    if (!auth_.empty()) headers = curl_slist_append(headers, auth_.c_str());
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> owned(headers, curl_slist_free_all);
    return Perform(url, headers, sink, absl::StrCat("registry ", ref_.registry, " (", host_, ")"));
  }

  absl::Status Authenticate(const std::string& header) {
    AuthChallenge ch = ParseAuthenticate(header);
    if (ch.scheme == "basic") {
      if (creds_.empty()) {
        return absl::UnauthenticatedError(absl::StrCat(
            "registry ", ref_.registry, " needs credentials for ", ref_.repository,
            "; store them with `airlock secret set --registry ", ref_.registry, "`"));
      }
      auth_ = absl::StrCat("Authorization: Basic ",
                           absl::Base64Escape(creds_.username + ":" + creds_.password));
      return absl::OkStatus();
    }
    if (ch.scheme == "bearer" && scheme_ == "https" && !absl::StartsWith(ch.realm, "https://")) {
      return absl::UnauthenticatedError(absl::StrCat(
          "registry ", ref_.registry, " names a token service that is not HTTPS (", ch.realm,
          "); credentials are never sent in the clear"));
    }
    if (ch.scheme != "bearer" || ch.realm.empty()) {
      return absl::UnauthenticatedError(absl::StrCat(
          "registry ", ref_.registry, " asks for authentication this client does not speak (",
          header.empty() ? "no WWW-Authenticate header" : header, ")"));
    }
    std::string scope =
        ch.scope.empty() ? absl::StrCat("repository:", ref_.repository, ":pull") : ch.scope;
    InitCurlOnce();
    std::unique_ptr<CURL, void (*)(CURL*)> escaper(curl_easy_init(), curl_easy_cleanup);
    auto esc = [&](const std::string& v) {
      char* e = curl_easy_escape(escaper.get(), v.c_str(), static_cast<int>(v.size()));
      std::string out = e;
      curl_free(e);
      return out;
    };
    std::string url = absl::StrCat(ch.realm, absl::StrContains(ch.realm, '?') ? "&" : "?",
                                   "scope=", esc(scope));
    if (!ch.service.empty()) absl::StrAppend(&url, "&service=", esc(ch.service));
    curl_slist* headers = nullptr;
    std::string basic;
    if (!creds_.empty()) {
      basic = absl::StrCat("Authorization: Basic ",
                           absl::Base64Escape(creds_.username + ":" + creds_.password));
      headers = curl_slist_append(headers, basic.c_str());
    }
    std::unique_ptr<curl_slist, void (*)(curl_slist*)> owned(headers, curl_slist_free_all);
    auto performed = Perform(url, headers, nullptr,
                             absl::StrCat("the token service of ", ref_.registry, " (", ch.realm,
                                          ")"));
    if (!performed.ok()) return performed.status();
    const Response& resp = *performed;
    if (resp.status == 401 || resp.status == 403) {
      return absl::UnauthenticatedError(absl::StrCat(
          "the token service of registry ", ref_.registry, " refused ",
          creds_.empty() ? "anonymous access" : "the stored credentials", " for ",
          ref_.repository, " (HTTP ", resp.status, ")",
          creds_.empty() ? absl::StrCat("; store credentials with `airlock secret set --registry ",
                                        ref_.registry, "`")
                         : ""));
    }
    auto j = nlohmann::json::parse(resp.body, nullptr, false);
    std::string token;
    if (j.is_object()) {
      if (j.contains("token") && j["token"].is_string()) token = j["token"];
      else if (j.contains("access_token") && j["access_token"].is_string()) token = j["access_token"];
    }
    if (resp.status != 200 || token.empty()) {
      return absl::UnavailableError(absl::StrCat("the token service of registry ", ref_.registry,
                                                 " answered HTTP ", resp.status,
                                                 " without a token"));
    }
    auth_ = "Authorization: Bearer " + token;
    return absl::OkStatus();
  }

  Reference ref_;
  const RegistryOptions& options_;
  std::string host_, scheme_, auth_;
  RegistryCredentials creds_;
};

// RegistryError turns a non-200 answer into a status that says what to do.
absl::Status RegistryError(const Reference& ref, const Response& r, const std::string& what) {
  std::string detail;
  auto j = nlohmann::json::parse(r.body, nullptr, false);
  if (j.is_object() && j.contains("errors") && j["errors"].is_array() && !j["errors"].empty()) {
    const auto& e = j["errors"][0];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) {
      detail = absl::StrCat(": ", e["message"].get<std::string>());
    }
  }
  std::string where = absl::StrCat(what, " of ", ref.Name(), " on registry ", ref.registry);
  switch (r.status) {
    case 404:
      return absl::NotFoundError(absl::StrCat(where, " not found (HTTP 404", detail, ")"));
    case 403:
      return absl::PermissionDeniedError(absl::StrCat(where, ": access denied (HTTP 403",
                                                      detail, ")"));
    case 429:
      return absl::UnavailableError(absl::StrCat(where, ": the registry is rate limiting (HTTP "
                                                 "429); try again later"));
    default:
      return absl::UnavailableError(
          absl::StrCat(where, ": the registry answered HTTP ", r.status, detail));
  }
}

}  // namespace

AuthChallenge ParseAuthenticate(const std::string& header) {
  AuthChallenge ch;
  absl::string_view rest = absl::StripAsciiWhitespace(header);
  size_t sp = rest.find(' ');
  ch.scheme = absl::AsciiStrToLower(rest.substr(0, sp));
  if (sp == absl::string_view::npos) return ch;
  rest.remove_prefix(sp + 1);
  // key="value" pairs separated by commas; values may contain commas.
  while (!rest.empty()) {
    rest = absl::StripLeadingAsciiWhitespace(rest);
    size_t eq = rest.find('=');
    if (eq == absl::string_view::npos) break;
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(rest.substr(0, eq)));
    rest.remove_prefix(eq + 1);
    std::string value;
    if (!rest.empty() && rest[0] == '"') {
      size_t end = rest.find('"', 1);
      if (end == absl::string_view::npos) end = rest.size();
      value = std::string(rest.substr(1, end - 1));
      rest.remove_prefix(std::min(end + 1, rest.size()));
    } else {
      size_t comma = rest.find(',');
      value = std::string(absl::StripAsciiWhitespace(rest.substr(0, comma)));
      rest.remove_prefix(comma == absl::string_view::npos ? rest.size() : comma);
    }
    rest = absl::StripLeadingAsciiWhitespace(rest);
    if (!rest.empty() && rest[0] == ',') rest.remove_prefix(1);
    if (key == "realm") ch.realm = value;
    if (key == "service") ch.service = value;
    if (key == "scope") ch.scope = value;
  }
  return ch;
}

absl::StatusOr<std::string> Pull(const Reference& ref, const RegistryOptions& options,
                                 ImageStore* store, const Progress& progress) {
  Session session(ref, options);
  auto fetch_document = [&](const std::string& r,
                            const std::string& want) -> absl::StatusOr<std::string> {
    auto resp = session.Get(session.Url("manifests", r), true, nullptr);
    if (!resp.ok()) return resp.status();
    if (resp->status != 200) return RegistryError(ref, *resp, "the manifest");
    if (!want.empty() && oci::Sha256Digest(resp->body) != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the manifest registry ", ref.registry, " sent for ", r, " does not match its digest (",
          oci::Sha256Digest(resp->body), "); nothing was stored"));
    }
    return resp->body;
  };
  auto top = fetch_document(ref.Ref(), ref.digest);
  if (!top.ok()) return top.status();
  auto type = oci::MediaTypeOf(*top);
  if (!type.ok()) return type.status();
  std::string manifest_text = *top;
  if (oci::IsIndex(*type)) {
    auto entries = oci::ParseIndex(*top);
    if (!entries.ok()) return entries.status();
    auto pick = oci::PickPlatform(*entries);
    if (!pick.ok()) {
      return absl::NotFoundError(absl::StrCat(ref.Name(), ": ", pick.status().message()));
    }
    auto m = fetch_document(pick->digest, pick->digest);
    if (!m.ok()) return m.status();
    manifest_text = *m;
  }
  auto manifest = oci::ParseManifest(manifest_text);
  if (!manifest.ok()) return manifest.status();

  auto fetch_blob = [&](const oci::Descriptor& d, uint64_t base, uint64_t total) -> absl::Status {
    if (store->HasBlob(d.digest)) return absl::OkStatus();
    auto w = store->NewBlob(d.digest);
    if (!w.ok()) return w.status();
    BlobWriter* writer = w->get();
    Sink sink = [&](absl::string_view chunk) {
      absl::Status s = writer->Write(chunk);
      if (progress) progress("pulling", base + writer->bytes(), total);
      return s;
    };
    auto resp = session.Get(session.Url("blobs", d.digest), false, &sink);
    if (!resp.ok()) return resp.status();
    if (resp->status != 200) return RegistryError(ref, *resp, absl::StrCat("blob ", d.digest));
    auto committed = writer->Commit();
    if (!committed.ok()) {
      return absl::Status(committed.status().code(),
                          absl::StrCat("registry ", ref.registry, " sent ", d.digest, ": ",
                                       committed.status().message()));
    }
    return absl::OkStatus();
  };
  uint64_t total = 0;
  for (const auto& l : manifest->layers) total += l.size;
  // The config is read (and checked) first but stored last, with the
  // manifest: the layers are the bulk of the work.
  auto config = session.Get(session.Url("blobs", manifest->config.digest), false, nullptr);
  if (!config.ok()) return config.status();
  if (config->status != 200) return RegistryError(ref, *config, "the image config");
  if (oci::Sha256Digest(config->body) != manifest->config.digest) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blob digest mismatch: expected ", manifest->config.digest, ", got ",
        oci::Sha256Digest(config->body), " (registry ", ref.registry, " sent the image config)"));
  }
  if (auto c = oci::ParseConfig(config->body); !c.ok()) return c.status();
  uint64_t done = 0;
  for (const auto& l : manifest->layers) {
    if (absl::Status s = fetch_blob(l, done, total); !s.ok()) return s;
    done += l.size;
    if (progress) progress("pulling", done, total);
  }
  if (auto c = store->PutBlob(config->body, manifest->config.digest); !c.ok()) return c.status();
  return store->PutBlob(manifest_text);
}

}  // namespace airlock::vmmd
