#include "common/kit/effective.h"

#include <re2/re2.h>

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/kit/problems.h"
#include "common/kit/references.h"

namespace airlock::kit {
namespace {

const char* PhaseWord(ArgPhase phase) { return phase == ArgPhase::kBuild ? "build" : "create"; }

bool InPhase(const Arg& a, ArgPhase phase) {
  return a.build_phase() == (phase == ArgPhase::kBuild);
}

// ArgExpander substitutes one phase's args through a document. The other
// phase's references are left for their own pass.
class ArgExpander {
 public:
  ArgExpander(const Descriptor& d, const ArgValues& values, ArgPhase phase, Problems* problems)
      : d_(d), values_(values), phase_(phase), problems_(problems) {}

  void Document(Value* doc) {
    ExpandKeys(doc, FieldPath());
    for (auto& [key, child] : doc->fields) {
      FieldPath at = FieldPath().Key(key);
      if (key == "capabilities" && child.is_list()) {
        for (size_t i = 0; i < child.items.size(); ++i) Item(&child.items[i], at.Index(i));
      } else {
        Node(&child, at, false);
      }
    }
  }

 private:
  // Item expands one capability item. In volume@1 configs `size` and
  // `mode` stay text whatever a whole reference resolves to ("0755" and
  // "20" are not numbers there).
  void Item(Value* item, const FieldPath& at) {
    if (!item->is_map()) return Node(item, at, false);
    ExpandKeys(item, at);
    if (Value* type = item->Find("type")) Node(type, at.Key("type"), false);
    const Value* type = item->Find("type");
    bool volume = type != nullptr && type->is_string() && type->text == kVolume;
    for (auto& [key, child] : item->fields) {
      FieldPath child_at = at.Key(key);
      if (key == "type") continue;
      if (key == "config" && volume && child.is_map()) {
        ExpandKeys(&child, child_at);
        for (auto& [ck, cv] : child.fields) {
          Node(&cv, child_at.Key(ck), ck == "size" || ck == "mode");
        }
      } else if (key == "group" && child.is_map()) {
        ExpandKeys(&child, child_at);
        for (auto& [gk, gv] : child.fields) {
          if (gk == "capabilities" && gv.is_list()) {
            for (size_t j = 0; j < gv.items.size(); ++j) {
              Item(&gv.items[j], child_at.Key(gk).Index(j));
            }
          } else {
            Node(&gv, child_at.Key(gk), false);
          }
        }
      } else {
        Node(&child, child_at, false);
      }
    }
  }

  void Node(Value* v, const FieldPath& at, bool keep_text) {
    switch (v->kind) {
      case Value::Kind::kString: {
        absl::StatusOr<Substituted> s = Substitute(v->text);
        if (!s.ok()) {
          problems_->Error(at, s.status().message());
        } else if (s->changed) {
          *v = s->whole && !keep_text ? TypeWholeValue(s->text) : Value::String(s->text);
        }
        return;
      }
      case Value::Kind::kList:
        for (size_t i = 0; i < v->items.size(); ++i) Node(&v->items[i], at.Index(i), false);
        return;
      case Value::Kind::kMap:
        ExpandKeys(v, at);
        for (auto& [key, child] : v->fields) Node(&child, at.Key(key), false);
        return;
      default:
        return;
    }
  }

  // ExpandKeys substitutes map keys as text; two keys becoming one is an
  // error rather than a silent overwrite.
  void ExpandKeys(Value* map, const FieldPath& at) {
    std::set<std::string> seen;
    for (auto& field : map->fields) {
      absl::StatusOr<Substituted> s = Substitute(field.first);
      if (!s.ok()) {
        problems_->Error(at.Key(field.first), s.status().message());
        continue;
      }
      if (!seen.insert(s->text).second) {
        problems_->Error(
            at, absl::StrCat(PhaseWord(phase_), "-phase expansion collapses two keys onto ",
                             Quote(s->text)));
      }
      field.first = s->text;
    }
  }

  absl::StatusOr<Substituted> Substitute(const std::string& s) {
    absl::StatusOr<Substituted> out = SubstituteArgRefs(
        s, [&](absl::string_view name) -> absl::StatusOr<std::optional<std::string>> {
          auto arg = d_.args.find(std::string(name));
          if (arg == d_.args.end() || !InPhase(arg->second, phase_)) return std::nullopt;
          auto value = values_.find(std::string(name));
          if (value == values_.end()) {
            return absl::InvalidArgumentError(absl::StrCat(PhaseWord(phase_), "-phase kit arg ",
                                                           Quote(name), " has no resolved value"));
          }
          return value->second;
        });
    if (!out.ok() && absl::StartsWith(out.status().message(), "argument substitution")) {
      return absl::InvalidArgumentError(
          absl::StrCat(PhaseWord(phase_), "-phase ", out.status().message()));
    }
    return out;
  }

  const Descriptor& d_;
  const ArgValues& values_;
  ArgPhase phase_;
  Problems* problems_;
};

// ExpandEnvironment substitutes kit.env references in capability config
// values (the only place the published form may hold them). Values stay
// strings; a missing variable is an error, an empty one is present.
void ExpandEnvironment(Value* doc, const std::map<std::string, std::string>& env,
                       Problems* problems) {
  EnvLookup lookup = [&](absl::string_view name) -> absl::StatusOr<std::string> {
    auto it = env.find(std::string(name));
    if (it == env.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("final container environment has no variable ", Quote(name)));
    }
    // Values are not templates, and the message never quotes the value.
    if (it->second.find('\0') != std::string::npos || HasKitPlaceholder(it->second)) {
      return absl::InvalidArgumentError(
          absl::StrCat("environment variable ", Quote(name), " contains NUL or Kit placeholders"));
    }
    return it->second;
  };
  std::function<void(Value*, const FieldPath&)> values = [&](Value* v, const FieldPath& at) {
    if (v->is_string()) {
      absl::StatusOr<Substituted> s = SubstituteEnvRefs(v->text, lookup);
      if (!s.ok()) {
        problems->Error(at, s.status().message());
      } else if (s->changed) {
        v->text = s->text;
      }
    } else if (v->is_list()) {
      for (size_t i = 0; i < v->items.size(); ++i) values(&v->items[i], at.Index(i));
    } else if (v->is_map()) {
      for (auto& [key, child] : v->fields) values(&child, at.Key(key));
    }
  };
  std::function<void(Value*, const FieldPath&)> item = [&](Value* it, const FieldPath& at) {
    if (!it->is_map()) return;
    if (Value* config = it->Find("config")) values(config, at.Key("config"));
    Value* group = it->Find("group");
    Value* members = group && group->is_map() ? group->Find("capabilities") : nullptr;
    if (members && members->is_list()) {
      for (size_t j = 0; j < members->items.size(); ++j) {
        item(&members->items[j], at.Key("group").Key("capabilities").Index(j));
      }
    }
  };
  Value* caps = doc->Find("capabilities");
  if (caps == nullptr || !caps->is_list()) return;
  for (size_t i = 0; i < caps->items.size(); ++i) {
    item(&caps->items[i], FieldPath().Key("capabilities").Index(i));
  }
}

// Select keeps what the host provides. A construct (entry or group) is
// selected only when every member's type is provided; otherwise an
// optional one is skipped whole and recorded, a required one refused by
// the type's name. Selected groups are flattened in place.
Value Select(const Descriptor& d, const std::set<std::string>& host_types,
             std::vector<SkippedCapability>* skipped, Problems* problems) {
  Value doc = d.document;
  const Value* caps = d.document.Find("capabilities");
  if (caps == nullptr) return doc;
  Value selected = Value::List();
  for (size_t i = 0; i < caps->items.size(); ++i) {
    const Value& raw = caps->items[i];
    FieldPath at = FieldPath().Key("capabilities").Index(i);
    const CapabilityItem& item = d.capabilities[i];
    if (const auto* e = std::get_if<CapabilityEntry>(&item)) {
      if (host_types.count(e->type) > 0) {
        selected.items.push_back(raw);
      } else if (e->optional) {
        skipped->push_back(SkippedCapability{at.str(),
                                             e->name,
                                             {},
                                             {at.str()},
                                             absl::StrCat("this host does not provide ", e->type)});
      } else {
        problems->Error(at, absl::StrCat("kit requires capability type ", Quote(e->type),
                                         ", which this host does not provide"));
      }
      continue;
    }
    const auto& g = std::get<CapabilityGroup>(item);
    const Value& raw_members = *raw.Find("group")->Find("capabilities");
    std::vector<std::string> members, rejected, missing;
    for (size_t j = 0; j < g.members.size(); ++j) {
      std::string member_at = at.Key("group").Key("capabilities").Index(j).str();
      members.push_back(member_at);
      if (host_types.count(g.members[j].type) == 0) {
        rejected.push_back(member_at);
        missing.push_back(g.members[j].type);
      }
    }
    if (rejected.empty()) {
      for (size_t j = 0; j < raw_members.items.size(); ++j) {
        Value member = raw_members.items[j];
        if (member.Find("source") == nullptr) {
          Value source = Value::Map();
          source.Set("path", Value::String(members[j]));
          member.Set("source", std::move(source));
        }
        selected.items.push_back(std::move(member));
      }
    } else if (g.optional) {
      skipped->push_back(SkippedCapability{
          at.str(), g.name, members, rejected,
          absl::StrCat("this host does not provide ", absl::StrJoin(missing, ", "))});
    } else {
      problems->Error(
          at, absl::StrCat("required capability group ", Quote(g.name), " needs ",
                           absl::StrJoin(missing, ", "), ", which this host does not provide (",
                           absl::StrJoin(rejected, ", "), ")"));
    }
  }
  doc.Set("capabilities", std::move(selected));
  return doc;
}

// CheckExpandedSize holds expansion to the descriptor budget: values
// substituted into many places must not grow the document past it.
absl::Status CheckExpandedSize(const Value& doc) {
  size_t size = ToCanonicalJson(doc).size();
  if (size <= kMaxDescriptorBytes) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "expanded descriptor is ", size, " bytes, over the ", kMaxDescriptorBytes, " byte budget"));
}

}  // namespace

namespace {

// CheckArgValue holds one value (supplied or a default) to its arg's
// declaration: enum or pattern, and at create no Kit placeholder or NUL.
bool CheckArgValue(const std::string& name, const Arg& arg, const std::string& value,
                   ArgPhase phase, Problems* problems) {
  if (phase == ArgPhase::kCreate &&
      (HasKitPlaceholder(value) || value.find('\0') != std::string::npos)) {
    problems->Error(FieldPath(), absl::StrCat("kit arg ", Quote(name),
                                              ": values must not contain Kit placeholders or NUL"));
    return false;
  }
  if (!arg.enum_values.empty()) {
    if (std::find(arg.enum_values.begin(), arg.enum_values.end(), value) == arg.enum_values.end()) {
      std::vector<std::string> quoted;
      for (const std::string& e : arg.enum_values) quoted.push_back(Quote(e));
      problems->Error(FieldPath(),
                      absl::StrCat("kit arg ", Quote(name), ": value ", Quote(value),
                                   " is not one of [", absl::StrJoin(quoted, ", "), "]"));
      return false;
    }
  } else if (arg.pattern) {
    RE2 re(absl::StrCat("^(?:", *arg.pattern, ")$"), RE2::Quiet);
    if (!re.ok() || !RE2::FullMatch(value, re)) {
      problems->Error(FieldPath(), absl::StrCat("kit arg ", Quote(name), ": value ", Quote(value),
                                                " does not match pattern ", Quote(*arg.pattern)));
      return false;
    }
  }
  return true;
}

}  // namespace

absl::StatusOr<ArgValues> ResolveArgs(const Descriptor& d, const ArgValues& supplied,
                                      ArgPhase phase) {
  Problems problems;
  for (const auto& [name, value] : supplied) {
    auto arg = d.args.find(name);
    if (arg == d.args.end()) {
      problems.Error(FieldPath(),
                     absl::StrCat("kit arg ", Quote(name), " is not declared by this kit"));
    } else if (!InPhase(arg->second, phase)) {
      problems.Error(FieldPath(),
                     phase == ArgPhase::kCreate
                         ? absl::StrCat("kit arg ", Quote(name),
                                        " resolves at build and is already baked into this kit")
                         : absl::StrCat("kit arg ", Quote(name),
                                        " resolves at create; supply it when creating a sandbox"));
    }
  }
  ArgValues out;
  for (const auto& [name, arg] : d.args) {
    if (!InPhase(arg, phase)) continue;
    auto given = supplied.find(name);
    std::optional<std::string> value;
    if (given != supplied.end()) {
      value = given->second;
    } else if (arg.default_value) {
      value = arg.default_value;
    }
    if (!value) {
      if (arg.required) {
        problems.Error(FieldPath(), absl::StrCat("kit arg ", Quote(name),
                                                 " is required and no value was supplied"));
      }
      continue;
    }
    if (CheckArgValue(name, arg, *value, phase, &problems)) out[name] = *value;
  }
  if (!problems.ok()) return problems.ToStatus("kit args");
  return out;
}

absl::Status CheckArgValues(const Descriptor& d, const ArgValues& supplied) {
  Problems problems;
  for (const auto& [name, value] : supplied) {
    auto arg = d.args.find(name);
    if (arg == d.args.end()) continue;
    CheckArgValue(name, arg->second, value,
                  arg->second.build_phase() ? ArgPhase::kBuild : ArgPhase::kCreate, &problems);
  }
  return problems.ToStatus("kit args");
}

absl::StatusOr<Descriptor> ExpandBuildArgs(const Descriptor& authored, const ArgValues& supplied) {
  if (authored.form != Form::kAuthored) {
    return absl::FailedPreconditionError(
        "build-phase args are expanded once, on the authored form");
  }
  if (authored.kind == KitKind::kSet) {
    return absl::UnimplementedError(
        "a set has to be merged into one Kit before it can be used; set merging is not "
        "implemented");
  }
  absl::StatusOr<ArgValues> values = ResolveArgs(authored, supplied, ArgPhase::kBuild);
  if (!values.ok()) return values.status();
  Problems problems;
  Value doc = authored.document;
  ArgExpander(authored, *values, ArgPhase::kBuild, &problems).Document(&doc);
  if (!problems.ok()) return problems.ToStatus("build-phase expansion");
  if (absl::Status s = CheckExpandedSize(doc); !s.ok()) return s;
  return DescriptorFromDocument(std::move(doc), Form::kPublished);
}

absl::StatusOr<EffectiveKit> MakeEffective(const Descriptor& published,
                                           const CreateRequest& request) {
  if (published.form != Form::kPublished) {
    return absl::FailedPreconditionError(
        published.form == Form::kEffective
            ? "descriptor is already effective"
            : "sandboxes are created from published descriptors; run ExpandBuildArgs on an "
              "authored one first");
  }
  EffectiveKit out;
  absl::StatusOr<ArgValues> args = ResolveArgs(published, request.args, ArgPhase::kCreate);
  if (!args.ok()) return args.status();
  out.args = *args;

  // The final container environment: image defaults, replaced by arg
  // exports, replaced by explicit overrides. The host's own environment
  // is never read.
  std::map<std::string, std::string> env = request.image_env;
  for (const auto& [name, value] : out.args) {
    const Arg& arg = published.args.at(name);
    if (arg.env.empty()) continue;
    out.env_exports[arg.env] = value;
    env[arg.env] = value;
  }
  for (const auto& [name, value] : request.env_overrides) env[name] = value;

  Problems problems;
  Value doc = published.document;
  ArgExpander(published, out.args, ArgPhase::kCreate, &problems).Document(&doc);
  if (problems.ok()) ExpandEnvironment(&doc, env, &problems);
  if (!problems.ok()) return problems.ToStatus("create-phase expansion");
  if (absl::Status s = CheckExpandedSize(doc); !s.ok()) return s;

  // Every declaration validates after expansion, including optional
  // entries and group members selection is about to reject.
  absl::StatusOr<Descriptor> expanded = DescriptorFromDocument(std::move(doc), Form::kEffective);
  if (!expanded.ok()) return expanded.status();

  Value selected = Select(*expanded, request.host_types, &out.skipped, &problems);
  if (!problems.ok()) return problems.ToStatus("capability selection");
  if (!expanded->HasGroups() && out.skipped.empty()) {
    out.descriptor = *std::move(expanded);
    return out;
  }
  // Flattening can bring a credential and its network policy into one
  // block: judge the selected whole, cross-entry rules included.
  absl::StatusOr<Descriptor> effective =
      DescriptorFromDocument(std::move(selected), Form::kEffective);
  if (!effective.ok()) return effective.status();
  out.descriptor = *std::move(effective);
  return out;
}

}  // namespace airlock::kit
