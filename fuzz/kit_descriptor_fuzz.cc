// Kit descriptors (common/kit): the YAML/JSON document decoder, the
// strict descriptor parser in each form, the grant surface, the widening
// gate and composition. A document's canonical JSON decodes to a document
// with the same canonical JSON; a descriptor that parses in a form parses
// again from its canonical JSON in that form, with the same JSON and a
// surface the gate finds neither wider nor narrower. Adding a runtime
// allow of a fresh host to a parsed descriptor never reads as a narrowing
// nor as a removed deny, and reads as a new allow exactly when no granted
// allow covers the host. Through the create pipeline, composing a Kit
// alone, beside an empty mixin, or (a mixin) twice under two refs either
// is refused or grants what the Kit alone does; two copies of a workload
// are always refused.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "common/kit/capabilities.h"
#include "common/kit/compose.h"
#include "common/kit/descriptor.h"
#include "common/kit/document.h"
#include "common/kit/effective.h"
#include "common/kit/surface.h"
#include "fuzz/fuzz_check.h"

namespace {

using airlock::kit::Compose;
using airlock::kit::Composition;
using airlock::kit::Descriptor;
using airlock::kit::Diff;
using airlock::kit::Form;
using airlock::kit::KitInput;
using airlock::kit::KitKind;
using airlock::kit::ProjectSurface;
using airlock::kit::Surface;
using airlock::kit::SurfaceDiff;
using airlock::kit::ToCanonicalJson;
using airlock::kit::Value;

constexpr char kAddedHost[] = "fuzz-added.invalid";

// SameGrants: the gate sees no change between the two, either way.
bool SameGrants(const Surface& a, const Surface& b) {
  SurfaceDiff ab = Diff(a, b), ba = Diff(b, a);
  return !ab.widens() && ab.narrowed.empty() && !ba.widens() && ba.narrowed.empty();
}

// CheckCanonicalJson: the descriptor's canonical JSON is a fixed point of
// parsing in the same form, and grants the same.
void CheckCanonicalJson(const Descriptor& d, Form form) {
  std::string json = ToCanonicalJson(d.document);
  // Aliases expand and '<' '>' '&' grow sixfold: the JSON may be over a
  // budget the YAML was within.
  if (json.size() > airlock::kit::kMaxDescriptorBytes) return;
  auto again = airlock::kit::ParseDescriptor(json, form);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(ToCanonicalJson(again->document) == json);
  FUZZ_CHECK(again->kind == d.kind);
  FUZZ_CHECK(SameGrants(ProjectSurface(d), ProjectSurface(*again)));
}

// WithAddedHost is `document` with kAddedHost appended to the runtime
// allow list of its top-level network policy, or with a network-policy@1
// entry allowing only it when it has none; false when the document's
// shape leaves no place for it.
bool WithAddedHost(Value document, Value* out) {
  Value* caps = document.Find("capabilities");
  if (caps == nullptr) {
    document.Set("capabilities", Value::List());
    caps = document.Find("capabilities");
  }
  if (!caps->is_list()) return false;
  Value* policy = nullptr;
  for (Value& item : caps->items) {
    const Value* type = item.is_map() ? item.Find("type") : nullptr;
    if (type != nullptr && type->is_string() &&
        absl::StartsWith(type->text, "com.docker.sandbox/network-policy@")) {
      policy = &item;
      break;
    }
  }
  if (policy == nullptr) {
    Value entry = Value::Map();
    entry.Set("type", Value::String(std::string(airlock::kit::kNetworkPolicyV1)));
    entry.Set("config", Value::Map());
    caps->items.push_back(std::move(entry));
    policy = &caps->items.back();
  }
  Value* config = policy->Find("config");
  if (config == nullptr || config->is_null()) {
    policy->Set("config", Value::Map());
    config = policy->Find("config");
  }
  if (!config->is_map()) return false;
  Value* runtime = config->Find("runtime");
  if (runtime == nullptr || runtime->is_null()) {
    config->Set("runtime", Value::Map());
    runtime = config->Find("runtime");
  }
  if (!runtime->is_map()) return false;
  Value* allow = runtime->Find("allow");
  if (allow == nullptr || allow->is_null()) {
    runtime->Set("allow", Value::List());
    allow = runtime->Find("allow");
  }
  if (!allow->is_list()) return false;
  allow->items.push_back(Value::String(kAddedHost));
  *out = std::move(document);
  return true;
}

// CheckAddedHost: one more allowed host is a widening of the network
// allow list (unless already covered), never a narrowing.
void CheckAddedHost(const Descriptor& d, Form form) {
  Value document;
  if (!WithAddedHost(d.document, &document)) return;
  auto wider = airlock::kit::DescriptorFromDocument(std::move(document), form);
  if (!wider.ok()) return;
  Surface before = ProjectSurface(d);
  SurfaceDiff diff = Diff(before, ProjectSurface(*wider));
  FUZZ_CHECK(diff.narrowed.empty());
  bool new_allow = false;
  for (const auto& change : diff.widened) {
    FUZZ_CHECK(!absl::EndsWith(change.category, "deny-removed"));
    if (change.category == "network.runtime.allow") new_allow = true;
  }
  // What HostCovers treats as covering kAddedHost: everything, a wildcard
  // over .invalid, or the host itself, all without a port.
  bool covered = false;
  for (const std::string& h : before.runtime.allow_hosts) {
    if (h == "*" || h == "**" || h == "*.invalid" || h == "**.invalid" || h == kAddedHost) {
      covered = true;
    }
  }
  // Not covered, it widens: as a new allow, or, for a network policy
  // still holding arg references (projected as a service, not as hosts),
  // as a changed config.
  FUZZ_CHECK(covered ? !new_allow : diff.widens());
}

std::set<std::string> HostTypes() {
  std::set<std::string> types;
  for (absl::string_view t : airlock::kit::WellKnownTypes()) types.insert(std::string(t));
  types.insert("com.example/thing@1");
  return types;
}

// Effective takes an authored descriptor through publishing (build args
// at their defaults) and the create pipeline (create args at theirs).
absl::StatusOr<Descriptor> Effective(const Descriptor& authored) {
  auto published = airlock::kit::ExpandBuildArgs(authored, {});
  if (!published.ok()) return published.status();
  airlock::kit::CreateRequest request;
  request.host_types = HostTypes();
  request.image_env = {{"HOME", "/home/agent"}, {"WORKSPACE_DIR", "/workspace"}};
  auto kit = airlock::kit::MakeEffective(*published, request);
  if (!kit.ok()) return kit.status();
  return kit->descriptor;
}

const Descriptor& Fixed(const char* yaml) {
  auto authored = airlock::kit::ParseDescriptor(yaml);
  FUZZ_CHECK(authored.ok());
  auto effective = Effective(*authored);
  FUZZ_CHECK(effective.ok());
  return *new Descriptor(*std::move(effective));
}

const Descriptor& BaseWorkload() {
  static const Descriptor& d =
      Fixed("schemaVersion: \"3\"\nkind: workload\nversion: '1.0'\nprovides: [fuzz-base]\n");
  return d;
}

const Descriptor& EmptyMixin() {
  static const Descriptor& d = Fixed("schemaVersion: \"3\"\nkind: mixin\n");
  return d;
}

// CheckComposition composes the effective Kit with what cannot change
// what it grants.
void CheckComposition(const Descriptor& authored) {
  auto kit = Effective(authored);
  if (!kit.ok()) return;
  KitInput self{"registry.example/fuzz/kit", *kit};
  KitInput copy{"registry.example/fuzz/kit-copy", *kit};
  KitInput empty{"registry.example/fuzz/empty", EmptyMixin()};
  std::vector<KitInput> alone;
  if (kit->kind == KitKind::kWorkload) {
    alone = {self};
    FUZZ_CHECK(!Compose({self, copy}).ok());
  } else {
    alone = {KitInput{"registry.example/fuzz/base", BaseWorkload()}, self};
  }
  absl::StatusOr<Composition> one = Compose(alone);
  if (kit->kind == KitKind::kWorkload && one.ok()) {
    FUZZ_CHECK(SameGrants(ProjectSurface(*kit), ProjectSurface(one->merged)));
  }
  std::vector<KitInput> with_empty = alone;
  with_empty.push_back(empty);
  absl::StatusOr<Composition> padded = Compose(with_empty);
  FUZZ_CHECK(padded.ok() == one.ok());
  if (one.ok()) FUZZ_CHECK(SameGrants(ProjectSurface(one->merged), ProjectSurface(padded->merged)));
  if (kit->kind == KitKind::kMixin && one.ok()) {
    std::vector<KitInput> twice = alone;
    twice.push_back(copy);
    absl::StatusOr<Composition> doubled = Compose(twice);
    if (doubled.ok()) {
      FUZZ_CHECK(SameGrants(ProjectSurface(one->merged), ProjectSurface(doubled->merged)));
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  auto document = airlock::kit::DecodeDocument(input);
  if (!document.ok()) return 0;
  std::string json = ToCanonicalJson(*document);
  auto again = airlock::kit::DecodeDocument(json);
  FUZZ_CHECK(again.ok());
  FUZZ_CHECK(ToCanonicalJson(*again) == json);

  // Below the size budget, ParseDescriptor is these two steps.
  for (Form form : {Form::kAuthored, Form::kPublished, Form::kEffective}) {
    auto d = airlock::kit::DescriptorFromDocument(*document, form);
    if (!d.ok()) continue;
    FUZZ_CHECK(Diff(ProjectSurface(*d), ProjectSurface(*d)).widened.empty());
    CheckCanonicalJson(*d, form);
    CheckAddedHost(*d, form);
    if (form == Form::kAuthored) CheckComposition(*d);
  }
  return 0;
}
