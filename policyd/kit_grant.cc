#include "policyd/kit_grant.h"

#include <cmath>
#include <ctime>
#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "common/kit/capabilities.h"
#include "common/kit/document.h"
#include "common/policy/rule_wire.h"

namespace airlock::policyd {

namespace pb = airlock::policy::v1;
using kit::CapabilityEntry;
using kit::Phase;

namespace {

std::vector<const CapabilityEntry*> Entries(const kit::Descriptor& d) {
  std::vector<const CapabilityEntry*> out;
  for (const auto& item : d.capabilities) {
    if (const auto* e = std::get_if<CapabilityEntry>(&item)) out.push_back(e);
  }
  return out;
}

// MemoryMib reads a resources@1 size ("8g", "512Mi", "1.5G", bytes when
// unitless), rounding up to whole MiB.
absl::StatusOr<uint64_t> MemoryMib(const std::string& text) {
  std::string t = absl::AsciiStrToLower(absl::StripAsciiWhitespace(text));
  size_t split = t.find_first_not_of("0123456789.");
  double number = 0;
  if (!absl::SimpleAtod(t.substr(0, split), &number) || number < 0) {
    return absl::InvalidArgumentError(absl::StrCat("resources memory \"", text, "\" is not a size"));
  }
  std::string unit = split == std::string::npos ? "" : t.substr(split);
  unit = std::string(absl::StripAsciiWhitespace(unit));
  double scale = 1;
  if (!unit.empty()) {
    switch (unit[0]) {
      case 'k': scale = 1024.0; break;
      case 'm': scale = 1024.0 * 1024; break;
      case 'g': scale = 1024.0 * 1024 * 1024; break;
      case 't': scale = 1024.0 * 1024 * 1024 * 1024; break;
      case 'b': break;
      default:
        return absl::InvalidArgumentError(absl::StrCat("resources memory \"", text, "\" has an unknown unit"));
    }
  }
  return static_cast<uint64_t>(std::ceil(number * scale / (1024.0 * 1024)));
}

// CheckGuestPath refuses a volume or file path that would cover the
// guest's own machinery ("/", /proc, /sys, /dev, /run/sandbox) or that
// climbs ("..").
absl::Status CheckGuestPath(const char* what, const std::string& path) {
  std::string p = path;
  while (p.size() > 1 && p.back() == '/') p.pop_back();
  bool bad = p.empty() || p[0] != '/' || p == "/" || absl::StrContains(p, "/../") ||
             absl::EndsWith(p, "/..") || absl::StrContains(p, "/./") || absl::EndsWith(p, "/.");
  for (const char* reserved : {"/proc", "/sys", "/dev", "/run/sandbox", "/boot"}) {
    bad |= p == reserved || absl::StartsWith(p, std::string(reserved) + "/");
  }
  if (bad) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kit ", what, " path \"", path, "\" is not allowed: it must be absolute, without . or "
        "..,  and not /, /proc, /sys, /dev, /boot or /run/sandbox"));
  }
  return absl::OkStatus();
}

std::string NewHoldId() {
  static std::mt19937_64 rng(std::random_device{}());
  return absl::StrCat("h-", absl::Hex(rng() & 0xffffffffffULL, absl::kZeroPad10));
}

void AddList(google::protobuf::Map<std::string, pb::HostList>* map, const char* phase,
             const std::vector<std::string>& items) {
  if (items.empty()) return;
  pb::HostList& list = (*map)[phase];
  for (const auto& i : items) list.add_items(i);
}

std::vector<std::string> GetList(const google::protobuf::Map<std::string, pb::HostList>& map,
                                 const char* phase) {
  auto it = map.find(phase);
  if (it == map.end()) return {};
  return {it->second.items().begin(), it->second.items().end()};
}

pb::CompiledPolicy RulesProto(const std::vector<RuleSpec>& specs) {
  pb::CompiledPolicy out;
  for (const auto& s : specs) policy::SpecToProto(s, out.add_rules());
  return out;
}

std::vector<RuleSpec> RulesFromBlob(const std::string& blob) {
  pb::CompiledPolicy p;
  std::vector<RuleSpec> out;
  if (!p.ParseFromString(blob)) return out;
  for (const auto& r : p.rules()) out.push_back(policy::SpecFromProto(r));
  return out;
}

absl::Status CheckPhase(const std::string& phase) {
  if (phase == "install" || phase == "runtime") return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("phase must be \"install\" or \"runtime\", not \"", phase, "\""));
}

}  // namespace

absl::StatusOr<std::vector<RuleSpec>> CompileNetworkRules(const kit::Descriptor& merged,
                                                          Phase phase,
                                                          const std::string& sandbox) {
  std::vector<RuleSpec> out;
  for (const CapabilityEntry* e : Entries(merged)) {
    if (e->type != kit::kNetworkPolicyV1 && e->type != kit::kNetworkPolicyV2) continue;
    const auto* config = e->As<kit::NetworkPolicyConfig>();
    if (config == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(e->type, ": the config did not decode"));
    }
    const auto& rules = config->rules(phase);
    if (!rules) continue;
    for (Action action : {Action::kAllow, Action::kDeny}) {
      const auto& entries = action == Action::kAllow ? rules->allow : rules->deny;
      for (size_t i = 0; i < entries.size(); ++i) {
        const kit::NetworkEntry& entry = entries[i];
        for (const std::string& host : entry.hosts) {
          RuleSpec spec;
          spec.action = action;
          spec.resource = host == "*" || host == "**" ? "**" : host;
          bool any = entry.methods.size() == 1 && entry.methods[0] == "ANY";
          spec.methods = any ? "" : absl::StrJoin(entry.methods, ",");
          spec.paths = entry.paths;
          spec.sandbox = sandbox;
          spec.origin = phase == Phase::kInstall ? kKitInstallOrigin : kKitRuntimeOrigin;
          if (auto valid = policy::ValidateRule(spec); !valid.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "network-policy ", kit::PhaseName(phase), ".",
                action == Action::kAllow ? "allow" : "deny", "[", i, "] host \"", host,
                "\": ", valid.status().message()));
          }
          out.push_back(std::move(spec));
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::string> InjectFormat(const kit::InjectRule& rule) {
  if (!rule.scheme.empty()) {
    if (absl::AsciiStrToLower(rule.scheme) != "basic") {
      return absl::InvalidArgumentError(absl::StrCat("inject scheme \"", rule.scheme,
                                                     "\" is not supported (only basic)"));
    }
    if (rule.username.empty()) {
      return absl::InvalidArgumentError("inject scheme basic needs a username");
    }
    return absl::StrCat("basic:", rule.username);
  }
  std::string header = rule.header.empty() ? "Authorization" : rule.header;
  std::string format = rule.format;
  if (format.empty()) format = rule.header.empty() ? "Bearer %s" : "%s";
  if (absl::EqualsIgnoreCase(header, "Authorization") && format == "Bearer %s") return "bearer";
  if (format == "%s") return absl::StrCat("header:", header);
  size_t at = format.find("%s");
  if (at == std::string::npos || format.find("%s", at + 2) != std::string::npos ||
      absl::StrContains(absl::StrReplaceAll(format, {{"%s", ""}}), "%")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inject format \"", format, "\" must contain exactly one %s and no other %"));
  }
  return absl::StrCat("header:", header, "=", format);
}

absl::StatusOr<pb::KitPlan> BuildPlan(const kit::ResolvedKits& resolved, bool allow_privileged,
                                      std::vector<std::string>* skipped) {
  pb::KitPlan plan;
  for (const auto& ref : resolved.composition.order) plan.add_order(ref);
  for (const auto& [k, v] : resolved.env_exports) (*plan.mutable_env())[k] = v;
  for (const CapabilityEntry* e : Entries(resolved.composition.merged)) {
    if (const auto* c = e->As<kit::CredentialConfig>()) {
      pb::KitCredential* kc = plan.add_credentials();
      kc->set_service(c->service);
      for (Phase p : c->phases) kc->add_phases(kit::PhaseName(p));
      kc->set_optional(e->optional);
      if (c->api_key) {
        kc->set_env(c->api_key->name);
        for (const auto& rule : c->api_key->inject) {
          auto format = InjectFormat(rule);
          if (!format.ok()) {
            return absl::InvalidArgumentError(absl::StrCat(
                "credential ", c->service, " inject ", rule.domain, ": ", format.status().message()));
          }
          pb::KitInject* in = kc->add_inject();
          // The spec compares inject domains without their port.
          in->set_domain(rule.domain.substr(0, rule.domain.rfind(':')));
          in->set_format(*format);
        }
      }
      if (c->oauth) {
        skipped->push_back(absl::StrCat("credential ", c->service,
                                        ": the oauth flow is not enforced (only apiKey is wired)"));
      }
    } else if (const auto* l = e->As<kit::LifecycleConfig>()) {
      for (const auto* hooks : {&l->install, &l->startup}) {
        for (const kit::Hook& h : *hooks) {
          pb::KitHook* kh = hooks == &l->install ? plan.add_install() : plan.add_startup();
          for (const auto& a : h.command) kh->add_command(a);
          kh->set_user(h.user);
          for (const auto& v : h.env) kh->add_env(v);
          kh->set_background(h.background);
        }
      }
      for (const kit::LifecycleFile& f : l->files) {
        // No size limit of its own: vmmd streams a file to the guest in
        // chunks. The descriptor's byte budget bounds it.
        if (absl::Status bad = CheckGuestPath("file", f.path); !bad.ok()) return bad;
        pb::KitFile* kf = plan.add_files();
        kf->set_path(f.path);
        kf->set_content(f.content);
        kf->set_mode(f.mode);
        kf->set_overwrite(f.overwrite);
      }
    } else if (const auto* v = e->As<kit::VolumeConfig>()) {
      if (absl::Status bad = CheckGuestPath("volume", v->path); !bad.ok()) return bad;
      std::string size;
      if (!v->size.empty()) {
        auto mib = MemoryMib(v->size);
        if (!mib.ok()) return absl::InvalidArgumentError(absl::StrCat("volume ", v->path, ": size \"", v->size, "\" is not a size"));
        size = absl::StrCat(*mib, "m");
      }
      pb::KitVolume* kv = plan.add_volumes();
      kv->set_path(v->path);
      kv->set_size(size);
      kv->set_tmpfs(v->tmpfs);
      kv->set_mode(v->mode);
    } else if (const auto* p = e->As<kit::PortConfig>()) {
      pb::KitPort* kp = plan.add_ports();
      kp->set_name(p->name);
      kp->set_container(p->container);
      kp->set_transport(p->transport.empty() ? "tcp" : p->transport);
      kp->set_optional(e->optional);
    } else if (const auto* r = e->As<kit::ResourcesConfig>()) {
      if (r->cpu) plan.set_cpus(*r->cpu);
      if (!r->memory.empty()) {
        auto mib = MemoryMib(r->memory);
        if (!mib.ok()) return mib.status();
        plan.set_memory_mib(*mib);
      }
    } else if (const auto* a = e->As<kit::AgentConfig>()) {
      for (const auto& arg : a->command) plan.add_command(arg);
      plan.set_image(a->image);
    } else if (e->type == kit::kPrivileged) {
      if (allow_privileged) {
        plan.set_privileged(true);
      } else if (e->optional) {
        skipped->push_back(
            "privileged@1 (optional): left out without --allow-privileged; the kit runs "
            "unprivileged");
      } else {
        return absl::FailedPreconditionError(
            "the kits ask for privileged@1 (processes run as root in the guest); consent with "
            "--allow-privileged or drop the kit");
      }
    }
  }
  return plan;
}

void SurfaceToProto(const kit::Surface& s, pb::GrantSurface* out) {
  for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
    const char* name = kit::PhaseName(phase);
    const kit::NetworkSurface& n = phase == Phase::kInstall ? s.install : s.runtime;
    AddList(out->mutable_allow(), name, n.allow_hosts);
    AddList(out->mutable_deny(), name, n.deny_hosts);
    AddList(out->mutable_http_allow(), name, n.http_allow);
    AddList(out->mutable_http_deny(), name, n.http_deny);
    const auto& creds = phase == Phase::kInstall ? s.credentials_install : s.credentials_runtime;
    for (const auto& [service, c] : creds) {
      pb::CredentialGrant* g = out->add_credentials();
      g->set_phase(name);
      g->set_service(service);
      g->set_env(c.env_name);
      for (const auto& d : c.inject_domains) g->add_inject_domains(d);
    }
  }
  for (const auto& p : s.storage_paths) out->add_storage(p);
  for (const auto& p : s.ports) out->add_ports(p);
  out->set_privileged(s.privileged);
  for (const auto& x : s.services) out->add_services(x);
}

kit::Surface SurfaceFromProto(const pb::GrantSurface& p) {
  kit::Surface s;
  for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
    const char* name = kit::PhaseName(phase);
    kit::NetworkSurface& n = phase == Phase::kInstall ? s.install : s.runtime;
    n.allow_hosts = GetList(p.allow(), name);
    n.deny_hosts = GetList(p.deny(), name);
    n.http_allow = GetList(p.http_allow(), name);
    n.http_deny = GetList(p.http_deny(), name);
  }
  for (const auto& g : p.credentials()) {
    auto& creds = g.phase() == "install" ? s.credentials_install : s.credentials_runtime;
    kit::CredentialSurface& c = creds[g.service()];
    c.env_name = g.env();
    c.inject_domains.assign(g.inject_domains().begin(), g.inject_domains().end());
  }
  s.storage_paths.assign(p.storage().begin(), p.storage().end());
  s.ports.assign(p.ports().begin(), p.ports().end());
  s.privileged = p.privileged();
  s.services.assign(p.services().begin(), p.services().end());
  return s;
}

absl::StatusOr<KitGate::Candidate> KitGate::Prepare(const pb::ResolveRequest& req) {
  if (req.sandbox().empty()) return absl::InvalidArgumentError("sandbox is required");
  std::vector<std::string> refs;
  for (const auto& k : req.kits()) refs.push_back(k.ref());
  kit::ArgValues args(req.args().begin(), req.args().end());
  std::map<std::string, std::string> env(req.env().begin(), req.env().end());
  auto resolved = kit::ResolveKits(refs, args, env);
  if (!resolved.ok()) return resolved.status();
  Candidate c;
  c.request = req;
  std::vector<std::string> skipped;
  for (const auto& s : resolved->skipped) {
    skipped.push_back(absl::StrCat(s.ref, ": ", s.skipped.path,
                                   s.skipped.name.empty() ? "" : " (" + s.skipped.name + ")", ": ",
                                   s.skipped.reason));
  }
  auto plan = BuildPlan(*resolved, req.allow_privileged(), &skipped);
  if (!plan.ok()) return plan.status();
  kit::Surface surface = resolved->surface;
  if (!plan->privileged()) surface.privileged = false;
  for (Phase phase : {Phase::kInstall, Phase::kRuntime}) {
    auto rules = CompileNetworkRules(resolved->composition.merged, phase, req.sandbox());
    if (!rules.ok()) return rules.status();
    (phase == Phase::kInstall ? c.install_rules : c.runtime_rules) = std::move(*rules);
  }
  pb::ResolveResponse& r = c.response;
  r.set_effective_descriptor_json(kit::ToCanonicalJson(resolved->composition.merged.document));
  SurfaceToProto(surface, r.mutable_surface());
  for (const auto& t : resolved->not_enforced) r.add_not_enforced(t);
  for (const auto& s : skipped) r.add_skipped(s);
  *r.mutable_plan() = std::move(*plan);
  return c;
}

absl::StatusOr<bool> KitGate::Find(const std::string& sandbox, Granted* out) {
  auto rows = db_->Query("SELECT response, phase FROM kit_grants WHERE sandbox = ?", {sandbox});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return false;
  pb::ResolveResponse granted;
  if (!granted.ParseFromString((*rows)[0][0])) {
    return absl::DataLossError(absl::StrCat("the kit grant of ", sandbox, " does not parse"));
  }
  out->surface = SurfaceFromProto(granted.surface());
  out->phase = (*rows)[0][1];
  return true;
}

absl::Status KitGate::Apply(const Candidate& c, const std::string& phase,
                            const std::function<absl::Status()>& also) {
  const std::string& sandbox = c.request.sandbox();
  return rules_->Transact([&]() -> absl::Status {
    absl::Status s = db_->Exec(
        "INSERT OR REPLACE INTO kit_grants (sandbox, request, response, install_rules, "
        "runtime_rules, phase, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        {sandbox, c.request.SerializeAsString(), c.response.SerializeAsString(),
         RulesProto(c.install_rules).SerializeAsString(),
         RulesProto(c.runtime_rules).SerializeAsString(), phase,
         static_cast<int64_t>(time(nullptr))});
    if (s.ok()) {
      s = rules_->ReplaceSandboxRules(sandbox, "kit:",
                                      phase == "install" ? c.install_rules : c.runtime_rules);
    }
    // Holds were judged against the grant this replaces.
    if (s.ok()) s = db_->Exec("DELETE FROM kit_holds WHERE sandbox = ?", {sandbox});
    if (s.ok() && also) s = also();
    return s;
  });
}

absl::StatusOr<pb::ResolveResponse> KitGate::Resolve(const pb::ResolveRequest& req) {
  std::lock_guard<std::mutex> lock(mu_);
  auto c = Prepare(req);
  if (!c.ok()) return c.status();
  Granted granted;
  auto found = Find(req.sandbox(), &granted);
  if (!found.ok()) return found.status();
  if (req.create()) {
    if (*found) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sandbox ", req.sandbox(), " already holds a kit grant; ForgetKits first"));
    }
    // The first resolution is the grant itself: creation is the consent.
    if (absl::Status s = Apply(*c, "install", nullptr); !s.ok()) return s;
    return c->response;
  }
  if (!*found) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", req.sandbox(), " holds no kit grant (it was created without kits, or is "
        "gone); kits are chosen at create"));
  }
  kit::SurfaceDiff diff = kit::Diff(granted.surface, SurfaceFromProto(c->response.surface()));
  for (const auto& n : diff.narrowings) c->response.add_narrowings(n);
  if (diff.widens()) {
    for (const auto& w : diff.widenings) c->response.add_widenings(w);
    std::string id = NewHoldId();
    c->response.set_hold_id(id);
    absl::Status s = rules_->Transact([&] {
      return db_->Exec(
          "INSERT INTO kit_holds (id, sandbox, request, response, install_rules, runtime_rules, "
          "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
          {id, req.sandbox(), c->request.SerializeAsString(), c->response.SerializeAsString(),
           RulesProto(c->install_rules).SerializeAsString(),
           RulesProto(c->runtime_rules).SerializeAsString(), static_cast<int64_t>(time(nullptr))});
    }, /*rules_changed=*/false);
    if (!s.ok()) return s;
    pb::ResolveResponse held = c->response;
    held.clear_plan();
    return held;
  }
  if (absl::Status s = Apply(*c, granted.phase, nullptr); !s.ok()) return s;
  return c->response;
}

absl::StatusOr<pb::ApproveResponse> KitGate::Approve(const std::string& hold_id) {
  if (hold_id.empty()) return absl::InvalidArgumentError("hold id is required");
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = db_->Query(
      "SELECT request, response, install_rules, runtime_rules FROM kit_holds WHERE id = ?",
      {hold_id});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::NotFoundError(absl::StrCat(
        "no held update ", hold_id,
        " (it was approved, or superseded by a later update; see `airlock kit holds`)"));
  }
  const SqlRow& row = (*rows)[0];
  Candidate c;
  if (!c.request.ParseFromString(row[0]) || !c.response.ParseFromString(row[1])) {
    return absl::DataLossError(absl::StrCat("held update ", hold_id, " does not parse"));
  }
  c.install_rules = RulesFromBlob(row[2]);
  c.runtime_rules = RulesFromBlob(row[3]);
  Granted granted;
  auto found = Find(c.request.sandbox(), &granted);
  if (!found.ok()) return found.status();
  if (!*found) {
    return absl::FailedPreconditionError(
        absl::StrCat("sandbox ", c.request.sandbox(), " holds no kit grant any more"));
  }
  const std::string& phase = granted.phase;
  absl::Status s = Apply(c, phase, nullptr);
  if (!s.ok()) return s;
  pb::ApproveResponse out;
  *out.mutable_surface() = c.response.surface();
  out.set_sandbox(c.request.sandbox());
  *out.mutable_kits() = c.request.kits();
  *out.mutable_args() = c.request.args();
  *out.mutable_plan() = c.response.plan();
  *out.mutable_widenings() = c.response.widenings();
  return out;
}

absl::StatusOr<std::vector<pb::Hold>> KitGate::Holds(const std::string& sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = db_->Query(
      "SELECT id, sandbox, request, response, created_at FROM kit_holds "
      "WHERE ? = '' OR sandbox = ? ORDER BY created_at, id",
      {sandbox, sandbox});
  if (!rows.ok()) return rows.status();
  std::vector<pb::Hold> out;
  for (const SqlRow& row : *rows) {
    pb::ResolveRequest request;
    pb::ResolveResponse response;
    if (!request.ParseFromString(row[2]) || !response.ParseFromString(row[3])) continue;
    pb::Hold h;
    h.set_id(row[0]);
    h.set_sandbox(row[1]);
    *h.mutable_kits() = request.kits();
    *h.mutable_widenings() = response.widenings();
    int64_t at = 0;
    (void)absl::SimpleAtoi(row[4], &at);
    h.set_created_at(at);
    out.push_back(std::move(h));
  }
  return out;
}

absl::Status KitGate::SetPhase(const std::string& sandbox, const std::string& phase) {
  if (absl::Status s = CheckPhase(phase); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = db_->Query("SELECT install_rules, runtime_rules FROM kit_grants WHERE sandbox = ?",
                         {sandbox});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::NotFoundError(absl::StrCat("sandbox ", sandbox, " runs no kits"));
  }
  std::vector<RuleSpec> rules = RulesFromBlob((*rows)[0][phase == "install" ? 0 : 1]);
  return rules_->Transact([&] {
    absl::Status s =
        db_->Exec("UPDATE kit_grants SET phase = ? WHERE sandbox = ?", {phase, sandbox});
    if (s.ok()) s = rules_->ReplaceSandboxRules(sandbox, "kit:", rules);
    return s;
  });
}

absl::Status KitGate::Forget(const std::string& sandbox) {
  if (sandbox.empty()) return absl::InvalidArgumentError("sandbox is required");
  std::lock_guard<std::mutex> lock(mu_);
  return rules_->Transact([&] {
    absl::Status s = db_->Exec("DELETE FROM kit_grants WHERE sandbox = ?", {sandbox});
    if (s.ok()) s = db_->Exec("DELETE FROM kit_holds WHERE sandbox = ?", {sandbox});
    if (s.ok()) s = rules_->ReplaceSandboxRules(sandbox, "kit:", {});
    return s;
  });
}

}  // namespace airlock::policyd
