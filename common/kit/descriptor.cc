#include "common/kit/descriptor.h"

#include <re2/re2.h>

#include <algorithm>
#include <functional>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/kit/internal/fields.h"
#include "common/kit/problems.h"
#include "common/kit/references.h"

namespace airlock::kit {
namespace {

using internal::Fields;
using internal::IsLiteral;
using internal::ScalarText;

// IsIdentifier: ^[A-Za-z_][A-Za-z0-9_]*$, the grammar of arg names, env
// names and build-arg names alike.
bool IsIdentifier(absl::string_view s) {
  if (s.empty() || !(absl::ascii_isalpha(s[0]) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return absl::ascii_isalnum(c) || c == '_'; });
}

bool IsSha256Digest(absl::string_view s) {
  static const RE2* kDigest = new RE2("^sha256:[0-9a-f]{64}$");
  return RE2::FullMatch(re2::StringPiece(s.data(), s.size()), *kDigest);
}

// IsHttpsUrl: scheme https (case-insensitive, as URL parsers fold it), a
// non-empty host, and no whitespace or control characters anywhere.
bool IsHttpsUrl(absl::string_view url) {
  if (std::any_of(url.begin(), url.end(),
                  [](char c) { return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f; })) {
    return false;
  }
  constexpr absl::string_view kScheme = "https://";
  if (url.size() < kScheme.size() ||
      absl::AsciiStrToLower(url.substr(0, kScheme.size())) != kScheme) {
    return false;
  }
  absl::string_view authority = url.substr(kScheme.size());
  authority = authority.substr(0, authority.find_first_of("/?#"));
  size_t at = authority.rfind('@');
  if (at != absl::string_view::npos) authority.remove_prefix(at + 1);
  absl::string_view host = authority;
  if (!host.empty() && host[0] == '[') {
    host = host.substr(0, host.find(']') + 1);
  } else {
    host = host.substr(0, host.find(':'));
  }
  return !host.empty();
}

// IsRegistryReference checks the docker reference grammar:
// [domain[:port]/]path[:tag][@sha256:hex].
bool IsRegistryReference(absl::string_view ref) {
  static const RE2* kComponent = new RE2("[a-z0-9]+(?:(?:[._]|__|[-]*)[a-z0-9]+)*");
  static const RE2* kDomain = new RE2(
      "(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
      "(?:\\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*(?::[0-9]+)?");
  static const RE2* kTag = new RE2("[\\w][\\w.-]{0,127}");
  absl::string_view name = ref;
  size_t at = name.find('@');
  if (at != absl::string_view::npos) {
    if (!IsSha256Digest(name.substr(at + 1))) return false;
    name = name.substr(0, at);
  }
  size_t colon = name.rfind(':');
  size_t slash = name.rfind('/');
  if (colon != absl::string_view::npos && (slash == absl::string_view::npos || colon > slash)) {
    absl::string_view tag = name.substr(colon + 1);
    if (!RE2::FullMatch(re2::StringPiece(tag.data(), tag.size()), *kTag)) return false;
    name = name.substr(0, colon);
  }
  if (name.empty() || name.size() > 255) return false;
  std::vector<absl::string_view> parts = absl::StrSplit(name, '/');
  size_t first = 0;
  if (parts.size() > 1 &&
      (parts[0].find_first_of(".:") != absl::string_view::npos || parts[0] == "localhost")) {
    if (!RE2::FullMatch(re2::StringPiece(parts[0].data(), parts[0].size()), *kDomain)) {
      return false;
    }
    first = 1;
  }
  for (size_t i = first; i < parts.size(); ++i) {
    if (!RE2::FullMatch(re2::StringPiece(parts[i].data(), parts[i].size()), *kComponent)) {
      return false;
    }
  }
  return true;
}

class TopLevelDecoder {
 public:
  TopLevelDecoder(const Value& doc, Form form, Problems* problems, Descriptor* d)
      : doc_(doc), form_(form), problems_(problems), d_(d), f_(doc, FieldPath(), problems) {}

  void Run() {
    if (!f_.is_map()) return;
    SchemaVersion();
    Kind();
    Display();
    Version();
    f_.StringList("licenses", &d_->licenses);
    Args();  // before anything that asks which phase an arg resolves in
    Relations();
    Content();
    Capabilities();
    f_.Done();
    References();
  }

 private:
  void SchemaVersion() {
    const Value* v = f_.Take("schemaVersion");
    if (v == nullptr) {
      problems_->Error(f_.At("schemaVersion"), "schemaVersion is required and must be \"3\"");
    } else if (!v->is_string()) {
      problems_->Error(f_.At("schemaVersion"),
                       absl::StrCat("schemaVersion must be the string \"3\", got ",
                                    KindName(v->kind), " ", v->text, "; quote it"));
    } else if (v->text != "3") {
      problems_->Error(f_.At("schemaVersion"),
                       absl::StrCat("schemaVersion must be \"3\", got ", Quote(v->text)));
    }
  }

  void Kind() {
    std::string kind;
    if (!f_.String("kind", &kind)) {
      if (!f_.Has("kind")) problems_->Error(f_.At("kind"), "kind is required");
      return;
    }
    if (kind == "workload") {
      d_->kind = KitKind::kWorkload;
    } else if (kind == "mixin") {
      d_->kind = KitKind::kMixin;
    } else if (kind == "set") {
      d_->kind = KitKind::kSet;
      if (form_ != Form::kAuthored) {
        problems_->Error(f_.At("kind"),
                         "kind: set never appears in a published descriptor; publishing "
                         "derives workload or mixin from the listed kits");
      }
    } else if (kind == "sandbox" && form_ != Form::kAuthored) {
      // Older published Kits used this spelling; consumers may accept it.
      d_->kind = KitKind::kWorkload;
      d_->legacy_sandbox_kind = true;
    } else if (kind == "sandbox") {
      problems_->Error(f_.At("kind"),
                       "kind \"sandbox\" is the old spelling of \"workload\"; write workload");
    } else {
      problems_->Error(f_.At("kind"), absl::StrCat("kind must be \"workload\", \"mixin\", or "
                                                   "\"set\", got ",
                                                   Quote(kind)));
    }
  }

  void Display() {
    f_.String("displayName", &d_->display_name);
    f_.String("author", &d_->author);
    f_.String("description", &d_->description);
    f_.String("sourceUrl", &d_->source_url);
    if (f_.String("iconUrl", &d_->icon_url) && !d_->icon_url.empty() && IsLiteral(d_->icon_url) &&
        !IsHttpsUrl(d_->icon_url)) {
      problems_->Error(f_.At("iconUrl"), absl::StrCat("iconUrl ", Quote(d_->icon_url),
                                                      " must be an absolute https URL"));
    }
  }

  void Version() {
    if (!f_.String("version", &d_->version)) return;
    d_->version = std::string(absl::StripAsciiWhitespace(d_->version));
    if (d_->version.empty()) return;  // no fallback version
    if (HasArgRef(d_->version)) {
      if (form_ != Form::kAuthored) {
        problems_->Error(f_.At("version"), "version must be literal once published");
      }
      return;
    }
    if (!IsVersion(d_->version)) {
      problems_->Error(f_.At("version"),
                       absl::StrCat("version ", Quote(d_->version),
                                    " is not a version (digits, then dot-separated segments of "
                                    "letters, digits and '-'; no \"v\" prefix)"));
    }
  }

  // Texts reads one relations list, refusing arg references where only
  // `provides` may hold them.
  std::vector<std::pair<std::string, FieldPath>> Texts(absl::string_view key) {
    std::vector<std::pair<std::string, FieldPath>> out;
    const Value* list = f_.List(key);
    if (list == nullptr) return out;
    for (size_t i = 0; i < list->items.size(); ++i) {
      FieldPath at = f_.At(key).Index(i);
      std::string text;
      if (!ScalarText(list->items[i], at, problems_, &text)) continue;
      text = std::string(absl::StripAsciiWhitespace(text));
      if (key != "provides" && HasArgRef(text)) {
        problems_->Error(at, absl::StrCat(key, " entry ", Quote(text),
                                          ": arg references are not allowed in ", key));
        continue;
      }
      out.emplace_back(std::move(text), at);
    }
    return out;
  }

  void Relations() {
    for (auto& [text, at] : Texts("provides")) {
      if (HasArgRef(text)) {
        // Expanded at publish, so only a build-phase arg can fill it; the
        // value is judged then.
        if (form_ != Form::kAuthored) {
          problems_->Error(
              at, absl::StrCat("provides entry ", Quote(text), " must be literal once published"));
        }
        for (const Reference& r : FindArgRefs(text)) {
          auto arg = d_->args.find(r.name);
          if (form_ == Form::kAuthored && arg != d_->args.end() && !arg->second.build_phase()) {
            problems_->Error(at,
                             absl::StrCat("provides entry ", Quote(text), " names ", Quote(r.name),
                                          ", which resolves at create, but provides are "
                                          "expanded at publish; give the arg a buildArg"));
          }
        }
        d_->provides.push_back(Provide{text, "", ""});
        continue;
      }
      absl::StatusOr<Provide> p = ParseProvide(text);
      if (!p.ok()) {
        problems_->Error(at,
                         absl::StrCat("provides entry ", Quote(text), ": ", p.status().message()));
        continue;
      }
      if (form_ == Form::kAuthored && IsReservedNamespace(p->name)) {
        problems_->Error(
            at, absl::StrCat("provides entry ", Quote(text), " is in the ", p->name.substr(0, 4),
                             " namespace, which publishing fills from the image's "
                             "package database; do not author it"));
      }
      if (form_ != Form::kAuthored && p->version.empty() && d_->version.empty()) {
        problems_->Error(at, absl::StrCat("provides entry ", Quote(text),
                                          " has no version: add @<version> here or a top-level "
                                          "version: field"));
      }
      d_->provides.push_back(*std::move(p));
    }
    for (absl::string_view key : {"requires", "integrates"}) {
      std::vector<Requirement>& out = key == "requires" ? d_->requirements : d_->integrates;
      for (auto& [text, at] : Texts(key)) {
        absl::StatusOr<Requirement> r = ParseRequirement(text);
        if (!r.ok()) {
          problems_->Error(at,
                           absl::StrCat(key, " entry ", Quote(text), ": ", r.status().message()));
          continue;
        }
        out.push_back(*std::move(r));
      }
    }
    for (auto& [text, at] : Texts("conflicts")) {
      absl::StatusOr<std::string> name = ParseConflict(text);
      if (!name.ok()) {
        problems_->Error(
            at, absl::StrCat("conflicts entry ", Quote(text), ": ", name.status().message()));
        continue;
      }
      d_->conflicts.push_back(*std::move(name));
    }
  }

  void Args() {
    const Value* args = f_.Map("args");
    if (args == nullptr) return;
    // Sorted, so problems come out in a stable order.
    std::vector<const std::pair<std::string, Value>*> sorted;
    for (const auto& field : args->fields) sorted.push_back(&field);
    std::sort(sorted.begin(), sorted.end(),
              [](const auto* a, const auto* b) { return a->first < b->first; });
    for (const auto* field : sorted) {
      const std::string& name = field->first;
      FieldPath at = f_.At("args").Key(name);
      if (!IsIdentifier(name)) {
        problems_->Error(at, "invalid arg name");
        continue;
      }
      Fields af(field->second, at, problems_);
      Arg a;
      std::string s;
      if (af.String("default", &s)) a.default_value = s;
      af.Bool("required", &a.required);
      af.String("description", &a.description);
      af.StringList("enum", &a.enum_values);
      if (af.String("pattern", &s)) {
        a.pattern = s;
        RE2 re(absl::StrCat("^(?:", s, ")$"), RE2::Quiet);
        if (!re.ok())
          problems_->Error(af.At("pattern"), absl::StrCat("invalid pattern: ", re.error()));
      }
      if (af.String("env", &a.env) && !a.env.empty() && !IsIdentifier(a.env)) {
        problems_->Error(af.At("env"),
                         absl::StrCat("env ", Quote(a.env), " is not a valid env var name"));
      }
      if (af.String("buildArg", &a.build_arg) && !a.build_arg.empty() &&
          !IsIdentifier(a.build_arg)) {
        problems_->Error(af.At("buildArg"), absl::StrCat("buildArg ", Quote(a.build_arg),
                                                         " is not a valid build-arg name"));
      }
      af.Done();
      if (a.required && a.default_value) {
        problems_->Error(at, "required and default are mutually exclusive");
      }
      if (!a.enum_values.empty() && a.pattern) {
        problems_->Error(at, "enum and pattern are mutually exclusive");
      }
      if (!a.env.empty() && a.build_phase()) {
        problems_->Error(at,
                         "env and buildArg are mutually exclusive; an arg resolves in one phase");
      }
      d_->args.emplace(name, std::move(a));
    }
  }

  // Content reads the recipe. An empty `build:` or `dockerfile:` states
  // no recipe, as the spec's decoder reads an empty optional string.
  void Content() {
    std::vector<absl::string_view> stated;
    for (absl::string_view key : {"build", "dockerfile", "kits"}) {
      const Value* v = doc_.Find(key);
      if (v != nullptr && !(key != "kits" && v->is_string() && v->text.empty())) {
        stated.push_back(key);
      }
    }
    if (stated.size() > 1) {
      problems_->Error(f_.At(stated[1]),
                       absl::StrCat(absl::StrJoin(stated, " and "),
                                    " are mutually exclusive; a Kit's content is one recipe or "
                                    "one list of kits"));
    }
    f_.String("build", &d_->build);
    if (f_.String("dockerfile", &d_->dockerfile) && !d_->dockerfile.empty()) {
      std::string clean = internal::CleanPath(d_->dockerfile);
      if (d_->dockerfile.empty() || clean[0] == '/' || clean == ".." ||
          absl::StartsWith(clean, "../")) {
        problems_->Error(
            f_.At("dockerfile"),
            absl::StrCat("dockerfile ", Quote(d_->dockerfile),
                         " must be a relative path inside the descriptor's directory"));
      }
    }
    if (f_.Has("kits")) Kits();
    if (d_->kind == KitKind::kSet && !f_.Has("kits")) {
      problems_->Error(f_.At("kits"), "a set lists its kits under kits:");
    }
  }

  void Kits() {
    const Value* list = f_.List("kits");
    if (list == nullptr) return;
    if (list->items.empty()) {
      problems_->Error(f_.At("kits"), "kits: is present but empty; list at least one kit");
    }
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < list->items.size(); ++i) {
      FieldPath at = f_.At("kits").Index(i);
      Fields kf(list->items[i], at, problems_);
      if (!kf.is_map()) continue;
      KitEntry k;
      if (!kf.String("ref", &k.ref) || absl::StripAsciiWhitespace(k.ref).empty()) {
        problems_->Error(at.Key("ref"), "ref is required");
      } else {
        CheckKitRef(k.ref, at.Key("ref"));
        auto [it, fresh] = seen.emplace(k.ref, i);
        if (!fresh) {
          problems_->Error(at.Key("ref"),
                           absl::StrCat(Quote(k.ref), " already listed at kits[", it->second, "]"));
        }
      }
      // An empty digest pins nothing: authored, that is no pin yet.
      bool digest_read = kf.String("digest", &k.digest);
      if (digest_read && !k.digest.empty()) {
        if (!IsSha256Digest(k.digest)) {
          problems_->Error(at.Key("digest"),
                           absl::StrCat("digest ", Quote(k.digest), " is not sha256:<64 hex>"));
        }
        size_t in_ref = k.ref.find('@');
        if (in_ref != std::string::npos && k.ref.substr(in_ref + 1) != k.digest) {
          problems_->Error(at.Key("digest"), absl::StrCat("digest ", Quote(k.digest),
                                                          " disagrees with ref ", Quote(k.ref)));
        }
      } else if (form_ != Form::kAuthored && (digest_read || !kf.Has("digest"))) {
        problems_->Error(at.Key("digest"), "digest is required once published");
      }
      if (const Value* args = kf.Map("args")) {
        for (const auto& [name, value] : args->fields) {
          if (!IsIdentifier(name)) {
            problems_->Error(at.Key("args").Key(name), "invalid arg name");
            continue;
          }
          std::string s;
          if (ScalarText(value, at.Key("args").Key(name), problems_, &s)) k.args[name] = s;
        }
      }
      kf.Done();
      d_->kits.push_back(std::move(k));
    }
  }

  void CheckKitRef(const std::string& ref, const FieldPath& at) {
    auto bad = [&](absl::string_view why) {
      problems_->Error(at, absl::StrCat("ref ", Quote(ref), " ", why));
    };
    std::vector<Reference> refs = FindArgRefs(ref);
    // Whitespace inside a ${{ kit.args.x }} reference is the reference's.
    std::string outside;
    size_t pos = 0;
    for (const Reference& r : refs) {
      outside += ref.substr(pos, r.begin - pos);
      pos = r.end;
    }
    outside += ref.substr(pos);
    if (std::any_of(outside.begin(), outside.end(), absl::ascii_isspace)) {
      return bad("contains whitespace");
    }
    if (absl::StartsWith(ref, "git+")) {
      return bad("is a git reference; a set's kits are registry references");
    }
    if (ref[0] == '.' || ref[0] == '/') {
      return bad("is a local path; a set's kits are registry references");
    }
    if (absl::StrContains(ref, "://")) return bad("is a URL; a set's kits are registry references");
    for (const Reference& r : refs) {
      auto arg = d_->args.find(r.name);
      if (arg != d_->args.end() && !arg->second.build_phase()) {
        problems_->Error(at, absl::StrCat("ref names ", Quote(r.name),
                                          ", which resolves at create, but a set's kits are "
                                          "resolved at build; give the arg a buildArg"));
      }
    }
    if (!refs.empty()) {
      if (form_ != Form::kAuthored) bad("must be literal once published");
      return;  // judged after build-phase expansion
    }
    if (!IsRegistryReference(ref)) bad("is not a valid registry reference");
  }

  void Capabilities() {
    const Value* list = f_.List("capabilities");
    if (list == nullptr) return;
    CapabilityRules rules;
    rules.mixin = d_->kind == KitKind::kMixin;
    // Published descriptors are judged as declarations only: cross-entry
    // checks wait for the effective form.
    rules.cross_entry = form_ != Form::kPublished;
    DecodeCapabilities(*list, f_.At("capabilities"), rules, problems_, &d_->capabilities);
  }

  // References checks every string and key of the document for Kit
  // placeholders: each arg reference names a declared arg, no build-phase
  // reference survives publishing, nothing survives into the effective
  // form, and environment references appear only in capability config
  // values (keys there are refused by the capability decoder).
  void References() {
    std::set<std::string> reported;
    auto check = [&](const FieldPath& at, const std::string& s, bool in_config, bool /*is_key*/) {
      for (const Reference& ref : FindArgRefs(s)) {
        auto arg = d_->args.find(ref.name);
        if (arg == d_->args.end()) {
          problems_->Error(at, absl::StrCat("descriptor references ${{ kit.args.", ref.name,
                                            " }} but declares no arg ", Quote(ref.name)));
        } else if (form_ == Form::kEffective) {
          problems_->Error(at, absl::StrCat("effective descriptor still references ${{ kit.args.",
                                            ref.name, " }}"));
        } else if (form_ == Form::kPublished && arg->second.build_phase()) {
          problems_->Error(
              at, absl::StrCat("published descriptor still references ${{ kit.args.", ref.name,
                               " }}, which resolves at build; expansion did not "
                               "reach it"));
        }
      }
      if (!HasEnvOpener(s)) return;
      if (form_ == Form::kEffective) {
        problems_->Error(at, "effective descriptor still references the container environment");
      } else if (!in_config) {
        problems_->Error(at, "environment references are allowed only in capability config values");
      }
      // A key inside a config is reported by the capability decoder.
    };
    Walk(doc_, FieldPath(), false, check);
  }

  using Visit =
      std::function<void(const FieldPath&, const std::string&, bool in_config, bool is_key)>;

  // Walk visits every string value and map key. `in_config` is set below
  // capabilities[i].config and capabilities[i].group.capabilities[j].config.
  static void Walk(const Value& v, const FieldPath& at, bool in_config, const Visit& visit,
                   bool under_capabilities = false, int depth = 0) {
    switch (v.kind) {
      case Value::Kind::kString:
        visit(at, v.text, in_config, /*is_key=*/false);
        return;
      case Value::Kind::kList:
        for (size_t i = 0; i < v.items.size(); ++i) {
          Walk(v.items[i], at.Index(i), in_config, visit, under_capabilities, depth + 1);
        }
        return;
      case Value::Kind::kMap:
        for (const auto& [key, child] : v.fields) {
          FieldPath child_at = at.Key(key);
          visit(child_at, key, in_config, /*is_key=*/true);
          bool capabilities = under_capabilities || (depth == 0 && key == "capabilities");
          // Depth: 0 document, 1 capabilities list, 2 item, 3 group,
          // 4 members, 5 member; config sits under an item or a member.
          bool config =
              in_config || (capabilities && key == "config" && (depth == 2 || depth == 5));
          Walk(child, child_at, config, visit, capabilities, depth + 1);
        }
        return;
      default:
        return;
    }
  }

  const Value& doc_;
  Form form_;
  Problems* problems_;
  Descriptor* d_;
  Fields f_;
};

}  // namespace

const char* KitKindName(KitKind kind) {
  switch (kind) {
    case KitKind::kWorkload:
      return "workload";
    case KitKind::kMixin:
      return "mixin";
    case KitKind::kSet:
      return "set";
  }
  return "?";
}

bool Descriptor::HasGroups() const {
  return std::any_of(capabilities.begin(), capabilities.end(), [](const CapabilityItem& item) {
    return std::holds_alternative<CapabilityGroup>(item);
  });
}

absl::StatusOr<Descriptor> DescriptorFromDocument(Value document, Form form) {
  Problems problems;
  Descriptor d;
  d.form = form;
  if (!document.is_map()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid kit descriptor: a descriptor is a mapping, got ", KindName(document.kind)));
  }
  TopLevelDecoder(document, form, &problems, &d).Run();
  if (!problems.ok()) return problems.ToStatus("invalid kit descriptor");
  d.document = std::move(document);
  return d;
}

absl::StatusOr<Descriptor> ParseDescriptor(absl::string_view text, Form form) {
  if (text.size() > kMaxDescriptorBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid kit descriptor: descriptor is ", text.size(), " bytes, over the ",
                     kMaxDescriptorBytes, " byte budget; move bulk into layers"));
  }
  absl::StatusOr<Value> doc = DecodeDocument(text);
  if (!doc.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("invalid kit descriptor: ", doc.status().message()));
  }
  absl::StatusOr<Descriptor> d = DescriptorFromDocument(*std::move(doc), form);
  if (d.ok() && text.size() > kAdvisoryDescriptorBytes) {
    d->warnings.push_back(absl::StrCat("descriptor is ", text.size(),
                                       " bytes; the advisory budget is ",
                                       kAdvisoryDescriptorBytes));
  }
  return d;
}

}  // namespace airlock::kit
