// SandboxManager's kit support: resolving a sandbox's kits through
// policyd's gate at create and on update, binding their credentials in
// secretsd per phase, and applying the rest of the plan (volumes and files
// through vmmd/kit_files.h, install and startup hooks, the switch from
// install to runtime rules) at boot, before the sandbox is RUNNING.
#include <time.h>

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/client.h"
#include "common/status.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "vmmd/agent_image.h"
#include "vmmd/guest_run.h"
#include "vmmd/kit_files.h"
#include "vmmd/port_forwarder.h"
#include "vmmd/sandbox_manager.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
namespace pb = airlock::policy::v1;
using std::chrono::seconds;

namespace {

std::string Describe(const pb::KitHook& h) {
  std::string cmd = absl::StrJoin(h.command(), " ");
  if (cmd.size() > 60) cmd = cmd.substr(0, 57) + "...";
  return cmd;
}

std::string Tail(const std::string& out) {
  return out.size() > 400 ? "..." + out.substr(out.size() - 400) : out;
}

}  // namespace

absl::StatusOr<pb::ResolveResponse> SandboxManager::ResolveKits(const vmm::SandboxSpec& spec,
                                                                bool create) {
  pb::ResolveRequest req;
  req.set_sandbox(spec.name());
  for (const auto& k : spec.kits()) req.add_kits()->set_ref(k);
  *req.mutable_args() = spec.kit_args();
  *req.mutable_env() = spec.env();
  req.set_allow_privileged(spec.allow_privileged());
  req.set_create(create);
  return peers_.policy->Resolve(req);
}

absl::Status SandboxManager::ForgetKits(const std::string& name) {
  return peers_.policy->ForgetKits(name);
}

absl::Status SandboxManager::ForgetSandboxRules(const std::string& name) {
  return peers_.policy->ForgetSandboxRules(name);
}

std::vector<std::string> SandboxManager::KitNotes(const pb::ResolveResponse& r) {
  std::vector<std::string> out(r.skipped().begin(), r.skipped().end());
  for (const auto& type : r.not_enforced()) {
    out.push_back(absl::StrCat(type, ": accepted and recorded, not enforced by Airlock"));
  }
  return out;
}

void SandboxManager::ForgetKitRegistration(const std::string& name) {
  // Best effort, after a create failed: a registration left behind is
  // replaced by the next create of the name.
  if (absl::Status s = peers_.secrets->Forget(name, true); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot drop the secrets registration of a create that failed",
                     {{"sandbox", name}, {"error", std::string(s.message())}});
  }
}

absl::Status SandboxManager::SetKitPhase(const std::string& name, const pb::KitPlan& plan,
                                         const std::string& phase) {
  if (absl::Status s = peers_.policy->SetKitPhase(name, phase); !s.ok()) return s;
  return BindKitCredentials(name, plan, phase);
}

void SandboxManager::RetryKitSync(const std::string& name) {
  pb::KitPlan plan;
  bool go;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(name);
    go = it != records_.end() && !it->second.busy && it->second.kit_sync.pending &&
         it->second.sb.state() == vmm::RUNNING;
    if (go) plan = it->second.sb.kit_plan();
  }
  absl::Status s = go ? SetKitPhase(name, plan, "runtime") : absl::OkStatus();
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return;
  Retry& retry = it->second.kit_sync;
  retry.in_flight = false;
  if (!go) return;
  retry.Ended(s.ok(), time(nullptr));
  if (s.ok()) {
    AIRLOCK_LOG_INFO("the kits' runtime phase is confirmed", {{"sandbox", name}});
    return;
  }
  // A refusal (not a peer that is down) is logged as an error each time:
  // it needs an operator.
  if (!PeerDown(s)) {
    AIRLOCK_LOG_ERROR("the kits' runtime phase was refused; retrying",
                      {{"sandbox", name}, {"error", std::string(s.message())}});
  }
}

absl::Status SandboxManager::BindKitCredentials(const std::string& name, const pb::KitPlan& plan,
                                                const std::string& phase) {
  airlock::secrets::v1::BindKitRequest req;
  req.set_sandbox(name);
  std::set<std::string> required;
  std::set<std::string> active;
  for (const pb::KitCredential& c : plan.credentials()) {
    if (std::find(c.phases().begin(), c.phases().end(), phase) != c.phases().end()) {
      active.insert(c.service());
    }
  }
  for (const pb::KitCredential& c : plan.credentials()) {
    if (!active.count(c.service())) {
      // Declared for the other phase only: nothing of it now, not even the
      // built-in service's own hosts and variables.
      airlock::secrets::v1::KitCredential* kc = req.add_credentials();
      kc->set_service(c.service());
      kc->set_suppress(true);
      active.insert(c.service());
      continue;
    }
    if (std::find(c.phases().begin(), c.phases().end(), phase) == c.phases().end()) continue;
    airlock::secrets::v1::KitCredential* kc = req.add_credentials();
    kc->set_service(c.service());
    kc->set_env(c.env());
    for (const pb::KitInject& in : c.inject()) {
      airlock::secrets::v1::KitInject* ki = kc->add_inject();
      ki->set_domain(in.domain());
      ki->set_format(in.format());
    }
    if (!c.optional()) required.insert(c.service());
  }
  auto resp = peers_.secrets->BindKit(req);
  if (!resp.ok()) return resp.status();
  std::vector<std::string> missing;
  for (const auto& service : resp->unbound()) {
    if (required.count(service)) missing.push_back(service);
  }
  if (!missing.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the kits require a ", absl::StrJoin(missing, ", "), " credential and none is set; "
        "store one with `airlock secret set -g ", missing[0], "` (or for this sandbox only, "
        "`airlock secret set ", name, " ", missing[0], "`)"));
  }
  return absl::OkStatus();
}

absl::Status SandboxManager::ApplyKitPlanToSpec(const pb::KitPlan& plan, vmm::SandboxSpec* spec,
                                                std::vector<std::string>* skipped) {
  // resources@1 applies when the user asked for no size of their own.
  if (spec->cpus() == 0 && spec->memory_mib() == 0 && spec->size().empty()) {
    if (plan.cpus() > 0) spec->set_cpus(static_cast<uint32_t>(std::ceil(plan.cpus())));
    if (plan.memory_mib() > 0) spec->set_memory_mib(std::max<uint64_t>(plan.memory_mib(), 512));
  }
  for (const pb::KitPort& p : plan.ports()) {
    if (p.transport() != "tcp") {
      std::string why = absl::StrCat("port ", p.container(), "/", p.transport(),
                                     ": only tcp ports can be published");
      if (!p.optional()) return absl::FailedPreconditionError(why);
      skipped->push_back(why);
      continue;
    }
    bool taken = false;
    for (const auto& m : spec->ports()) taken |= m.sandbox_port() == p.container();
    if (taken) continue;
    vmm::PortMapping m;
    m.set_sandbox_port(p.container());
    if (absl::Status s = ValidatePortMapping(&m); !s.ok()) return s;
    auto reserved = ReserveHostPort(m);
    if (!reserved.ok()) return reserved.status();
    *spec->add_ports() = *reserved;
  }
  return absl::OkStatus();
}

absl::Status SandboxManager::ApplyKitsAtBoot(const std::string& name,
                                             std::shared_ptr<grpc::Channel> agent) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  if (!sb.has_kit_plan()) return absl::OkStatus();
  const pb::KitPlan& plan = sb.kit_plan();
  SetProgress(name, "applying kits");
  auto run = [&](GuestCommand cmd, const std::string& what) -> absl::Status {
    auto r = GuestRun(agent, cmd);
    if (!r.ok()) return absl::UnavailableError(absl::StrCat(what, ": ", r.status().message()));
    if (r->first != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(what, " exited with ", r->first, ": ", Tail(r->second)));
    }
    return absl::OkStatus();
  };
  for (const pb::KitVolume& v : plan.volumes()) {
    if (absl::Status s = MakeKitVolume(agent, v); !s.ok()) return s;
  }
  for (const pb::KitFile& f : plan.files()) {
    if (absl::Status s = WriteKitFile(agent, f); !s.ok()) return s;
  }
  // The environment a hook may see: the baseline the agent always sets,
  // plus the names it declares, from the sandbox's own environment as the
  // current phase has it (credentials are scoped by phase).
  auto phase_env = [&]() {
    std::map<std::string, std::string> env(plan.env().begin(), plan.env().end());
    if (auto sentinels = SecretSentinels(name); sentinels.ok()) {
      env.insert(sentinels->begin(), sentinels->end());
    }
    for (const auto& [k, v] : sb.spec().env()) env[k] = v;
    return env;
  };
  std::map<std::string, std::string> env;
  auto hook = [&](const pb::KitHook& h, const std::string& default_user) {
    GuestCommand cmd;
    cmd.argv.assign(h.command().begin(), h.command().end());
    cmd.user = h.user().empty() ? default_user : h.user();
    for (const auto& n : h.env()) {
      if (auto it = env.find(n); it != env.end()) cmd.env.push_back(n + "=" + it->second);
    }
    cmd.detach = h.background();
    return cmd;
  };
  if (!sb.kit_installed()) {
    if (absl::Status s = SetKitPhase(name, plan, "install"); !s.ok()) return s;
    env = phase_env();
    for (int i = 0; i < plan.install_size(); ++i) {
      const pb::KitHook& h = plan.install(i);
      SetProgress(name, absl::StrCat("kit install hook ", i + 1, "/", plan.install_size()));
      if (absl::Status s = run(hook(h, "root"), absl::StrCat("kit install hook ", i + 1, " (",
                                                             Describe(h), ")"));
          !s.ok()) {
        return s;
      }
    }
    if (absl::Status s = Update(name, "", [](vmm::Sandbox& sb) { sb.set_kit_installed(true); });
        !s.ok()) {
      return s;
    }
  }
  // Install rules and install credentials end before anything else runs.
  if (absl::Status s = SetKitPhase(name, plan, "runtime"); !s.ok()) return s;
  env = phase_env();
  for (int i = 0; i < plan.startup_size(); ++i) {
    const pb::KitHook& h = plan.startup(i);
    if (absl::Status s = run(hook(h, "agent"), absl::StrCat("kit startup hook ", i + 1, " (",
                                                            Describe(h), ")"));
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<vmm::UpdateKitsResponse> SandboxManager::UpdateKits(
    const vmm::UpdateKitsRequest& req) {
  std::string name = req.name();
  vmm::UpdateKitsResponse out;
  pb::KitPlan plan;
  google::protobuf::RepeatedPtrField<std::string> kits;
  std::vector<std::string> skipped;
  google::protobuf::Map<std::string, std::string> args;
  if (!req.approve_hold().empty()) {
    // Approval applies exactly what policyd held; nothing is read again.
    if (!name.empty()) {
      // Check the hold is this sandbox's before granting anything.
      auto holds = peers_.policy->ListHolds(name);
      if (!holds.ok()) return holds.status();
      bool mine = false;
      for (const auto& h : holds->holds()) mine |= h.id() == req.approve_hold();
      if (!mine) {
        return absl::NotFoundError(absl::StrCat("sandbox ", name, " has no held update ",
                                                req.approve_hold(), " (`airlock kit holds`)"));
      }
    }
    auto granted = peers_.policy->Approve(req.approve_hold());
    if (!granted.ok()) return granted.status();
    const pb::ApproveResponse& approved = *granted;
    name = approved.sandbox();
    for (const auto& k : approved.kits()) *kits.Add() = k.ref();
    args = approved.args();
    plan = approved.plan();
    *out.mutable_widenings() = approved.widenings();
  } else {
    if (req.kits().empty()) {
      return absl::InvalidArgumentError("give the kits the sandbox should run (--kit REF)");
    }
    kits = req.kits();
    args = req.kit_args();
  }
  auto current = Get(name);
  if (!current.ok()) return current.status();
  if (current->spec().kits().empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", name, " was created without kits; kits are chosen at create"));
  }
  if (req.approve_hold().empty()) {
    vmm::SandboxSpec spec = current->spec();
    *spec.mutable_kits() = kits;
    *spec.mutable_kit_args() = args;
    // A built-in agent's sandbox keeps its agent: its kit stays the
    // workload, and its version is the image it was made from.
    if (IsBuiltinAgent(spec.agent())) {
      if (absl::Status s = AddAgentKit(&spec); !s.ok()) return s;
      kits = spec.kits();
      auto was = current->spec().kit_args().find("version");
      auto now = args.find("version");
      std::string before = was == current->spec().kit_args().end() ? "" : was->second;
      std::string after = now == args.end() ? "" : now->second;
      if (before != after) {
        return absl::FailedPreconditionError(absl::StrCat(
            "sandbox ", name, " runs ", spec.agent(), " from the image ",
            current->image().name(), "; another version is another sandboxes' image: "
            "`airlock run --kit-arg version=", after.empty() ? "X" : after, " ", spec.agent(),
            "`"));
      }
    }
    auto resolved = ResolveKits(spec, false);
    if (!resolved.ok()) return resolved.status();
    *out.mutable_narrowings() = resolved->narrowings();
    if (!resolved->hold_id().empty()) {
      *out.mutable_sandbox() = *current;
      *out.mutable_widenings() = resolved->widenings();
      out.set_hold_id(resolved->hold_id());
      return out;
    }
    plan = resolved->plan();
    skipped = KitNotes(*resolved);
  }
  absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) {
    *sb.mutable_spec()->mutable_kits() = kits;
    *sb.mutable_spec()->mutable_kit_args() = args;
    *sb.mutable_kit_plan() = plan;
    if (req.approve_hold().empty()) {
      sb.clear_kit_skipped();
      for (const auto& n : skipped) sb.add_kit_skipped(n);
    }
  });
  if (!s.ok()) return s;
  // Credentials follow at once; the phase is runtime once installed.
  if (current->kit_installed()) {
    if (absl::Status b = BindKitCredentials(name, plan, "runtime"); !b.ok()) return b;
  }
  auto updated = Get(name);
  if (!updated.ok()) return updated.status();
  *out.mutable_sandbox() = *updated;
  return out;
}

}  // namespace airlock::vmmd
