#include "common/kit/capabilities.h"

#include <re2/re2.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kit/internal/fields.h"
#include "common/kit/references.h"

namespace airlock::kit {
namespace {

using internal::Fields;
using internal::IsLiteral;
using internal::ScalarText;

bool IsLowerAlnum(char c) { return absl::ascii_isdigit(c) || (c >= 'a' && c <= 'z'); }

// IsEnvName: ^[A-Za-z_][A-Za-z0-9_]*$
bool IsEnvName(absl::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

// IsServiceHandle: ^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$
bool IsServiceHandle(absl::string_view s) {
  if (s.empty() || s.size() > 64 || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) {
    return false;
  }
  return std::all_of(s.begin(), s.end(), [](char c) { return IsLowerAlnum(c) || c == '-'; });
}

bool IsOctalMode(absl::string_view s) {
  return (s.size() == 3 || s.size() == 4) &&
         std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '7'; });
}

bool IsSize(absl::string_view s) {
  static const RE2* kSize = new RE2(R"(^[0-9]+(\.[0-9]+)?\s*([kKmMgGtT]i?[bB]?)?$)");
  return RE2::FullMatch(re2::StringPiece(s.data(), s.size()), *kSize);
}

// IsUnset reports an optional string value that is not judged yet: still
// a reference (the effective form judges it), or empty, which the spec
// reads as omitted wherever the field is optional (`mode: ""` is no mode).
bool IsUnset(absl::string_view s) { return s.empty() || !IsLiteral(s); }

std::string StripPort(absl::string_view host) {
  return std::string(host.substr(0, host.find(':')));
}

// Config keys of the well-known types this library does not type: their
// configs are still decoded strictly, as the spec requires.
const std::map<absl::string_view, std::set<absl::string_view>>& KnownConfigKeys() {
  static const auto* kKeys = new std::map<absl::string_view, std::set<absl::string_view>>{
      {kHostMount, {"path", "mode"}},
      {kAgentContext, {"filename", "directory", "contentFile", "content"}},
      {kAgentSessions, {"prompt", "resume", "continue", "list"}},
      {kAgentInteractiveSessions,
       {"prompt", "resume", "continue", "newSession", "sessionPicker", "list"}},
      {kAgentSkills, {"path", "mode"}},
      {kAgentSkill, {"path", "name"}},
      {kAcp, {"agent", "command", "env", "protocolVersion"}},
      {kSshAgent, {"phase", "unrestricted", "sign", "authenticate"}},
      {kUsbDevice, {"vendorId", "productId", "class"}},
  };
  return *kKeys;
}

// ---- Reference scanning over a config ----

bool HasReferences(const Value& v) {
  switch (v.kind) {
    case Value::Kind::kString:
      return !IsLiteral(v.text);
    case Value::Kind::kList:
      return std::any_of(v.items.begin(), v.items.end(), HasReferences);
    case Value::Kind::kMap:
      return std::any_of(v.fields.begin(), v.fields.end(), [](const auto& f) {
        return HasArgRef(f.first) || HasReferences(f.second);
      });
    default:
      return false;
  }
}

void CheckEnvInKeys(const Value& v, const FieldPath& path, Problems* problems) {
  if (v.is_list()) {
    for (size_t i = 0; i < v.items.size(); ++i) CheckEnvInKeys(v.items[i], path.Index(i), problems);
  } else if (v.is_map()) {
    for (const auto& [key, child] : v.fields) {
      if (HasEnvOpener(key)) {
        problems->Error(path.Key(key), "environment references are not allowed in mapping keys");
      }
      CheckEnvInKeys(child, path.Key(key), problems);
    }
  }
}

// ---- network-policy@1 / @2 ----

constexpr absl::string_view kMethods[] = {"GET",    "HEAD",    "POST",  "PUT",    "PATCH",
                                          "DELETE", "OPTIONS", "TRACE", "CONNECT"};

void DecodeHost(const Value& v, const FieldPath& path, Problems* problems,
                std::vector<std::string>* hosts) {
  std::string host;
  if (!ScalarText(v, path, problems, &host)) return;
  if (host.empty()) {
    problems->Error(path, "host must not be empty");
    return;
  }
  hosts->push_back(std::move(host));
}

// Methods and paths are lists that must not be stated empty (or null):
// only omission carries the wildcard.
std::vector<std::string> DecodeBoundList(Fields& f, absl::string_view key) {
  std::vector<std::string> out;
  const Value* v = f.Take(key);
  if (v == nullptr) return out;
  if (v->is_null() || (v->is_list() && v->items.empty())) {
    f.problems()->Error(f.At(key),
                        absl::StrCat("states an empty ", key, " list; omit ", key, " for every ",
                                     key == "methods" ? "method" : "path"));
    return out;
  }
  if (!v->is_list()) {
    f.problems()->Error(f.At(key), absl::StrCat("must be a list, got ", KindName(v->kind)));
    return out;
  }
  for (size_t i = 0; i < v->items.size(); ++i) {
    std::string s;
    if (ScalarText(v->items[i], f.At(key).Index(i), f.problems(), &s)) out.push_back(s);
  }
  return out;
}

std::optional<NetworkEntry> DecodeEntryObject(const Value& v, const FieldPath& path, bool allow,
                                              Problems* problems, bool deferred_ok) {
  Fields f(v, path, problems, deferred_ok);
  if (!f.is_map()) return std::nullopt;
  NetworkEntry e;
  size_t before = problems->error_count();
  if (!f.Has("hosts")) problems->Error(path, "hosts is required");
  if (const Value* hosts = f.List("hosts")) {
    if (hosts->items.empty()) problems->Error(f.At("hosts"), "must name at least one host");
    for (size_t i = 0; i < hosts->items.size(); ++i) {
      DecodeHost(hosts->items[i], f.At("hosts").Index(i), problems, &e.hosts);
    }
  }
  bool methods_stated = f.Has("methods");
  e.methods = DecodeBoundList(f, "methods");
  std::set<std::string> seen;
  for (size_t i = 0; i < e.methods.size(); ++i) {
    const std::string& m = e.methods[i];
    FieldPath at = f.At("methods").Index(i);
    if (!IsLiteral(m)) continue;
    if (m != "ANY" &&
        std::find(std::begin(kMethods), std::end(kMethods), m) == std::end(kMethods)) {
      problems->Error(at,
                      absl::StrCat("method ", Quote(m), " is not an uppercase HTTP method or ANY"));
    } else if (!seen.insert(m).second) {
      problems->Error(at, absl::StrCat("repeats method ", Quote(m)));
    }
  }
  if (seen.count("ANY") > 0 && e.methods.size() > 1) {
    problems->Error(f.At("methods"),
                    "names ANY beside a specific method; ANY already covers every method");
  }
  bool paths_stated = f.Has("paths");
  e.paths = DecodeBoundList(f, "paths");
  for (size_t i = 0; i < e.paths.size(); ++i) {
    if (IsLiteral(e.paths[i]) && (e.paths[i].empty() || e.paths[i][0] != '/')) {
      problems->Error(f.At("paths").Index(i),
                      absl::StrCat("path ", Quote(e.paths[i]), " must start with \"/\""));
    }
  }
  if (paths_stated && !methods_stated) {
    problems->Error(path,
                    "states paths without methods; name the methods the paths bound, or "
                    "methods: [ANY] for every method");
  }
  // A pattern cannot be bounded and unbounded at once: a bounded allow
  // names its hosts exactly. Deny entries may use patterns either way.
  if (allow && (methods_stated || paths_stated)) {
    for (size_t i = 0; i < e.hosts.size(); ++i) {
      if (e.hosts[i].find('*') != std::string::npos) {
        problems->Error(f.At("hosts").Index(i),
                        absl::StrCat("allow entry bounds the pattern ", Quote(e.hosts[i]),
                                     "; an entry stating methods or paths names its hosts "
                                     "exactly"));
      }
    }
  }
  f.Done();
  if (problems->error_count() != before) return std::nullopt;
  return e;
}

NetworkRules DecodeNetworkRules(const Value& v, const FieldPath& path, int version,
                                Problems* problems, bool deferred_ok) {
  NetworkRules rules;
  Fields f(v, path, problems, deferred_ok);
  for (absl::string_view key : {"allow", "deny"}) {
    std::vector<NetworkEntry>& out = key == "allow" ? rules.allow : rules.deny;
    const Value* list = f.List(key);
    if (list == nullptr) continue;
    for (size_t i = 0; i < list->items.size(); ++i) {
      const Value& item = list->items[i];
      FieldPath at = f.At(key).Index(i);
      if (version == 2 && item.is_map()) {
        if (auto e = DecodeEntryObject(item, at, key == "allow", problems, deferred_ok)) {
          out.push_back(*std::move(e));
        }
        continue;
      }
      NetworkEntry e;
      DecodeHost(item, at, problems, &e.hosts);
      if (!e.hosts.empty()) out.push_back(std::move(e));
    }
  }
  f.Done();
  return rules;
}

NetworkPolicyConfig DecodeNetworkPolicy(const Value& config, const FieldPath& path, int version,
                                        Problems* problems, bool deferred_ok) {
  NetworkPolicyConfig out;
  out.version = version;
  Fields f(config, path, problems, deferred_ok);
  if (const Value* v = f.Map("install")) {
    out.install = DecodeNetworkRules(*v, f.At("install"), version, problems, deferred_ok);
  }
  if (const Value* v = f.Map("runtime")) {
    out.runtime = DecodeNetworkRules(*v, f.At("runtime"), version, problems, deferred_ok);
  }
  f.Done();
  return out;
}

// ---- credential@1 ----

std::optional<Phase> ParsePhase(absl::string_view s) {
  if (s == "install") return Phase::kInstall;
  if (s == "runtime") return Phase::kRuntime;
  return std::nullopt;
}

constexpr absl::string_view kPhaseRule =
    "phase must be install or runtime, or a non-empty list of distinct phases";

void DecodeCredentialPhases(const Value* v, const FieldPath& path, Problems* problems,
                            std::vector<Phase>* out) {
  if (v == nullptr || v->is_null() || (v->is_list() && v->items.empty()) || v->is_map()) {
    problems->Error(path, kPhaseRule);
    return;
  }
  std::vector<std::pair<Value, FieldPath>> items;
  if (v->is_list()) {
    for (size_t i = 0; i < v->items.size(); ++i) items.emplace_back(v->items[i], path.Index(i));
  } else {
    items.emplace_back(*v, path);
  }
  std::set<std::string> seen;
  for (const auto& [item, at] : items) {
    std::string s;
    if (!ScalarText(item, at, problems, &s)) continue;
    if (!IsLiteral(s)) continue;
    std::optional<Phase> phase = ParsePhase(s);
    if (!phase) {
      problems->Error(at, kPhaseRule);
    } else if (!seen.insert(s).second) {
      problems->Error(at, absl::StrCat("phase ", Quote(s), " listed twice"));
    } else {
      out->push_back(*phase);
    }
  }
}

// Placeholders the credential file structure may use, and what each
// renders as in the target encoding.
void CheckStructure(const Value& v, const FieldPath& path, bool toml, Problems* problems) {
  static const std::set<absl::string_view> kPlaceholders = {
      ".AccessToken", ".RefreshToken", ".ExpiresAt", ".Scopes", ".PrimaryApiKey"};
  switch (v.kind) {
    case Value::Kind::kNull:
      if (toml) problems->Error(path, "is null, which TOML cannot spell");
      return;
    case Value::Kind::kList:
      for (size_t i = 0; i < v.items.size(); ++i) {
        CheckStructure(v.items[i], path.Index(i), toml, problems);
      }
      return;
    case Value::Kind::kMap:
      for (const auto& [key, child] : v.fields)
        CheckStructure(child, path.Key(key), toml, problems);
      return;
    case Value::Kind::kString: {
      const std::string& s = v.text;
      for (size_t open = s.find("{{"); open != std::string::npos; open = s.find("{{", open + 2)) {
        if (open > 0 && s[open - 1] == '$') continue;  // a Kit placeholder, not a template
        size_t close = s.find("}}", open);
        if (close == std::string::npos) break;
        absl::string_view inner =
            absl::StripAsciiWhitespace(absl::string_view(s).substr(open + 2, close - open - 2));
        if (!inner.empty() && inner[0] == '.' && kPlaceholders.count(inner) == 0) {
          problems->Error(path, absl::StrCat("unknown placeholder {{", inner, "}}"));
        }
      }
      return;
    }
    default:
      return;
  }
}

ApiKey DecodeApiKey(const Value& v, const FieldPath& path, Problems* problems, bool deferred_ok) {
  Fields f(v, path, problems, deferred_ok);
  ApiKey key;
  if (f.String("name", &key.name) && IsLiteral(key.name) && !key.name.empty() &&
      !IsEnvName(key.name)) {
    problems->Error(f.At("name"),
                    absl::StrCat("env ", Quote(key.name), " is not a valid env var name"));
  }
  f.Bool("proxyManaged", &key.proxy_managed);
  if (const Value* inject = f.List("inject")) {
    for (size_t i = 0; i < inject->items.size(); ++i) {
      FieldPath at = f.At("inject").Index(i);
      Fields rf(inject->items[i], at, problems, deferred_ok);
      InjectRule rule;
      if (!rf.String("domain", &rule.domain) || rule.domain.empty()) {
        if (rf.is_map()) problems->Error(at.Key("domain"), "domain is required");
      }
      rf.String("header", &rule.header);
      rf.String("format", &rule.format);
      rf.String("scheme", &rule.scheme);
      rf.String("username", &rule.username);
      rf.Done();
      key.inject.push_back(std::move(rule));
    }
  }
  if (f.is_map() && key.name.empty() && key.inject.empty()) {
    problems->Error(path, "apiKey needs a name, inject rules, or both");
  }
  f.Done();
  return key;
}

OAuth DecodeOAuth(const Value& v, const FieldPath& path, Problems* problems, bool deferred_ok) {
  Fields f(v, path, problems, deferred_ok);
  OAuth o;
  if (const Value* te = f.Map("tokenEndpoint")) {
    Fields tf(*te, f.At("tokenEndpoint"), problems, deferred_ok);
    OAuth::TokenEndpoint t;
    if (!tf.String("host", &t.host) || t.host.empty()) {
      problems->Error(f.At("tokenEndpoint").Key("host"), "tokenEndpoint host is required");
    }
    tf.String("path", &t.path);
    tf.Done();
    o.token_endpoint = t;
  }
  f.StringList("resourceHosts", &o.resource_hosts);
  if (const Value* s = f.Map("sentinels")) {
    Fields sf(*s, f.At("sentinels"), problems, deferred_ok);
    OAuth::Sentinels sentinels;
    sf.String("accessToken", &sentinels.access_token);
    sf.String("refreshToken", &sentinels.refresh_token);
    sf.Done();
    o.sentinels = sentinels;
  }
  if (const Value* cf = f.Map("credentialFile")) {
    FieldPath at = f.At("credentialFile");
    Fields ff(*cf, at, problems, deferred_ok);
    OAuth::CredentialFile file;
    if (!ff.String("path", &file.path) || file.path.empty()) {
      problems->Error(at.Key("path"), "credentialFile path is required");
    }
    if (ff.Has("format")) {
      ff.String("format", &file.format);
      if (IsLiteral(file.format) && file.format != "json" && file.format != "toml") {
        problems->Error(at.Key("format"),
                        absl::StrCat("format must be json or toml, got ", Quote(file.format)));
      }
    }
    // Nulls are meaningful inside a JSON structure, so Take, not Map.
    if (const Value* st = ff.Take("structure")) {
      if (!st->is_map()) {
        problems->Error(at.Key("structure"),
                        absl::StrCat("must be a mapping, got ", KindName(st->kind)));
      } else {
        file.structure = *st;
        CheckStructure(*st, at.Key("structure"), file.format == "toml", problems);
      }
    }
    ff.Done();
    o.credential_file = std::move(file);
  }
  if (const Value* rf = f.Map("responseFields")) {
    Fields rff(*rf, f.At("responseFields"), problems, deferred_ok);
    OAuth::ResponseFields fields;
    rff.String("accessToken", &fields.access_token);
    rff.String("refreshToken", &fields.refresh_token);
    rff.String("expiresIn", &fields.expires_in);
    rff.Done();
    o.response_fields = fields;
  }
  f.Bool("passthrough", &o.passthrough);
  f.Done();
  return o;
}

CredentialConfig DecodeCredential(const Value& config, const FieldPath& path, Problems* problems,
                                  bool deferred_ok) {
  CredentialConfig c;
  Fields f(config, path, problems, deferred_ok);
  if (!f.Has("service")) {
    problems->Error(path, "credential service is required");
  } else if (f.String("service", &c.service) && IsLiteral(c.service) &&
             !IsServiceHandle(c.service)) {
    problems->Error(f.At("service"), absl::StrCat("invalid service name ", Quote(c.service)));
  }
  DecodeCredentialPhases(f.Take("phase"), f.At("phase"), problems, &c.phases);
  if (const Value* v = f.Map("apiKey"))
    c.api_key = DecodeApiKey(*v, f.At("apiKey"), problems, deferred_ok);
  if (const Value* v = f.Map("oauth"))
    c.oauth = DecodeOAuth(*v, f.At("oauth"), problems, deferred_ok);
  if (f.is_map() && !f.Has("apiKey") && !f.Has("oauth")) {
    problems->Error(path, "declare apiKey or oauth");
  }
  f.Done();
  return c;
}

// ---- lifecycle@1 ----

Hook DecodeHook(const Value& v, const FieldPath& path, bool startup, Problems* problems,
                bool deferred_ok) {
  Hook h;
  Fields f(v, path, problems, deferred_ok);
  const Value* command = f.Take("command");
  if (command == nullptr || command->is_null()) {
    if (f.is_map()) problems->Error(path.Key("command"), "command is required");
  } else if (command->is_list()) {
    for (size_t i = 0; i < command->items.size(); ++i) {
      std::string arg;
      if (ScalarText(command->items[i], f.At("command").Index(i), problems, &arg)) {
        h.command.push_back(arg);
      }
    }
    if (command->items.empty()) problems->Error(f.At("command"), "command is required");
  } else if (command->is_scalar()) {
    h.command = {"sh", "-c", command->text};
  } else {
    problems->Error(f.At("command"), "command must be a string or a list of strings");
  }
  f.String("user", &h.user);
  if (f.StringList("env", &h.env)) {
    for (size_t i = 0; i < h.env.size(); ++i) {
      if (IsLiteral(h.env[i]) && !IsEnvName(h.env[i])) {
        problems->Error(f.At("env").Index(i), absl::StrCat("env entry ", Quote(h.env[i]),
                                                           " is not a valid env var name"));
      }
    }
  }
  f.String("description", &h.description);
  if (startup) f.Bool("background", &h.background);
  f.Done();
  return h;
}

LifecycleFile DecodeFile(const Value& v, const FieldPath& path, Problems* problems,
                         bool deferred_ok) {
  LifecycleFile file;
  Fields f(v, path, problems, deferred_ok);
  if (!f.String("path", &file.path)) {
    if (f.is_map() && !f.Has("path")) problems->Error(path.Key("path"), "path is required");
  } else if (IsLiteral(file.path) && (file.path.empty() || file.path[0] != '/')) {
    problems->Error(f.At("path"), absl::StrCat("path ", Quote(file.path), " must be absolute"));
  }
  if (!f.String("content", &file.content) && f.is_map() && !f.Has("content")) {
    problems->Error(path.Key("content"), "content is required");
  }
  if (f.String("mode", &file.mode) && !IsUnset(file.mode) && !IsOctalMode(file.mode)) {
    problems->Error(f.At("mode"), absl::StrCat("invalid octal mode ", Quote(file.mode)));
  }
  f.Bool("overwrite", &file.overwrite);
  f.String("description", &file.description);
  f.Done();
  return file;
}

LifecycleConfig DecodeLifecycle(const Value& config, const FieldPath& path, Problems* problems,
                                bool deferred_ok) {
  LifecycleConfig c;
  Fields f(config, path, problems, deferred_ok);
  for (absl::string_view key : {"install", "startup"}) {
    const Value* list = f.List(key);
    if (list == nullptr) continue;
    std::vector<Hook>& out = key == "install" ? c.install : c.startup;
    for (size_t i = 0; i < list->items.size(); ++i) {
      out.push_back(
          DecodeHook(list->items[i], f.At(key).Index(i), key == "startup", problems, deferred_ok));
    }
  }
  if (const Value* files = f.List("files")) {
    for (size_t i = 0; i < files->items.size(); ++i) {
      c.files.push_back(DecodeFile(files->items[i], f.At("files").Index(i), problems, deferred_ok));
    }
  }
  if (f.Has("interactive")) {
    std::vector<std::string> tail;
    if (f.StringList("interactive", &tail)) c.interactive = std::move(tail);
  }
  if (f.is_map() && c.install.empty() && c.startup.empty() && c.files.empty() &&
      !f.Has("interactive")) {
    problems->Error(path,
                    "lifecycle declares no hooks, no files, and no interactive tail; drop the "
                    "entry instead");
  }
  f.Done();
  return c;
}

// ---- volume@1, port@1, resources@1 ----

VolumeConfig DecodeVolume(const Value& config, const FieldPath& path, Problems* problems,
                          bool deferred_ok) {
  VolumeConfig c;
  Fields f(config, path, problems, deferred_ok);
  if (!f.String("path", &c.path)) {
    if (f.is_map() && !f.Has("path")) problems->Error(path.Key("path"), "volume path is required");
  } else if (IsLiteral(c.path) && (c.path.empty() || c.path[0] != '/')) {
    problems->Error(f.At("path"), absl::StrCat("volume path ", Quote(c.path), " must be absolute"));
  }
  if (f.String("size", &c.size) && !IsUnset(c.size) && !IsSize(c.size)) {
    problems->Error(f.At("size"), absl::StrCat("invalid size ", Quote(c.size)));
  }
  f.Bool("tmpfs", &c.tmpfs);
  if (f.String("mode", &c.mode) && !IsUnset(c.mode) && !IsOctalMode(c.mode)) {
    problems->Error(f.At("mode"), absl::StrCat("invalid octal mode ", Quote(c.mode)));
  }
  f.Done();
  return c;
}

PortConfig DecodePort(const Value& config, const FieldPath& path, Problems* problems,
                      bool deferred_ok) {
  PortConfig c;
  Fields f(config, path, problems, deferred_ok);
  int64_t container = 0;
  if (f.Int("container", &container)) {
    if (container < 1 || container > 65535) {
      problems->Error(f.At("container"),
                      absl::StrCat("container port ", container, " out of range"));
    } else {
      c.container = static_cast<int>(container);
    }
  } else if (f.is_map() && !f.Has("container")) {
    problems->Error(path.Key("container"), "container port is required");
  }
  std::string transport;
  if (f.String("transport", &transport) && IsLiteral(transport)) {
    if (transport == "tcp" || transport == "udp") {
      c.transport = transport;
    } else if (!transport.empty()) {
      problems->Error(f.At("transport"),
                      absl::StrCat("transport must be tcp or udp, got ", Quote(transport)));
    }
  }
  f.String("name", &c.name);
  f.Done();
  return c;
}

ResourcesConfig DecodeResources(const Value& config, const FieldPath& path, Problems* problems,
                                bool deferred_ok) {
  ResourcesConfig c;
  Fields f(config, path, problems, deferred_ok);
  double cpu;
  if (f.Number("cpu", &cpu)) {
    if (cpu < 0) {
      problems->Error(f.At("cpu"), "cpu must be >= 0");
    } else {
      c.cpu = cpu;
    }
  }
  if (f.String("memory", &c.memory) && !IsUnset(c.memory) && !IsSize(c.memory)) {
    problems->Error(f.At("memory"), absl::StrCat("invalid memory ", Quote(c.memory)));
  }
  f.String("gpu", &c.gpu);
  f.Done();
  return c;
}

// ---- dev.airlock/agent@1 ----

AgentConfig DecodeAgent(const Value& config, const FieldPath& path, Problems* problems,
                        bool deferred_ok) {
  AgentConfig c;
  Fields f(config, path, problems, deferred_ok);
  if (f.StringList("command", &c.command)) {
    if (c.command.empty())
      problems->Error(f.At("command"), "command must not be empty: it is the agent's argv");
    for (size_t i = 0; i < c.command.size(); ++i) {
      if (c.command[i].empty()) {
        problems->Error(f.At("command").Index(i), "command arguments must not be empty");
      }
    }
  } else if (f.is_map() && !f.Has("command")) {
    problems->Error(path.Key("command"), "command is required");
  }
  f.String("image", &c.image);
  f.Done();
  return c;
}

// DecodeTypedConfig decodes the config of a typed type. Absent and null
// configs read as an empty mapping: each type then says what it misses.
TypedConfig DecodeTypedConfig(const CapabilityEntry& e, const FieldPath& path, Problems* problems) {
  static const Value* kEmpty = new Value(Value::Map());
  const Value& config = e.config.is_null() ? *kEmpty : e.config;
  bool deferred_ok = e.parameterized;
  if (e.type == kNetworkPolicyV1)
    return DecodeNetworkPolicy(config, path, 1, problems, deferred_ok);
  if (e.type == kNetworkPolicyV2)
    return DecodeNetworkPolicy(config, path, 2, problems, deferred_ok);
  if (e.type == kCredential) return DecodeCredential(config, path, problems, deferred_ok);
  if (e.type == kLifecycle) return DecodeLifecycle(config, path, problems, deferred_ok);
  if (e.type == kVolume) return DecodeVolume(config, path, problems, deferred_ok);
  if (e.type == kPort) return DecodePort(config, path, problems, deferred_ok);
  if (e.type == kResources) return DecodeResources(config, path, problems, deferred_ok);
  if (e.type == kAirlockAgent) return DecodeAgent(config, path, problems, deferred_ok);
  return std::monostate();
}

// ---- entries and groups ----

std::optional<CapabilitySource> DecodeSource(const Value* v, const FieldPath& path,
                                             Problems* problems) {
  if (v == nullptr) return std::nullopt;
  if (!v->is_map()) {
    problems->Error(path, "capability source must be an object");
    return std::nullopt;
  }
  Fields f(*v, path, problems);
  CapabilitySource s;
  f.String("kit", &s.kit);
  if (!f.String("path", &s.path) || s.path.empty()) {
    problems->Error(path.Key("path"), "source path is required");
  }
  f.Done();
  return s;
}

// DecodeEntry reads one ordinary entry; nullopt when its type is unusable,
// which takes it out of the block checks (they would only add noise).
std::optional<CapabilityEntry> DecodeEntry(const Value& item, const FieldPath& path, bool member,
                                           Problems* problems) {
  Fields f(item, path, problems);
  if (!f.is_map()) return std::nullopt;
  CapabilityEntry e;
  if (member && f.Has("optional")) {
    problems->Error(f.At("optional"), "group members must not state optional");
    f.Take("optional");
  }
  bool has_type = f.String("type", &e.type);
  if (const Value* name = f.Take("name")) {
    if (name->is_string()) {
      e.name = name->text;
    } else {
      problems->Error(f.At("name"), "capability name must be a string");
    }
  }
  f.Bool("optional", &e.optional);
  f.String("description", &e.description);
  e.source = DecodeSource(f.Take("source"), f.At("source"), problems);
  if (const Value* config = f.Take("config")) {
    e.config_stated = true;
    e.config = *config;
    if (!config->is_map() && !config->is_null()) {
      problems->Error(f.At("config"),
                      absl::StrCat("config must be a mapping, got ", KindName(config->kind)));
    }
  }
  f.Done();
  if (!has_type) {
    if (!f.Has("type")) problems->Error(path, "type is required");
    return std::nullopt;
  }
  if (!IsCapabilityType(e.type)) {
    problems->Error(f.At("type"),
                    absl::StrCat("type ", Quote(e.type), " is not <namespace>/<name>@<version>"));
    return std::nullopt;
  }
  FieldPath config_path = f.At("config");
  CheckEnvInKeys(e.config, config_path, problems);
  e.parameterized = HasReferences(e.config);

  if (IsConfigLessType(e.type)) {
    if (e.config_stated) problems->Error(config_path, absl::StrCat(e.type, " takes no config"));
    return e;
  }
  if (e.config_stated && !e.config.is_map() && !e.config.is_null()) return e;  // reported
  size_t before = problems->error_count();
  TypedConfig typed = DecodeTypedConfig(e, config_path, problems);
  // A parameterized entry keeps no typed view: its values are not final.
  if (!e.parameterized && problems->error_count() == before) e.typed = std::move(typed);
  auto known = KnownConfigKeys().find(e.type);
  if (known != KnownConfigKeys().end() && e.config.is_map()) {
    for (const auto& [key, value] : e.config.fields) {
      if (known->second.count(key) == 0) problems->Error(config_path.Key(key), "unknown field");
    }
  }
  return e;
}

// Located ties an entry to the path it was declared at, for block checks.
struct Located {
  const CapabilityEntry* entry;
  FieldPath path;
};

std::vector<std::string> StringItems(const Value* v) {
  std::vector<std::string> out;
  if (v == nullptr) return out;
  if (v->is_scalar()) return {v->text};
  for (const Value& item : v->items) out.push_back(item.text);
  return out;
}

std::string JsonList(const std::vector<std::string>& items) {
  std::vector<Value> values;
  for (const std::string& s : items) values.push_back(Value::String(s));
  return ToCanonicalJson(Value::List(std::move(values)));
}

const Located* FirstOfType(const std::vector<Located>& block, absl::string_view type) {
  for (const Located& l : block) {
    if (l.entry->type == type) return &l;
  }
  return nullptr;
}

// CheckArity applies the rules on how often a type may appear in a block:
// singletons once, no exact duplicates, one network-policy version. It
// returns false when the block's network policy is ambiguous (stated
// twice).
bool CheckArity(const std::vector<Located>& block, Problems* problems) {
  std::map<std::string, std::string> singleton_at, exact_at;
  const Located* network = nullptr;
  bool network_ok = true;
  for (const Located& l : block) {
    const CapabilityEntry& e = *l.entry;
    bool singleton_dup = false;
    if (IsSingletonType(e.type)) {
      auto [it, fresh] = singleton_at.emplace(e.type, l.path.str());
      if (!fresh) {
        problems->Error(l.path, absl::StrCat(e.type, " already declared at ", it->second));
        singleton_dup = true;
      }
    }
    auto [exact, fresh] = exact_at.emplace(absl::StrCat(e.type, "\n", ConfigKey(e)), l.path.str());
    if (!fresh && !singleton_dup) {
      problems->Error(l.path, absl::StrCat("identical to ", exact->second));
    }
    if (e.type != kNetworkPolicyV1 && e.type != kNetworkPolicyV2) continue;
    if (network == nullptr) {
      network = &l;
      continue;
    }
    network_ok = false;
    if (network->entry->type != e.type) {
      problems->Error(l.path, absl::StrCat(e.type, " cannot be declared beside ",
                                           network->entry->type, " at ", network->path.str(),
                                           "; a descriptor states one network-policy version"));
    }
  }
  return network_ok;
}

// CheckWorkloadOnly refuses on a mixin what only the workload may state:
// sbx@1, long-running@1 and dev.airlock/agent@1 (the workload is the
// agent a sandbox runs), and the legacy agent-context profile (a
// `filename` without a `directory`), which names the one profile beside
// the workspace. A mixin states a profile with an explicit directory, or
// contributes a body alone. Judged on presence, so a reference in the
// value does not defer it.
void CheckWorkloadOnly(const std::vector<Located>& block, const CapabilityRules& rules,
                       Problems* problems) {
  if (!rules.mixin) return;
  for (const Located& l : block) {
    const CapabilityEntry& e = *l.entry;
    if (e.type == kSbx || e.type == kLongRunning || e.type == kAirlockAgent) {
      problems->Error(l.path.Key("type"),
                      absl::StrCat(e.type, " is workload-only; a mixin cannot declare it"));
    }
    if (e.type != kAgentContext || !e.config.is_map() || e.config.Find("directory") != nullptr) {
      continue;
    }
    const Value* filename = e.config.Find("filename");
    if (filename != nullptr && !(filename->is_string() && filename->text.empty())) {
      problems->Error(l.path.Key("config").Key("filename"),
                      "agent-context filename without a directory is workload-only; a mixin "
                      "states filename together with an explicit directory, or contributes a "
                      "body alone");
    }
  }
}

std::string MountConflict(const std::string& mount, bool is_volume, const std::string& other_at,
                          bool other_is_volume) {
  if (is_volume && other_is_volume) {
    return absl::StrCat("volume for ", Quote(mount), " already declared at ", other_at);
  }
  if (!is_volume && !other_is_volume) {
    return absl::StrCat("host mount for ", Quote(mount), " already declared at ", other_at);
  }
  return is_volume
             ? absl::StrCat("volume ", Quote(mount), " conflicts with host mount at ", other_at)
             : absl::StrCat("host mount ", Quote(mount), " conflicts with volume at ", other_at);
}

// CheckInstanceKeys refuses two literal entries with one instance key:
// a credential (service, phase), a mount path (volume and host mount
// share the key, after cleaning), a port (container/transport).
void CheckInstanceKeys(const std::vector<Located>& block, Problems* problems) {
  std::map<std::string, std::string> credential_at, port_at;
  std::map<std::string, std::pair<std::string, bool>> mount_at;  // path -> (at, is volume)
  for (const Located& l : block) {
    const CapabilityEntry& e = *l.entry;
    if (e.parameterized) continue;  // keys compare literal values only
    const std::string& at = l.path.str();
    FieldPath config_path = l.path.Key("config");
    if (const auto* c = e.As<CredentialConfig>()) {
      for (Phase phase : c->phases) {
        auto [it, fresh] =
            credential_at.emplace(absl::StrCat(c->service, "|", PhaseName(phase)), at);
        if (!fresh) {
          problems->Error(config_path, absl::StrCat("credential for service ", Quote(c->service),
                                                    " phase ", Quote(PhaseName(phase)),
                                                    " already declared at ", it->second));
        }
      }
    }
    std::optional<std::string> mount;
    if (const auto* v = e.As<VolumeConfig>()) mount = internal::CleanPath(v->path);
    if (e.type == kHostMount && e.config.is_map()) {
      const Value* p = e.config.Find("path");
      if (p != nullptr && p->is_string()) mount = internal::CleanPath(p->text);
    }
    if (mount) {
      bool is_volume = e.type == kVolume;
      auto [it, fresh] = mount_at.emplace(*mount, std::make_pair(at, is_volume));
      if (!fresh) {
        problems->Error(config_path.Key("path"),
                        MountConflict(*mount, is_volume, it->second.first, it->second.second));
      }
    }
    if (const auto* p = e.As<PortConfig>()) {
      auto [it, fresh] = port_at.emplace(p->Key(), at);
      if (!fresh) {
        problems->Error(config_path.Key("container"),
                        absl::StrCat("port ", p->container, " already declared at ", it->second));
      }
    }
  }
}

// CheckSessionAgreement: agent-interactive-sessions names the same launch
// as lifecycle's interactive tail and the same list command as
// agent-sessions. Judged only when both sides are literal.
void CheckSessionAgreement(const std::vector<Located>& block, Problems* problems) {
  const Located* ais = FirstOfType(block, kAgentInteractiveSessions);
  if (ais == nullptr || ais->entry->parameterized || !ais->entry->config.is_map()) return;
  const Value& config = ais->entry->config;

  const Located* lifecycle = FirstOfType(block, kLifecycle);
  const LifecycleConfig* lc = lifecycle ? lifecycle->entry->As<LifecycleConfig>() : nullptr;
  const Value* new_session = config.Find("newSession");
  if (lc && lc->interactive && new_session && new_session->is_list() &&
      StringItems(new_session) != *lc->interactive) {
    problems->Error(ais->path.Key("config").Key("newSession"),
                    absl::StrCat("newSession ", JsonList(StringItems(new_session)),
                                 " disagrees with lifecycle interactive ",
                                 JsonList(*lc->interactive), "; they name the same launch"));
  }

  const Located* sessions = FirstOfType(block, kAgentSessions);
  const Value* list = config.Find("list");
  const Value* other =
      sessions && !sessions->entry->parameterized && sessions->entry->config.is_map()
          ? sessions->entry->config.Find("list")
          : nullptr;
  if (list && other && !StringItems(list).empty() && !StringItems(other).empty() &&
      !Equal(*list, *other)) {
    problems->Error(ais->path.Key("config").Key("list"),
                    absl::StrCat("list disagrees with the agent-sessions list at ",
                                 sessions->path.str(), "; both name the same command"));
  }
}

// CheckInjectWithinAllow: a credential presents itself only to hosts its
// own Kit's network policy allows in the same phase. With no policy at
// all, every inject domain fails.
void CheckInjectWithinAllow(const std::vector<Located>& block, Problems* problems) {
  const Located* network = FirstOfType(block, kNetworkPolicyV1);
  if (network == nullptr) network = FirstOfType(block, kNetworkPolicyV2);
  const NetworkPolicyConfig* policy = network ? network->entry->As<NetworkPolicyConfig>() : nullptr;
  if (network && policy == nullptr) return;  // it failed to decode, already reported
  for (const Located& l : block) {
    const auto* c = l.entry->As<CredentialConfig>();
    if (c == nullptr || !c->api_key) continue;
    for (Phase phase : c->phases) {
      const std::optional<NetworkRules>* allowed = policy ? &policy->rules(phase) : nullptr;
      for (size_t j = 0; j < c->api_key->inject.size(); ++j) {
        const std::string& domain = c->api_key->inject[j].domain;
        if (allowed && allowed->has_value() && InjectDomainAllowed(domain, **allowed)) continue;
        problems->Error(
            l.path.Key("config").Key("apiKey").Key("inject").Index(j).Key("domain"),
            absl::StrCat("inject domain ", Quote(domain), " is not in the network policy's ",
                         PhaseName(phase), " allow list"));
      }
    }
  }
}

// CheckBlock applies the rules that relate entries of one declaration
// block: the ordinary entries, or one group's members.
void CheckBlock(const std::vector<Located>& block, const CapabilityRules& rules, bool cross_entry,
                Problems* problems) {
  bool network_ok = CheckArity(block, problems);
  CheckWorkloadOnly(block, rules, problems);
  CheckInstanceKeys(block, problems);
  CheckSessionAgreement(block, problems);
  bool literal = std::none_of(block.begin(), block.end(),
                              [](const Located& l) { return l.entry->parameterized; });
  // Deferred while any value is still a reference: the effective form
  // judges it again.
  if (cross_entry && literal && network_ok) CheckInjectWithinAllow(block, problems);
}

void DecodeGroup(const Value& item, const FieldPath& path, Problems* problems,
                 std::vector<CapabilityItem>* out, std::vector<Located>* block,
                 std::vector<std::unique_ptr<CapabilityEntry>>* storage) {
  Fields f(item, path, problems);
  for (absl::string_view key : {"type", "name", "description", "optional", "config"}) {
    if (f.Has(key)) {
      problems->Error(f.At(key), absl::StrCat("group item must not state ", key));
      f.Take(key);
    }
  }
  CapabilityGroup group;
  group.source = DecodeSource(f.Take("source"), f.At("source"), problems);
  const Value* g = f.Take("group");
  f.Done();
  FieldPath gpath = path.Key("group");
  if (!g->is_map()) {
    problems->Error(gpath, "group must be an object");
    return;
  }
  Fields gf(*g, gpath, problems);
  for (absl::string_view key : {"name", "description"}) {
    if (const Value* v = gf.Take(key)) {
      if (!v->is_string()) {
        problems->Error(gf.At(key), absl::StrCat("group ", key, " must be a string"));
      } else {
        (key == "name" ? group.name : group.description) = v->text;
      }
    }
  }
  gf.Bool("optional", &group.optional);
  const Value* members = gf.List("capabilities");
  if (members == nullptr || members->items.empty()) {
    if (!gf.Has("capabilities") || (members && members->items.empty())) {
      problems->Error(gpath.Key("capabilities"), "group must contain at least one member");
    }
  } else {
    for (size_t j = 0; j < members->items.size(); ++j) {
      const Value& m = members->items[j];
      FieldPath mpath = gpath.Key("capabilities").Index(j);
      if (m.is_map() && m.Find("group") != nullptr) {
        problems->Error(mpath, "nested groups are not permitted");
        continue;
      }
      if (auto entry = DecodeEntry(m, mpath, /*member=*/true, problems)) {
        group.members.push_back(*entry);
        storage->push_back(std::make_unique<CapabilityEntry>(*std::move(entry)));
        block->push_back(Located{storage->back().get(), mpath});
      }
    }
  }
  gf.Done();
  out->push_back(std::move(group));
}

}  // namespace

bool IsCapabilityType(absl::string_view type) {
  size_t slash = type.find('/');
  size_t at = type.rfind('@');
  if (slash == absl::string_view::npos || at == absl::string_view::npos || at < slash) return false;
  absl::string_view ns = type.substr(0, slash);
  absl::string_view name = type.substr(slash + 1, at - slash - 1);
  absl::string_view version = type.substr(at + 1);
  auto word = [](absl::string_view s, absl::string_view inner) {
    if (s.empty() || !IsLowerAlnum(s.front()) || !IsLowerAlnum(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) {
      return IsLowerAlnum(c) || inner.find(c) != absl::string_view::npos;
    });
  };
  if (!word(ns, ".-") || !word(name, "-")) return false;
  if (version.empty() || version[0] < '1' || version[0] > '9') return false;
  return std::all_of(version.begin(), version.end(), absl::ascii_isdigit);
}

const std::vector<absl::string_view>& WellKnownTypes() {
  static const std::vector<absl::string_view>* kTypes =
      new std::vector<absl::string_view>{kNetworkPolicyV1,
                                         kNetworkPolicyV2,
                                         kCredential,
                                         kLifecycle,
                                         kVolume,
                                         kHostMount,
                                         kPort,
                                         kResources,
                                         kPrivileged,
                                         kSbx,
                                         kLongRunning,
                                         kGitIdentity,
                                         kKitRegistry,
                                         kAgentSessions,
                                         kAgentInteractiveSessions,
                                         kAgentContext,
                                         kAgentSkills,
                                         kAgentSkill,
                                         kAcp,
                                         kSshAgent,
                                         kUsbDevice,
                                         kAirlockAgent};
  return *kTypes;
}

bool IsWellKnownType(absl::string_view type) {
  static const std::set<absl::string_view>* kTypes =
      new std::set<absl::string_view>(WellKnownTypes().begin(), WellKnownTypes().end());
  return kTypes->count(type) > 0;
}

bool IsSingletonType(absl::string_view type) {
  static const std::set<absl::string_view>* kTypes =
      new std::set<absl::string_view>{kNetworkPolicyV1,
                                      kNetworkPolicyV2,
                                      kResources,
                                      kPrivileged,
                                      kKitRegistry,
                                      kAgentSessions,
                                      kAgentInteractiveSessions,
                                      kLifecycle,
                                      kSbx,
                                      kLongRunning,
                                      kGitIdentity,
                                      kAirlockAgent};
  return kTypes->count(type) > 0;
}

bool IsConfigLessType(absl::string_view type) {
  return type == kPrivileged || type == kKitRegistry || type == kSbx || type == kLongRunning ||
         type == kGitIdentity;
}

const std::vector<std::string>& TypedCapabilityTypes() {
  static const auto* kTypes = new std::vector<std::string>{
      std::string(kNetworkPolicyV1), std::string(kNetworkPolicyV2), std::string(kCredential),
      std::string(kLifecycle),       std::string(kVolume),          std::string(kPort),
      std::string(kResources),       std::string(kPrivileged),      std::string(kAirlockAgent)};
  return *kTypes;
}

const char* PhaseName(Phase phase) { return phase == Phase::kInstall ? "install" : "runtime"; }

std::string PortConfig::Key() const { return absl::StrCat(container, "/", transport); }

bool InjectDomainAllowed(absl::string_view domain, const NetworkRules& rules) {
  std::string want = StripPort(domain);
  for (const NetworkEntry& e : rules.allow) {
    for (const std::string& host : e.hosts) {
      if (host == "*" || host == "**" || StripPort(host) == want) return true;
    }
  }
  return false;
}

std::string ConfigKey(const CapabilityEntry& entry) {
  const Value& c = entry.config;
  if (!entry.config_stated || c.is_null() || (c.is_map() && c.fields.empty())) return "";
  return ToCanonicalJson(c);
}

void DecodeCapabilities(const Value& list, const FieldPath& path, const CapabilityRules& rules,
                        Problems* problems, std::vector<CapabilityItem>* out) {
  if (!list.is_list()) {
    problems->Error(path, absl::StrCat("must be a list, got ", KindName(list.kind)));
    return;
  }
  bool has_groups = std::any_of(list.items.begin(), list.items.end(), [](const Value& item) {
    return item.is_map() && item.Find("group") != nullptr;
  });
  // Entries are copied into `out`; the blocks point at stable copies.
  std::vector<std::unique_ptr<CapabilityEntry>> storage;
  std::vector<Located> top;
  std::vector<std::vector<Located>> groups;
  for (size_t i = 0; i < list.items.size(); ++i) {
    const Value& item = list.items[i];
    FieldPath at = path.Index(i);
    if (item.is_map() && item.Find("group") != nullptr) {
      groups.emplace_back();
      DecodeGroup(item, at, problems, out, &groups.back(), &storage);
      continue;
    }
    if (auto entry = DecodeEntry(item, at, /*member=*/false, problems)) {
      out->push_back(*entry);
      storage.push_back(std::make_unique<CapabilityEntry>(*std::move(entry)));
      top.push_back(Located{storage.back().get(), at});
    }
  }
  CheckBlock(top, rules, rules.cross_entry && !has_groups, problems);
  for (const auto& block : groups) CheckBlock(block, rules, /*cross_entry=*/false, problems);
}

}  // namespace airlock::kit
