#include "common/kit/compose.h"

#include <algorithm>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kit/internal/fields.h"
#include "common/kit/problems.h"

namespace airlock::kit {
namespace {

// Member is one Kit of the composition with its provides materialized: a
// bare provide takes its version from its own Kit's `version:`.
struct Member {
  const KitInput* input;
  std::vector<Provide> provides;
  bool workload = false;
};

std::string ProvideText(const Provide& p) {
  return p.version.empty() ? ShortName(p.name) : absl::StrCat(ShortName(p.name), "@", p.version);
}

std::vector<const Provide*> ProvidesOf(const Member& m, const std::string& name) {
  std::vector<const Provide*> out;
  for (const Provide& p : m.provides) {
    if (p.name == name) out.push_back(&p);
  }
  return out;
}

bool SatisfiedBy(const Member& m, const Requirement& r) {
  for (const Provide* p : ProvidesOf(m, r.name)) {
    if (Satisfies(*p, r)) return true;
  }
  return false;
}

std::string Versions(const Member& m, const std::string& name) {
  std::vector<std::string> texts;
  for (const Provide* p : ProvidesOf(m, name)) texts.push_back(ProvideText(*p));
  return absl::StrJoin(texts, ", ");
}

// ---- Capability merge ----

// Merged is one output entry and who first asked for it.
struct Merged {
  std::string type;
  std::string name;
  std::string description;
  bool required = false;
  bool config_stated = false;
  Value config;
  std::string config_key;  // ConfigKey of the first contribution
  std::string owner;

  // Absorb folds in another contribution of the same request: required
  // wins, the first non-empty name and description stay.
  void Absorb(const CapabilityEntry& e) {
    required = required || !e.optional;
    if (name.empty()) name = e.name;
    if (description.empty()) description = e.description;
  }

  Value ToValue() const {
    Value v = Value::Map();
    v.Set("type", Value::String(type));
    if (!name.empty()) v.Set("name", Value::String(name));
    if (!required) v.Set("optional", Value::Bool(true));
    if (!description.empty()) v.Set("description", Value::String(description));
    if (config_stated) v.Set("config", config);
    return v;
  }
};

Merged Start(const CapabilityEntry& e, const std::string& owner) {
  Merged m;
  m.type = e.type;
  m.config_stated = e.config_stated;
  m.config = e.config;
  m.config_key = ConfigKey(e);
  m.owner = owner;
  m.Absorb(e);
  return m;
}

std::string EntryKey(const NetworkEntry& e) {
  auto list = [](const std::vector<std::string>& items) {
    std::vector<std::string> quoted;
    for (const std::string& s : items) quoted.push_back(Quote(s));
    return absl::StrCat("[", absl::StrJoin(quoted, " "), "]");
  };
  return absl::StrCat(list(e.hosts), "|", list(e.methods), "|", list(e.paths));
}

Value StringList(const std::vector<std::string>& items) {
  Value list = Value::List();
  for (const std::string& s : items) list.items.push_back(Value::String(s));
  return list;
}

// NetworkMerge lifts every contribution into the @2 shape and merges each
// phase separately. One Kit's deny is never defeated by another's allow:
// deny entries are never dropped and deny precedence applies to the whole.
class NetworkMerge {
 public:
  void Add(const CapabilityEntry& e, const NetworkPolicyConfig& c, const std::string& owner) {
    if (!meta_) {
      meta_ = Start(e, owner);
    } else {
      meta_->Absorb(e);
    }
    v2_ = v2_ || c.version == 2;
    for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
      const std::optional<NetworkRules>& rules = c.rules(phase);
      if (!rules) continue;
      Lists& l = lists_[static_cast<int>(phase)];
      l.stated = true;
      l.allow.insert(l.allow.end(), rules->allow.begin(), rules->allow.end());
      l.deny.insert(l.deny.end(), rules->deny.begin(), rules->deny.end());
    }
  }

  std::optional<Value> Result() const {
    if (!meta_) return std::nullopt;
    Merged out = *meta_;
    out.type = std::string(v2_ ? kNetworkPolicyV2 : kNetworkPolicyV1);
    out.config_stated = true;
    out.config = Value::Map();
    for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
      const Lists& l = lists_[static_cast<int>(phase)];
      if (!l.stated) continue;
      Value rules = Value::Map();
      std::vector<NetworkEntry> allow = DropGrantedOutright(Dedup(l.allow));
      std::vector<NetworkEntry> deny = Dedup(l.deny);
      if (!allow.empty()) rules.Set("allow", Encode(allow));
      if (!deny.empty()) rules.Set("deny", Encode(deny));
      out.config.Set(PhaseName(phase), std::move(rules));
    }
    return out.ToValue();
  }

 private:
  struct Lists {
    bool stated = false;
    std::vector<NetworkEntry> allow;
    std::vector<NetworkEntry> deny;
  };

  static std::vector<NetworkEntry> Dedup(const std::vector<NetworkEntry>& entries) {
    std::set<std::string> seen;
    std::vector<NetworkEntry> out;
    for (const NetworkEntry& e : entries) {
      if (seen.insert(EntryKey(e)).second) out.push_back(e);
    }
    return out;
  }

  // The union of a bounded and an unbounded grant on one host is the
  // unbounded grant: bounded entries lose the hosts some unbounded allow
  // names (exact strings), and vanish when none are left.
  static std::vector<NetworkEntry> DropGrantedOutright(const std::vector<NetworkEntry>& allow) {
    std::set<std::string> outright;
    for (const NetworkEntry& e : allow) {
      if (!e.bounded()) outright.insert(e.hosts.begin(), e.hosts.end());
    }
    std::vector<NetworkEntry> out;
    for (NetworkEntry e : allow) {
      if (e.bounded()) {
        e.hosts.erase(std::remove_if(e.hosts.begin(), e.hosts.end(),
                                     [&](const std::string& h) { return outright.count(h) > 0; }),
                      e.hosts.end());
        if (e.hosts.empty()) continue;
      }
      out.push_back(std::move(e));
    }
    return out;
  }

  Value Encode(const std::vector<NetworkEntry>& entries) const {
    Value list = Value::List();
    if (!v2_) {
      // @1: a flat host list, first-seen order.
      std::set<std::string> seen;
      for (const NetworkEntry& e : entries) {
        for (const std::string& h : e.hosts) {
          if (seen.insert(h).second) list.items.push_back(Value::String(h));
        }
      }
      return list;
    }
    for (const NetworkEntry& e : entries) {
      if (!e.bounded() && e.hosts.size() == 1) {
        list.items.push_back(Value::String(e.hosts[0]));
        continue;
      }
      Value object = Value::Map();
      object.Set("hosts", StringList(e.hosts));
      if (!e.methods.empty()) object.Set("methods", StringList(e.methods));
      if (!e.paths.empty()) object.Set("paths", StringList(e.paths));
      list.items.push_back(std::move(object));
    }
    return list;
  }

  std::optional<Merged> meta_;
  bool v2_ = false;
  Lists lists_[2];
};

// LifecycleMerge concatenates hooks and files in composition order;
// repeated commands stay separate, but a file or the interactive tail
// has one author.
class LifecycleMerge {
 public:
  void Add(const CapabilityEntry& e, const LifecycleConfig& c, const std::string& owner,
           Problems* problems) {
    if (!meta_) {
      meta_ = Start(e, owner);
    } else {
      meta_->Absorb(e);
    }
    for (const char* key : {"install", "startup", "files"}) {
      const Value* list = e.config.Find(key);
      if (list == nullptr) continue;
      Value& out = lists_[key];
      if (!out.is_list()) out = Value::List();
      out.items.insert(out.items.end(), list->items.begin(), list->items.end());
    }
    for (const LifecycleFile& f : c.files) {
      std::string path = internal::CleanPath(f.path);
      auto [it, fresh] = file_owner_.emplace(path, owner);
      if (!fresh) {
        problems->Error(FieldPath(),
                        absl::StrCat("merge: ", it->second, " and ", owner, " both write ",
                                     Quote(path), "; one file has one author"));
      }
    }
    if (c.interactive) {
      if (interactive_owner_) {
        problems->Error(FieldPath(), absl::StrCat("merge: ", *interactive_owner_, " and ", owner,
                                                  " both state the lifecycle interactive tail; "
                                                  "one launch has one author"));
      } else {
        interactive_owner_ = owner;
        interactive_ = *c.interactive;
      }
    }
  }

  std::optional<Value> Result() const {
    if (!meta_) return std::nullopt;
    Merged out = *meta_;
    out.config_stated = true;
    out.config = Value::Map();
    for (const char* key : {"install", "startup", "files"}) {
      auto it = lists_.find(key);
      if (it != lists_.end() && !it->second.items.empty()) out.config.Set(key, it->second);
    }
    if (interactive_owner_) out.config.Set("interactive", StringList(interactive_));
    return out.ToValue();
  }

 private:
  std::optional<Merged> meta_;
  std::map<std::string, Value> lists_;
  std::map<std::string, std::string> file_owner_;
  std::optional<std::string> interactive_owner_;
  std::vector<std::string> interactive_;
};

class CapabilityMerge {
 public:
  // `workload` is the ref of the composition's one workload.
  CapabilityMerge(Problems* problems, std::string workload)
      : problems_(problems), workload_(std::move(workload)) {}

  void Add(const CapabilityEntry& e, const std::string& owner) {
    if (e.type == kAirlockAgent) return WorkloadOnly(e, owner);
    if (const auto* n = e.As<NetworkPolicyConfig>()) return network_.Add(e, *n, owner);
    if (const auto* l = e.As<LifecycleConfig>()) return lifecycle_.Add(e, *l, owner, problems_);
    if (e.type == kResources || e.type == kAgentSessions || e.type == kAgentInteractiveSessions) {
      return WholeSandbox(e, owner);
    }
    if (e.type == kAgentContext) {
      context_.push_back(Start(e, owner));
      return;
    }
    if (const auto* c = e.As<CredentialConfig>()) {
      for (Phase phase : c->phases) {
        std::string key = absl::StrCat(c->service, "|", PhaseName(phase));
        auto [it, fresh] = credential_owner_.emplace(key, owner);
        if (!fresh) {
          problems_->Error(FieldPath(),
                           absl::StrCat("merge: ", it->second, " and ", owner, " both declare ",
                                        kCredential, " for service ", Quote(c->service), " phase ",
                                        PhaseName(phase), "; one credential has one owner"));
        }
      }
      return Distinct(e, owner);
    }
    std::optional<std::string> mount;
    if (const auto* v = e.As<VolumeConfig>()) mount = internal::CleanPath(v->path);
    if (e.type == kHostMount) {
      const Value* p = e.config.is_map() ? e.config.Find("path") : nullptr;
      if (p != nullptr) mount = internal::CleanPath(p->text);
    }
    if (mount) {
      auto [it, fresh] = mount_owner_.emplace(*mount, std::make_pair(owner, e.type));
      if (!fresh) {
        bool host_mount = e.type == kHostMount || it->second.second == kHostMount;
        problems_->Error(FieldPath(), absl::StrCat("merge: ", it->second.first, " and ", owner,
                                                   " both declare ", Quote(*mount),
                                                   host_mount ? "; a host mount has one owner"
                                                              : "; volume paths cannot be shared"));
      }
      return Distinct(e, owner);
    }
    if (const auto* p = e.As<PortConfig>()) {
      // The key is the request: the same port from two Kits is one
      // publication, whatever it is called.
      return Collapse(absl::StrCat(e.type, "|", p->Key()), e, owner);
    }
    if (e.type == kAcp) {
      const Value* agent = e.config.is_map() ? e.config.Find("agent") : nullptr;
      std::string name = agent != nullptr ? agent->text : "";
      absl::StatusOr<std::string> normalized = NormalizeName(name);
      return Instance(absl::StrCat(e.type, "|", normalized.ok() ? *normalized : name), e, owner,
                      absl::StrCat(" for agent ", Quote(name)));
    }
    // Everything else, unknown types included: type plus config. Identical
    // requests collapse; any other request is a distinct entry.
    Collapse(absl::StrCat(e.type, "\n", ConfigKey(e)), e, owner);
  }

  Value Result() const {
    Value list = Value::List();
    if (auto v = network_.Result()) list.items.push_back(*v);
    for (const Merged& m : instances_) list.items.push_back(m.ToValue());
    for (absl::string_view type :
         {kAirlockAgent, kResources, kAgentSessions, kAgentInteractiveSessions}) {
      auto it = whole_.find(std::string(type));
      if (it != whole_.end()) list.items.push_back(it->second.ToValue());
    }
    if (auto v = lifecycle_.Result()) list.items.push_back(*v);
    for (const Merged& m : context_) list.items.push_back(m.ToValue());
    return list;
  }

 private:
  // WorkloadOnly keeps the workload's entry: the agent is what the
  // workload runs. Decoding already refuses one on a mixin; this holds the
  // rule for descriptors that did not come through it.
  void WorkloadOnly(const CapabilityEntry& e, const std::string& owner) {
    if (owner != workload_) {
      problems_->Error(FieldPath(),
                       absl::StrCat("merge: ", owner, " declares ", e.type,
                                    ", which only the workload (", workload_, ") may declare"));
      return;
    }
    WholeSandbox(e, owner);
  }

  // WholeSandbox: one author; an identical restatement is accepted.
  void WholeSandbox(const CapabilityEntry& e, const std::string& owner) {
    auto it = whole_.find(e.type);
    if (it == whole_.end()) {
      whole_.emplace(e.type, Start(e, owner));
      return;
    }
    Merged& m = it->second;
    if (m.config_key != ConfigKey(e)) {
      problems_->Error(FieldPath(),
                       absl::StrCat("merge: ", m.owner, " and ", owner, " both declare ", e.type,
                                    ", which describes the whole sandbox, so it "
                                    "has one author"));
      return;
    }
    m.Absorb(e);
  }

  void Distinct(const CapabilityEntry& e, const std::string& owner) {
    instances_.push_back(Start(e, owner));
  }

  void Collapse(const std::string& key, const CapabilityEntry& e, const std::string& owner) {
    auto [it, fresh] = instance_at_.emplace(key, instances_.size());
    if (fresh) {
      instances_.push_back(Start(e, owner));
    } else {
      instances_[it->second].Absorb(e);
    }
  }

  // Instance: one request per key; the same key asking for something
  // else is a conflict one of the Kits has to resolve.
  void Instance(const std::string& key, const CapabilityEntry& e, const std::string& owner,
                const std::string& what) {
    auto [it, fresh] = instance_at_.emplace(key, instances_.size());
    if (fresh) {
      instances_.push_back(Start(e, owner));
      return;
    }
    Merged& m = instances_[it->second];
    if (m.config_key != ConfigKey(e)) {
      problems_->Error(FieldPath(), absl::StrCat("merge: ", m.owner, " and ", owner,
                                                 " both declare ", e.type, what,
                                                 " but ask for different things; one of them "
                                                 "has to change"));
      return;
    }
    m.Absorb(e);
  }

  Problems* problems_;
  std::string workload_;
  NetworkMerge network_;
  LifecycleMerge lifecycle_;
  std::vector<Merged> instances_;
  std::map<std::string, size_t> instance_at_;
  std::map<std::string, Merged> whole_;
  std::vector<Merged> context_;
  std::map<std::string, std::string> credential_owner_;
  std::map<std::string, std::pair<std::string, std::string>> mount_owner_;
};

// ---- Relations ----

// Order sorts Kits providers-first. Ready Kits are taken workload first,
// then by ref: a deterministic order no flag or list position affects.
absl::StatusOr<std::vector<size_t>> Order(const std::vector<Member>& members,
                                          const std::vector<std::set<size_t>>& after) {
  std::vector<int> pending(members.size(), 0);
  for (const auto& edges : after) {
    for (size_t to : edges) ++pending[to];
  }
  auto rank = [&](size_t i) {
    return std::make_tuple(!members[i].workload, members[i].input->ref, i);
  };
  std::set<std::tuple<bool, std::string, size_t>> ready;
  for (size_t i = 0; i < members.size(); ++i) {
    if (pending[i] == 0) ready.insert(rank(i));
  }
  std::vector<size_t> order;
  while (!ready.empty()) {
    size_t i = std::get<2>(*ready.begin());
    ready.erase(ready.begin());
    order.push_back(i);
    for (size_t to : after[i]) {
      if (--pending[to] == 0) ready.insert(rank(to));
    }
  }
  if (order.size() != members.size()) {
    std::vector<std::string> stuck;
    for (size_t i = 0; i < members.size(); ++i) {
      if (pending[i] > 0) stuck.push_back(members[i].input->ref);
    }
    return absl::InvalidArgumentError(
        absl::StrCat("dependency cycle among ", absl::StrJoin(stuck, ", ")));
  }
  return order;
}

// Members checks each input's shape and materializes its provides: a
// bare provide takes its version from its own Kit's `version:`.
std::vector<Member> Members(const std::vector<KitInput>& kits, Problems* problems) {
  std::vector<Member> members;
  std::set<std::string> refs;
  for (const KitInput& kit : kits) {
    const Descriptor& d = kit.descriptor;
    if (!refs.insert(kit.ref).second) {
      problems->Error(FieldPath(), absl::StrCat("kit ", kit.ref, " is listed twice"));
    } else if (d.kind == KitKind::kSet) {
      problems->Error(FieldPath(), absl::StrCat("merge: ", kit.ref,
                                                " declares kind: set; a set has to be merged "
                                                "before it can contribute to one"));
    } else if (d.form != Form::kEffective || d.HasGroups()) {
      problems->Error(FieldPath(), absl::StrCat("compose: ", kit.ref,
                                                " is not effective; expand its arguments and "
                                                "select groups before composition"));
    } else {
      Member m{&kit, {}, d.kind == KitKind::kWorkload};
      for (Provide p : d.provides) {
        if (p.version.empty() && !d.version.empty()) p.version = d.version;
        m.provides.push_back(std::move(p));
      }
      members.push_back(std::move(m));
    }
  }
  return members;
}

// Graph is who provides each name and, per Kit, the Kits that must come
// after it.
struct Graph {
  std::map<std::string, size_t> provider;
  std::vector<std::set<size_t>> after;

  // ProvidedByAnother reports a provider of `name` other than Kit `i`: a
  // Kit's own provide never meets its own require.
  std::optional<size_t> ProvidedByAnother(const std::string& name, size_t i) const {
    auto it = provider.find(name);
    if (it == provider.end() || it->second == i) return std::nullopt;
    return it->second;
  }
};

// Relate applies the closed-set rules and builds the ordering graph.
Graph Relate(const std::vector<Member>& members, Problems* problems) {
  Graph g;
  g.after.resize(members.size());
  // One owner per provided name, whatever the versions.
  for (size_t i = 0; i < members.size(); ++i) {
    for (const Provide& p : members[i].provides) {
      auto [it, fresh] = g.provider.emplace(p.name, i);
      if (!fresh && it->second != i) {
        problems->Error(FieldPath(), absl::StrCat(members[it->second].input->ref, " and ",
                                                  members[i].input->ref, " both provide ",
                                                  ShortName(p.name), "; one name has one owner"));
      }
    }
  }
  for (size_t i = 0; i < members.size(); ++i) {
    const Descriptor& d = members[i].input->descriptor;
    const std::string& ref = members[i].input->ref;
    for (const Requirement& r : d.requirements) {
      std::optional<size_t> p = g.ProvidedByAnother(r.name, i);
      if (!p) {
        problems->Error(FieldPath(), absl::StrCat(ref, " requires ", Quote(r.text),
                                                  ", which no other kit in the composition "
                                                  "provides"));
      } else if (!SatisfiedBy(members[*p], r)) {
        problems->Error(FieldPath(), absl::StrCat(ref, " requires ", Quote(r.text), ", but ",
                                                  members[*p].input->ref, " provides ",
                                                  Versions(members[*p], r.name)));
      } else {
        g.after[*p].insert(i);
      }
    }
    // An absent provider is fine; a present one must fit, and then it
    // orders like a requirement.
    for (const Requirement& r : d.integrates) {
      std::optional<size_t> p = g.ProvidedByAnother(r.name, i);
      if (!p) continue;
      if (!SatisfiedBy(members[*p], r)) {
        problems->Error(FieldPath(), absl::StrCat(ref, " integrates ", Quote(r.text), ", but ",
                                                  members[*p].input->ref, " provides ",
                                                  Versions(members[*p], r.name)));
      } else {
        g.after[*p].insert(i);
      }
    }
    for (const std::string& name : d.conflicts) {
      auto it = g.provider.find(name);
      if (it != g.provider.end()) {
        problems->Error(FieldPath(),
                        absl::StrCat(ref, " conflicts with ", ShortName(name), ", which ",
                                     members[it->second].input->ref, " provides"));
      }
    }
  }
  return g;
}

// UniqueStrings collects strings in first-seen order.
class UniqueStrings {
 public:
  void Add(const std::string& key, const std::string& text) {
    if (seen_.insert(key).second) list_.items.push_back(Value::String(text));
  }
  void SetOn(Value* doc, const char* field) const {
    if (!list_.items.empty()) doc->Set(field, list_);
  }

 private:
  std::set<std::string> seen_;
  Value list_ = Value::List();
};

// MergedDocument merges every declaration in composition order. Display
// metadata and the fallback version are the workload's.
Value MergedDocument(const std::vector<Member>& members, const std::vector<size_t>& order,
                     const Graph& g, Problems* problems) {
  const Descriptor* base = nullptr;
  std::string base_ref;
  for (const Member& m : members) {
    if (!m.workload) continue;
    base = &m.input->descriptor;
    base_ref = m.input->ref;
  }
  Value doc = Value::Map();
  doc.Set("schemaVersion", Value::String("3"));
  doc.Set("kind", Value::String("workload"));
  for (const auto& [key, value] :
       std::vector<std::pair<const char*, std::string>>{{"displayName", base->display_name},
                                                        {"author", base->author},
                                                        {"description", base->description},
                                                        {"sourceUrl", base->source_url},
                                                        {"iconUrl", base->icon_url},
                                                        {"version", base->version}}) {
    if (!value.empty()) doc.Set(key, Value::String(value));
  }
  std::set<std::string> licenses;
  UniqueStrings provides, requirements, integrates, conflicts;
  CapabilityMerge capabilities(problems, base_ref);
  for (size_t i : order) {
    const Member& m = members[i];
    const Descriptor& d = m.input->descriptor;
    licenses.insert(d.licenses.begin(), d.licenses.end());
    for (const Provide& p : m.provides) {
      provides.Add(absl::StrCat(p.name, "@", p.version), ProvideText(p));
    }
    // Relations another Kit meets inside the composition are dropped.
    for (const Requirement& r : d.requirements) {
      if (!g.ProvidedByAnother(r.name, i)) requirements.Add(r.text, r.text);
    }
    for (const Requirement& r : d.integrates) {
      if (!g.ProvidedByAnother(r.name, i)) integrates.Add(r.text, r.text);
    }
    for (const std::string& c : d.conflicts) conflicts.Add(c, c);
    for (const CapabilityItem& item : d.capabilities) {
      capabilities.Add(std::get<CapabilityEntry>(item), m.input->ref);
    }
  }
  if (!licenses.empty()) doc.Set("licenses", StringList({licenses.begin(), licenses.end()}));
  provides.SetOn(&doc, "provides");
  requirements.SetOn(&doc, "requires");
  integrates.SetOn(&doc, "integrates");
  conflicts.SetOn(&doc, "conflicts");
  Value merged = capabilities.Result();
  if (!merged.items.empty()) doc.Set("capabilities", std::move(merged));
  return doc;
}

}  // namespace

absl::StatusOr<Composition> Compose(const std::vector<KitInput>& kits) {
  constexpr absl::string_view kWhat = "cannot compose";
  Problems problems;
  std::vector<Member> members = Members(kits, &problems);
  if (!problems.ok()) return problems.ToStatus(kWhat);
  std::vector<const Member*> workloads;
  for (const Member& m : members) {
    if (m.workload) workloads.push_back(&m);
  }
  if (workloads.empty()) {
    return absl::InvalidArgumentError(
        "cannot compose: a composition has exactly one workload, and none of the kits is one");
  }
  if (workloads.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot compose: merge: ", workloads[0]->input->ref, " and ", workloads[1]->input->ref,
        " are both workload kits; a composition has exactly one base"));
  }
  Graph graph = Relate(members, &problems);
  if (!problems.ok()) return problems.ToStatus(kWhat);
  absl::StatusOr<std::vector<size_t>> order = Order(members, graph.after);
  if (!order.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(kWhat, ": ", order.status().message()));
  }
  Value doc = MergedDocument(members, *order, graph, &problems);
  if (!problems.ok()) return problems.ToStatus(kWhat);

  // Judge the whole again: cross-entry rules now span Kits.
  absl::StatusOr<Descriptor> merged = DescriptorFromDocument(std::move(doc), Form::kEffective);
  if (!merged.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(kWhat, ": the merged descriptor is invalid: ", merged.status().message()));
  }
  Composition out;
  for (size_t i : *order) out.order.push_back(members[i].input->ref);
  out.merged = *std::move(merged);
  return out;
}

}  // namespace airlock::kit
