#include "common/kit/capabilities.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/kit/internal/block_checks.h"
#include "common/kit/internal/fields.h"
#include "common/kit/internal/typed_configs.h"
#include "common/kit/references.h"

namespace airlock::kit {
namespace {

using internal::CheckBlock;
using internal::DecodeTypedConfig;
using internal::Fields;
using internal::IsLiteral;
using internal::IsLowerAlnum;
using internal::Located;
using internal::ScalarText;

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