// The rules that relate the entries of one declaration block: how often a
// type may appear, what only a workload states, instance keys, sessions
// that must agree, credentials within the network policy.
#include "common/kit/internal/block_checks.h"

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"
#include "common/kit/internal/fields.h"

namespace airlock::kit::internal {
namespace {

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

}  // namespace

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

}  // namespace airlock::kit::internal
