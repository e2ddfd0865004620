// The configs of the capability types this library types (network-policy,
// credential, lifecycle, volume, port, resources, dev.airlock/agent):
// each decoded strictly into its struct, with the spec's value checks.
#include "common/kit/internal/typed_configs.h"

#include <re2/re2.h>

#include <algorithm>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/kit/internal/fields.h"

namespace airlock::kit::internal {
namespace {

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

// DecodeAbsolutePath reads the required `path` key of `f`, which must be
// absolute once literal; `what` names it in the problems.
void DecodeAbsolutePath(Fields& f, const FieldPath& path, absl::string_view what, std::string* out,
                        Problems* problems) {
  if (!f.String("path", out)) {
    if (f.is_map() && !f.Has("path")) {
      problems->Error(path.Key("path"), absl::StrCat(what, " is required"));
    }
  } else if (IsLiteral(*out) && (out->empty() || (*out)[0] != '/')) {
    problems->Error(f.At("path"), absl::StrCat(what, " ", Quote(*out), " must be absolute"));
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
  DecodeAbsolutePath(f, path, "path", &file.path, problems);
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
  DecodeAbsolutePath(f, path, "volume path", &c.path, problems);
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

}  // namespace

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

}  // namespace airlock::kit::internal
