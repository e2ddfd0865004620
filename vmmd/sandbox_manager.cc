// SandboxManager's registry and lifecycle calls: the records and their
// stored state (Update, Begin/End), create with its one rollback path,
// start, stop and remove, and what callers read (Get, List, Watch, the
// agent channel). Booting is sandbox_boot.cc, clone mode sandbox_clone.cc,
// published ports sandbox_ports.cc, recovery and the monitor
// sandbox_recover.cc.
#include "vmmd/sandbox_manager.h"

#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "vmmd/agent_image.h"
#include "vmmd/clone_mode.h"
#include "vmmd/docker_setup.h"
#include "vmmd/images.h"
#include "vmmd/sandbox_metadata.h"
#include "vmmd/sandbox_states.h"
#include "vmmd/store/layer_apply.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {

std::string StateName(vmm::SandboxState s) {
  std::string n = vmm::SandboxState_Name(s);
  for (char& c : n) c = static_cast<char>(tolower(c));
  return n;
}



}  // namespace

SandboxManager::SandboxManager(ManagerOptions options, SandboxStore* store,
                               ImageCatalog* images, std::unique_ptr<Hypervisor> hypervisor,
                               HostFacts host)
    : SandboxManager(options, store, images, std::move(hypervisor), host,
                     GrpcPeerClients(options.gitd, options.proxyd, options.secretsd,
                                     options.policyd)) {}

SandboxManager::SandboxManager(ManagerOptions options, SandboxStore* store,
                               ImageCatalog* images, std::unique_ptr<Hypervisor> hypervisor,
                               HostFacts host, PeerClients peers)
    : options_(std::move(options)),
      peers_(std::move(peers)),
      store_(store),
      images_(images),
      hypervisor_(std::move(hypervisor)),
      host_(host),
      jails_(JailOptions{options_.jail, options_.jail_id_base, options_.runtime_dir,
                         InstanceName(options_.state_dir)}),
      snapshots_(options_.state_dir + "/snapshots"),
      warm_(options_.snapshots ? options_.warm_pool : 0) {
  AIRLOCK_LOG_INFO(jails_.Describe(), {});
}

SandboxManager::~SandboxManager() {
  stopping_ = true;
  changed_.notify_all();
  if (monitor_.joinable()) monitor_.join();
  std::unique_lock<std::mutex> lock(workers_mu_);
  workers_done_.wait(lock, [&] { return workers_ == 0; });
}

std::string SandboxManager::SandboxDir(const std::string& name) const {
  return absl::StrCat(options_.state_dir, "/sandboxes/", name);
}

VmConfig SandboxManager::ConfigFor(const vmm::Sandbox& sb) const {
  VmConfig c;
  c.name = sb.spec().name();
  c.dir = SandboxDir(c.name);
  c.disk = c.dir + "/disk.qcow2";
  c.cpus = sb.cpus();
  c.memory_mib = sb.memory_mib();
  c.accelerator = sb.accelerator();
  c.tcg_cache_mib = options_.tcg_cache_mib;
  c.guest_aslr = options_.guest_aslr;
  // Each sandbox's sockets are in a directory of its own, which only its
  // jail's uid (and root) can enter.
  c.socket_dir = jails_.SocketDir(c.name);
  c.agent_socket = c.socket_dir + "/agent.sock";
  c.egress_socket = c.socket_dir + "/egress.sock";
  c.jail_uid = jails_.enabled() ? sb.jail_uid() : 0;
  c.backing_dir = options_.state_dir + "/images/disks";
  c.console_log = c.dir + "/console.log";
  c.vmm_log = c.dir + "/vmm.log";
  for (const Share& s : SharesOf(sb)) c.shares.push_back({s.tag, s.socket});
  c.ensure_agent_user = !sb.image().digest().empty() && sb.image().config().user().empty();
  if (HasDocker(sb.spec())) c.docker_disk = c.dir + "/docker.img";
  return c;
}

std::vector<Share> SandboxManager::SharesOf(const vmm::Sandbox& sb) const {
  std::vector<Share> out;
  for (int i = 0; i < sb.spec().mounts_size(); ++i) {
    Share s;
    s.tag = absl::StrCat("airlock", i);
    s.socket = absl::StrCat(jails_.SocketDir(sb.spec().name()), "/fs", i, ".sock");
    s.mount = sb.spec().mounts(i);
    s.guest_path = s.mount.guest_path().empty() ? s.mount.host_path() : s.mount.guest_path();
    struct stat st;
    s.file = stat(s.mount.host_path().c_str(), &st) == 0 && !S_ISDIR(st.st_mode);
    out.push_back(s);
  }
  return out;
}

void SandboxManager::StartWorker(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(workers_mu_);
    ++workers_;
  }
  std::thread([this, fn = std::move(fn)] {
    fn();
    std::lock_guard<std::mutex> lock(workers_mu_);
    --workers_;
    workers_done_.notify_all();
  }).detach();
}

absl::Status SandboxManager::Update(const std::string& name, const std::string& progress,
                                    const std::function<void(vmm::Sandbox&)>& mutate) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return absl::NotFoundError(absl::StrCat("no sandbox named ", name));
  vmm::Sandbox next = it->second.sb;
  mutate(next);
  if (absl::Status s = CheckTransition(name, it->second.sb.state(), next.state()); !s.ok()) {
    AIRLOCK_LOG_ERROR("refused a state change", {{"sandbox", name},
                                                 {"error", std::string(s.message())}});
    return s;
  }
  if (absl::Status s = store_->Put(next); !s.ok()) return s;
  it->second.sb = next;
  it->second.progress = progress;
  ++it->second.version;
  changed_.notify_all();
  return absl::OkStatus();
}

void SandboxManager::SetProgress(const std::string& name, const std::string& progress) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return;
  it->second.progress = progress;
  ++it->second.version;
  changed_.notify_all();
}

void SandboxManager::UpdateOrWarn(const std::string& name, const std::string& progress,
                                  const std::function<void(vmm::Sandbox&)>& mutate) {
  absl::Status s = Update(name, progress, mutate);
  if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
    AIRLOCK_LOG_ERROR("cannot record the sandbox's state; it holds until vmmd restarts",
                      {{"sandbox", name}, {"error", std::string(s.message())}});
  }
}

absl::StatusOr<vmm::Sandbox> SandboxManager::SetDisplayName(const std::string& name,
                                                            const std::string& display_name) {
  if (absl::Status s = ValidateDisplayName(display_name); !s.ok()) return s;
  if (absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) {
        sb.mutable_spec()->set_display_name(display_name);
      });
      !s.ok()) {
    return s;
  }
  return Get(name);
}

absl::StatusOr<vmm::Sandbox> SandboxManager::RenewTimeout(const std::string& name,
                                                          uint64_t timeout_seconds) {
  if (timeout_seconds == 0) {
    return absl::InvalidArgumentError("a renewed timeout must be at least 1 second");
  }
  vmm::SandboxSpec probe;
  probe.set_timeout_seconds(timeout_seconds);
  if (absl::Status s = ValidateMetadata(probe); !s.ok()) return s;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(name);
    if (it != records_.end() && it->second.expiring) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sandbox ", name, "'s timeout has passed and its action is under way"));
    }
  }
  if (absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) {
        sb.mutable_spec()->set_timeout_seconds(timeout_seconds);
        sb.set_expires_at(sb.state() == vmm::RUNNING ? ArmedExpiry(sb.spec(), time(nullptr)) : 0);
      });
      !s.ok()) {
    return s;
  }
  return Get(name);
}

absl::StatusOr<vmm::Sandbox> SandboxManager::Begin(const std::string& name,
                                                   const std::string& what) {
  std::unique_lock<std::mutex> lock(mu_);
  // A restarted vmmd's own reattach or boot of the sandbox is waited for
  // (bounded; cut short by rm -f and by vmmd stopping).
  changed_.wait_for(lock, seconds(options_.boot_timeout_s), [&] {
    auto r = records_.find(name);
    return r == records_.end() || !r->second.recovering || r->second.cancel || stopping_;
  });
  auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no sandbox named \"", name,
                                            "\" (see `airlock ls`)"));
  }
  if (it->second.recovering) {
    return absl::UnavailableError(absl::StrCat(
        "vmmd is still recovering sandbox ", name, " after a restart; try again"));
  }
  if (it->second.busy) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", name, " is ", StateName(it->second.sb.state()), "; cannot ", what,
        " it now (try again when it is running, or `airlock rm -f ", name, "`)"));
  }
  it->second.busy = true;
  it->second.cancel = false;
  return it->second.sb;
}

void SandboxManager::End(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it != records_.end()) {
    it->second.busy = false;
    it->second.reattaching = false;
    it->second.recovering = false;
  }
  changed_.notify_all();
}

absl::StatusOr<vmm::Sandbox> SandboxManager::Create(const vmm::SandboxSpec& spec, bool start) {
  return CreateSandbox(spec, start, "");
}

absl::StatusOr<vmm::Sandbox> SandboxManager::CreateSandbox(const vmm::SandboxSpec& spec_in,
                                                           bool start,
                                                           const std::string& installs_image) {
  vmm::SandboxSpec spec = spec_in;
  // A built-in agent is its kit: the workload the user's kits compose with.
  if (absl::Status s = AddAgentKit(&spec); !s.ok()) return s;
  if (spec.name().empty()) {
    std::random_device rd;
    spec.set_name(absl::StrCat(spec.agent(), "-", absl::Hex(rd() & 0xffffff, absl::kZeroPad6)));
  }
  if (absl::Status s = ValidateName(spec.name()); !s.ok()) return s;
  if (absl::Status s = ValidateMetadata(spec); !s.ok()) return s;
  if (absl::Status s = ResolveDocker(&spec, IsBuiltinAgent(spec.agent())); !s.ok()) return s;
  // The one rollback of a create that fails: whatever a peer was asked to
  // hold for the name is dropped again (best effort: the create already
  // failed with its own error, and the next create of the name starts by
  // dropping a kit grant left behind).
  struct Rollback {
    SandboxManager* manager;
    std::string name;
    bool reserved = false;  // the name is in creating_
    bool kits = false;      // policyd holds a kit grant for it
    bool secrets = false;   // secretsd registered it (and its kit bindings)
    bool baseline = false;  // gitd recorded a review baseline or clone for it
    // Keep says the sandbox exists (or a create of the same name won the
    // race and what the peers hold is its own): nothing is dropped.
    void Keep() { kits = secrets = baseline = false; }
    ~Rollback() {
      if (kits) {
        if (absl::Status s = manager->ForgetKits(name); !s.ok()) {
          AIRLOCK_LOG_WARN("cannot drop the kit grant of a create that failed",
                           {{"sandbox", name}, {"error", std::string(s.message())}});
        }
      }
      if (kits || secrets) manager->ForgetKitRegistration(name);
      if (baseline) {
        if (absl::Status s = manager->peers_.git->Unpublish(name); !s.ok()) {
          AIRLOCK_LOG_WARN("cannot drop the review baseline of a create that failed",
                           {{"sandbox", name}, {"error", std::string(s.message())}});
        }
      }
      if (reserved) {
        std::lock_guard<std::mutex> lock(manager->mu_);
        manager->creating_.erase(name);
      }
    }
  } rollback{this, spec.name()};
  // The name is this create's before any peer is asked anything: what the
  // rollback drops is never another sandbox's (nor another create's).
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (records_.count(spec.name()) || creating_.count(spec.name())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a sandbox named \"", spec.name(), "\" already exists; choose another --name or "
          "remove it with `airlock rm ", spec.name(), "`"));
    }
    creating_.insert(spec.name());
    rollback.reserved = true;
  }
  airlock::policy::v1::ResolveResponse kits;
  std::vector<std::string> kit_skipped;
  if (!spec.kits().empty()) {
    // A grant left by a sandbox of this name that is gone is not this
    // sandbox's consent.
    if (absl::Status s = ForgetKits(spec.name()); !s.ok()) return s;
    rollback.kits = true;
    auto resolved = ResolveKits(spec, true);
    if (!resolved.ok()) return resolved.status();
    kits = std::move(*resolved);
    kit_skipped = KitNotes(kits);
    if (absl::Status s = ApplyKitPlanToSpec(kits.plan(), &spec, &kit_skipped); !s.ok()) return s;
  }
  auto res = ResolveResources(spec.cpus(), spec.memory_mib(), spec.size(), host_);
  if (!res.ok()) return res.status();
  if (spec.clone() && spec.mounts_size() != 1) {
    return absl::InvalidArgumentError(
        "clone mode takes exactly one PATH: a directory inside the Git repository to clone");
  }
  if (!spec.clone() && !spec.branch().empty()) {
    return absl::InvalidArgumentError("--branch only applies with --clone");
  }
  for (auto& m : *spec.mutable_mounts()) {
    if (absl::Status s = ValidateMount(&m); !s.ok()) return s;
  }
  if (int most = hypervisor_->MaxShares(HasDocker(spec)); spec.mounts_size() > most) {
    return absl::InvalidArgumentError(absl::StrCat(
        "a sandbox shares at most ", most, " paths", HasDocker(spec) ? " with Docker" : "",
        " (", spec.mounts_size(), " given); share a common parent directory instead"));
  }
  // Host ports are checked (and free ones chosen) now, so a taken port is a
  // clear error at create rather than a missing forward later.
  for (auto& port : *spec.mutable_ports()) {
    if (absl::Status s = ValidatePortMapping(&port); !s.ok()) return s;
    if (port.host_port() != 0) {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [other, r] : records_) {
        for (const auto& p : r.sb.spec().ports()) {
          if (p.host_port() == port.host_port() && p.host_ip() == port.host_ip()) {
            return absl::AlreadyExistsError(absl::StrCat(
                "host port ", port.host_ip(), ":", port.host_port(), " is already published by "
                "sandbox ", other));
          }
        }
      }
    }
    auto reserved = ReserveHostPort(port);
    if (!reserved.ok()) return reserved.status();
    port = *reserved;
  }
  auto images = LocateGuestImages(options_.image_dir);
  if (!images.ok()) return images.status();
  // An agent starts from the image its install was saved as; without one
  // yet, the first boot installs it (InstallAgentImage) into the template
  // its kit names.
  // `-t IMAGE` installs into that image instead, as its own cached image.
  bool install_agent = false;
  if (IsBuiltinAgent(spec.agent()) && installs_image.empty()) {
    auto tag = AgentImageTag(spec.agent(), kits.effective_descriptor_json());
    if (!tag.ok()) return tag.status();
    std::string into = kits.plan().image().empty() ? "agent" : kits.plan().image();
    if (!spec.template_().empty()) {
      auto chosen = images_->Resolve(spec.template_());
      if (!chosen.ok()) return chosen.status();
      into = chosen->digest;
      *tag = absl::StrCat(*tag, "-on-", chosen->digest.substr(chosen->digest.find(':') + 1, 12));
    }
    kits.mutable_plan()->set_image(into);
    spec.set_template_(*tag);
    install_agent = !images_->store()->FindName(*tag).ok();
    if (install_agent && !images_->Resolve(into).ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the ", spec.agent(), " agent installs into the image \"", into,
          "\", which the store does not have; build it with `sudo tools/build_images.sh "
          "agent` (then `airlock daemon restart`) or pass -t IMAGE with Node.js and npm"));
    }
  }
  // A plain sandbox with Docker starts from the template that has it.
  bool docker_template = HasDocker(spec) && spec.template_().empty();
  if (docker_template) spec.set_template_(kDockerTemplate);
  absl::StatusOr<StoredImage> image =
      install_agent ? absl::StatusOr<StoredImage>(StoredImage{}) : images_->Resolve(spec.template_());
  if (!image.ok() && docker_template && absl::IsNotFound(image.status())) {
    return absl::FailedPreconditionError(
        "--docker starts from the docker template, which the store does not have; build it "
        "with `sudo tools/build_images.sh docker` (then `airlock daemon restart`), or pass "
        "-t IMAGE with Debian's docker.io");
  }
  if (!image.ok()) return image.status();
  if (spec.template_().empty()) spec.set_template_(image->name);
  vmm::CloneInfo clone;
  if (spec.clone()) {
    // gitd records the clone (dropped again by Unpublish).
    rollback.baseline = true;
    auto prepared = PrepareClone(spec);
    if (!prepared.ok()) return prepared.status();
    clone = *prepared;
    // The host repo is shared read-only at /run/sandbox/source, and the
    // guest's git daemon is published on a free loopback port.
    vmm::Mount source;
    source.set_host_path(clone.source_root());
    source.set_read_only(true);
    source.set_guest_path(kCloneSource);
    spec.clear_mounts();
    *spec.add_mounts() = source;
    spec.set_branch(clone.branch());
    vmm::PortMapping git;
    git.set_sandbox_port(kGitDaemonPort);
    if (absl::Status s = ValidatePortMapping(&git); !s.ok()) return s;
    auto reserved = ReserveHostPort(git);
    if (!reserved.ok()) return reserved.status();
    *spec.add_ports() = *reserved;
  }
  // The review baseline is taken before the guest can touch anything
  // (direct mode: clone mode shares nothing writable).
  if (spec.mounts_size() > 0 && !spec.clone()) {
    std::vector<std::string> paths;
    for (const auto& m : spec.mounts()) paths.push_back(m.host_path());
    rollback.baseline = true;
    if (absl::Status s = peers_.git->Baseline(spec.name(), paths); !s.ok()) return s;
  }

  // An agent install's own sandbox is registered with secretsd first, and
  // without the global secrets: no install script gets the user's keys.
  rollback.secrets = true;
  if (!installs_image.empty()) {
    if (auto bare = SecretSentinels(spec.name(), true); !bare.ok()) return bare.status();
  } else if (HasDocker(spec)) {
    // Registered before the kits bind (which registers too): its Docker
    // Engine pulls with the registry secrets.
    if (auto r = SecretSentinels(spec.name(), false, true); !r.ok()) return r.status();
  }
  // The kits' credentials: every required one must have a secret (checked
  // for both phases); the install phase's stand until the first boot.
  if (!spec.kits().empty()) {
    for (const char* phase : {"runtime", "install"}) {
      if (absl::Status s = BindKitCredentials(spec.name(), kits.plan(), phase); !s.ok()) return s;
    }
  }
  // secretsd records the sandbox as created now: global secrets set later
  // do not apply to it. Its Docker Engine pulls with the registry secrets.
  if (auto registered = SecretSentinels(spec.name(), false, HasDocker(spec)); !registered.ok()) {
    return registered.status();
  }

  vmm::Sandbox sb;
  *sb.mutable_spec() = spec;
  if (spec.clone()) *sb.mutable_clone() = clone;
  sb.set_state(vmm::CREATING);
  sb.set_created_at(time(nullptr));
  sb.set_cpus(res->cpus);
  sb.set_memory_mib(res->memory_mib);
  sb.set_console_log(SandboxDir(spec.name()) + "/console.log");
  sb.set_installs_agent_image(installs_image);
  if (install_agent) {
    sb.mutable_image()->set_name(spec.template_());
  } else {
    *sb.mutable_image() = ImageCatalog::RefOf(*image, "");
  }
  if (!spec.kits().empty()) {
    *sb.mutable_kit_plan() = kits.plan();
    for (const auto& k : kit_skipped) sb.add_kit_skipped(k);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (absl::Status s = store_->Insert(sb); !s.ok()) return s;
    rollback.Keep();
    Record& r = records_[spec.name()];
    r.sb = sb;
    r.busy = true;
    r.progress = "preparing disk";
    changed_.notify_all();
  }
  std::string name = spec.name();
  StartWorker([this, name, start] {
    if (absl::Status s = PrepareDisk(name); !s.ok()) {
      UpdateOrWarn(name, "", [&](vmm::Sandbox& sb) {
        sb.set_state(vmm::FAILED);
        sb.set_failure(std::string(s.message()));
      });
      End(name);
      return;
    }
    if (!start) {
      UpdateOrWarn(name, "", [](vmm::Sandbox& sb) { sb.set_state(vmm::STOPPED); });
      End(name);
      return;
    }
    Boot(name, true);
  });
  return sb;
}

Usage SandboxManager::ImageUsage() {
  Usage usage;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, r] : records_) {
    if (!r.sb.image().digest().empty()) usage[r.sb.image().digest()].push_back(name);
  }
  return usage;
}

absl::StatusOr<std::map<std::string, std::string>> SandboxManager::SecretSentinels(
    const std::string& name, bool without_globals, bool registry_credentials) {
  return peers_.secrets->Sentinels(name, without_globals, registry_credentials);
}

absl::Status SandboxManager::ForgetSecrets(const std::string& name) {
  if (absl::Status s = peers_.secrets->Forget(name, false); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot remove sandbox ", name,
                                               ": secretsd must forget its secrets first: ",
                                               s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<vmm::Sandbox> SandboxManager::Start(const std::string& name) {
  auto sb = Begin(name, "start");
  if (!sb.ok()) return sb.status();
  if (sb->state() == vmm::RUNNING) {
    End(name);
    return *sb;
  }
  absl::Status s = Update(name, "starting", [](vmm::Sandbox& sb) {
    sb.set_state(vmm::STARTING);
    sb.set_failure("");
  });
  if (!s.ok()) {
    End(name);
    return s;
  }
  StartWorker([this, name] { Boot(name, true); });
  return Get(name);
}

absl::StatusOr<vmm::Sandbox> SandboxManager::Stop(const std::string& name, int timeout_s) {
  auto sb = Begin(name, "stop");
  if (!sb.ok()) return sb.status();
  if (sb->state() != vmm::RUNNING) {
    End(name);
    return *sb;
  }
  UpdateOrWarn(name, "stopping", [](vmm::Sandbox& sb) { sb.set_state(vmm::STOPPING); });
  std::shared_ptr<AgentLink> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    link = records_[name].agent;
  }
  pid_t pid = FindVm(*sb);
  auto channel = link != nullptr && pid > 0
                     ? link->Channel(seconds(3))
                     : absl::StatusOr<std::shared_ptr<grpc::Channel>>(absl::UnavailableError(""));
  if (channel.ok()) {
    auto stub = airlock::agent::v1::Agent::NewStub(*channel);
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(3));
    airlock::agent::v1::Empty empty;
    // The answer does not matter: the VM is killed below unless it powers
    // off in time.
    grpc::Status asked = stub->Shutdown(&ctx, {}, &empty);
    if (!asked.ok()) {
      AIRLOCK_LOG_DEBUG("the guest agent did not take the shutdown",
                        {{"sandbox", name}, {"error", asked.error_message()}});
    }
  }
  if (pid > 0 && !AwaitExit(pid, seconds(timeout_s > 0 ? timeout_s : 10))) {
    AIRLOCK_LOG_WARN("guest did not power off; killing the VM", {{"sandbox", name}});
    KillVm(*sb);
  }
  ClosePorts(name);
  DetachEgress(name);
  {
    std::lock_guard<std::mutex> lock(mu_);
    records_[name].agent.reset();
  }
  unlink(ConfigFor(*sb).agent_socket.c_str());
  unlink(ConfigFor(*sb).egress_socket.c_str());
  absl::Status s = Update(name, "", [](vmm::Sandbox& sb) {
    sb.set_state(vmm::STOPPED);
    sb.set_vmm_pid(0);
    sb.set_expires_at(0);
  });
  AnswerStoppedClone(*sb);
  End(name);
  if (!s.ok()) return s;
  return Get(name);
}

absl::Status SandboxManager::Remove(const std::string& name, bool force) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    auto it = records_.find(name);
    if (it == records_.end()) {
      return absl::NotFoundError(absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
    }
    vmm::SandboxState st = it->second.sb.state();
    bool active = st == vmm::RUNNING || st == vmm::STARTING || st == vmm::CREATING ||
                  st == vmm::STOPPING || it->second.busy;
    if (active && !force) {
      return absl::FailedPreconditionError(absl::StrCat(
          "sandbox ", name, " is ", StateName(st), "; stop it first (`airlock stop ", name,
          "`) or remove it with `airlock rm -f ", name, "`"));
    }
    // secretsd must forget the sandbox before anything is removed, or a
    // new sandbox of the same name would inherit its secrets.
    bool kits = !it->second.sb.spec().kits().empty();
    lock.unlock();
    // Likewise policyd its kit grant, rules and held updates, first: a
    // sandbox left without its grant fails closed (no update, no boot).
    if (kits) {
      if (absl::Status fk = ForgetKits(name); !fk.ok()) return fk;
    }
    if (absl::Status fs = ForgetSecrets(name); !fs.ok()) return fs;
    if (absl::Status fr = ForgetSandboxRules(name); !fr.ok()) return fr;
    lock.lock();
    it = records_.find(name);
    if (it == records_.end()) {
      return absl::NotFoundError(absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
    }
    // A boot in progress gives up; wait until it has.
    it->second.cancel = true;
    changed_.wait(lock, [&] {
      auto r = records_.find(name);
      return r == records_.end() || !r->second.busy;
    });
    it = records_.find(name);
    if (it == records_.end()) {
      // Another removal finished meanwhile.
      return absl::NotFoundError(absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
    }
    it->second.busy = true;
  }
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
    records_[name].agent.reset();
  }
  ClosePorts(name);
  DetachEgress(name);
  KillVm(sb);
  VmConfig config = ConfigFor(sb);
  unlink(config.agent_socket.c_str());
  unlink(config.egress_socket.c_str());
  // The jail goes with the VM: its roots, sockets and cgroup; its ids go
  // back to the pool with the record.
  jails_.Teardown(name);
  if (!RemoveTree(SandboxDir(name)).ok()) {
    End(name);
    return absl::InternalError(absl::StrCat("cannot remove ", SandboxDir(name)));
  }
  if (sb.spec().clone() || sb.spec().mounts_size() > 0) {
    // Forget the review baseline, and in clone mode remove the host repo's
    // sandbox-<name> remote (after any retried publish: the record is busy,
    // so none starts after this one).
    std::lock_guard<std::mutex> publishing(publish_mu_);
    if (absl::Status s = peers_.git->Unpublish(name); !s.ok()) {
      End(name);
      return s;
    }
  }
  if (absl::Status s = store_->Delete(name); !s.ok()) {
    End(name);
    return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  records_.erase(name);
  changed_.notify_all();
  return absl::OkStatus();
}

absl::StatusOr<vmm::Sandbox> SandboxManager::Get(const std::string& name,
                                                 bool with_host_memory) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
  }
  vmm::Sandbox sb = it->second.sb;
  if (with_host_memory) WithHostMemory(sb);
  return sb;
}

std::vector<vmm::Sandbox> SandboxManager::List() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<vmm::Sandbox> out;
  for (const auto& [name, r] : records_) {
    out.push_back(r.sb);
    WithHostMemory(out.back());
  }
  return out;
}

void SandboxManager::WithHostMemory(vmm::Sandbox& sb) const {
  if (sb.vmm_pid() == 0) return;
  if (auto usage = jails_.Usage(sb.spec().name())) {
    sb.set_host_memory_bytes(usage->memory_bytes);
    sb.set_host_memory_limit_bytes(usage->memory_limit_bytes);
  }
}

absl::Status SandboxManager::Watch(
    const std::string& name,
    const std::function<bool(const vmm::Sandbox&, const std::string&)>& on_change,
    const std::function<bool()>& cancelled) {
  uint64_t seen = UINT64_MAX;
  std::unique_lock<std::mutex> lock(mu_);
  while (!cancelled() && !stopping_) {
    auto it = records_.find(name);
    if (it == records_.end()) {
      return seen == UINT64_MAX ? absl::NotFoundError(absl::StrCat("no sandbox named ", name))
                                : absl::OkStatus();
    }
    if (it->second.version != seen) {
      seen = it->second.version;
      vmm::Sandbox sb = it->second.sb;
      std::string progress = it->second.progress;
      lock.unlock();
      bool more = on_change(sb, progress);
      lock.lock();
      if (!more) return absl::OkStatus();
      continue;
    }
    changed_.wait_for(lock, milliseconds(500));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::Channel>> SandboxManager::AgentChannel(
    const std::string& name) {
  std::shared_ptr<AgentLink> link;
  {
    std::unique_lock<std::mutex> lock(mu_);
    // A restarted vmmd reattaching to the running guest answers once it
    // has (the guest kept running; a caller must not see it as stopped).
    changed_.wait_for(lock, seconds(options_.boot_timeout_s), [&] {
      auto r = records_.find(name);
      return r == records_.end() || !r->second.reattaching || r->second.cancel || stopping_;
    });
    auto it = records_.find(name);
    if (it == records_.end()) {
      return absl::NotFoundError(
          absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
    }
    if (it->second.reattaching) {
      return absl::UnavailableError(absl::StrCat(
          "vmmd is still reattaching to sandbox ", name, " after a restart; try again"));
    }
    if (it->second.sb.state() != vmm::RUNNING || it->second.agent == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("sandbox ", name, " is ", StateName(it->second.sb.state()),
                       ", not running (`airlock start ", name, "`)"));
    }
    link = it->second.agent;
  }
  auto channel = link->Channel(seconds(10));
  if (!channel.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot reach the agent of sandbox ", name, ": ", channel.status().message()));
  }
  return channel;
}


void SandboxManager::AgentBroken(const std::string& name) {
  std::shared_ptr<AgentLink> link;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = records_.find(name);
    if (it != records_.end()) link = it->second.agent;
  }
  if (link != nullptr) link->Reset();
}

}  // namespace airlock::vmmd
