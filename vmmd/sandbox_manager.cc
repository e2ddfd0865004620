#include "vmmd/sandbox_manager.h"
#include "vmmd/sandbox_states.h"

#include "vmmd/sandbox_metadata.h"

#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/log.h"
#include "common/paths.h"
#include "common/status.h"
#include "common/subprocess.h"
#include "protos/agent/v1/agent.grpc.pb.h"
#include "protos/git/v1/git.grpc.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"
#include "vmmd/agent_image.h"
#include "vmmd/docker_setup.h"
#include "vmmd/guest_run.h"
#include "vmmd/images.h"

namespace airlock::vmmd {

namespace vmm = airlock::vmm::v1;
using std::chrono::milliseconds;
using std::chrono::seconds;
using std::chrono::steady_clock;

namespace {

// Tail is the last `lines` lines of a file.
std::string Tail(const std::string& path, int lines) {
  std::string text = ReadFileToString(path);
  size_t start = text.size();
  // Walk back over `lines` newlines (ignoring a final one).
  int seen = 0;
  while (start > 0) {
    if (text[start - 1] == '\n' && start != text.size() && ++seen == lines) break;
    --start;
  }
  return text.substr(start);
}

std::string StateName(vmm::SandboxState s) {
  std::string n = vmm::SandboxState_Name(s);
  for (char& c : n) c = static_cast<char>(tolower(c));
  return n;
}

// Clone mode: where the host repo appears in the guest, the port of the
// guest's git daemon, and the guest's workspace.
constexpr char kCloneSource[] = "/run/sandbox/source";
constexpr uint32_t kGitDaemonPort = 9418;

// The first boot clones the source; every boot makes sure the agent user
// has a Git identity and trusts the host-owned source.
// $1 = branch ("" for the source's HEAD), then pairs of remote name and URL.
constexpr char kCloneSetup[] = R"(set -e
git config --global --get safe.directory >/dev/null || git config --global --add safe.directory '*'
git config --global --get user.name >/dev/null || git config --global user.name "Airlock agent"
git config --global --get user.email >/dev/null || git config --global user.email agent@sandbox
W=$HOME/workspace
if [ ! -e "$W/.git" ]; then
  mkdir -p "$W"
  if [ -n "$1" ]; then
    git clone -q --no-hardlinks --branch "$1" /run/sandbox/source "$W"
  else
    git clone -q --no-hardlinks /run/sandbox/source "$W"
  fi
  cd "$W"
  git remote rename origin source
  shift
  while [ $# -ge 2 ]; do git remote add "$1" "$2"; shift 2; done
fi
)";

// PktLine encodes one git protocol packet.
std::string PktLine(const std::string& payload) {
  return absl::StrCat(absl::Hex(payload.size() + 4, absl::kZeroPad4), payload);
}

bool RemoveTree(const std::string& path) {
  return RunCommand({"rm", "-rf", "--one-file-system", path}, {}, "", 120).exit_code == 0;
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
                         InstanceName(options_.state_dir)}) {
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
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no sandbox named \"", name,
                                            "\" (see `airlock ls`)"));
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
  }
  changed_.notify_all();
}

std::string SandboxManager::Accelerator() {
  std::lock_guard<std::mutex> lock(accel_mu_);
  if (!accelerator_.empty()) return accelerator_;
  if (options_.accelerator != "auto") return accelerator_ = options_.accelerator;
  auto images = LocateGuestImages(options_.image_dir);
  if (!images.ok()) return "tcg";
  // One probe per host boot, guest kernel and QEMU build: the answer
  // cannot change otherwise.
  std::string boot_id = ReadFileToString("/proc/sys/kernel/random/boot_id");
  struct stat st {};
  stat(images->kernel.c_str(), &st);
  std::string key = absl::StrCat("accel:", boot_id.substr(0, 36), ":", images->release, ":",
                                  st.st_mtime, ":", hypervisor_->Build());
  auto cached = store_->Setting(key);
  if (cached.ok() && !cached->empty()) return accelerator_ = *cached;
  AIRLOCK_LOG_INFO("probing KVM");
  auto [accel, why] = hypervisor_->ProbeAccelerator(images->kernel, images->initrd,
                                                    options_.state_dir);
  AIRLOCK_LOG_INFO("accelerator chosen", {{"accelerator", accel}, {"reason", why}});
  // Without the cache the next vmmd start probes again; nothing else.
  if (absl::Status s = store_->SetSetting(key, accel); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot cache the accelerator verdict", {{"error", std::string(s.message())}});
  }
  return accelerator_ = accel;
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
  // Kits first: their resources and ports shape the rest. policyd records
  // the grant now; every refusal below drops it again.
  struct KitGrant {
    SandboxManager* manager;
    std::string name;
    bool reserved = false;  // the name is in creating_
    bool held = false;      // policyd and secretsd hold state for it
    ~KitGrant() {
      if (held) {
        // Best effort: the create already failed with its own error, and a
        // grant left behind is dropped again by the next create of the name.
        if (absl::Status s = manager->ForgetKits(name); !s.ok()) {
          AIRLOCK_LOG_WARN("cannot drop the kit grant of a create that failed",
                           {{"sandbox", name}, {"error", std::string(s.message())}});
        }
        manager->ForgetKitRegistration(name);
      }
      if (reserved) {
        std::lock_guard<std::mutex> lock(manager->mu_);
        manager->creating_.erase(name);
      }
    }
  } kit_grant{this, spec.name()};
  airlock::policy::v1::ResolveResponse kits;
  std::vector<std::string> kit_skipped;
  if (!spec.kits().empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (records_.count(spec.name()) || creating_.count(spec.name())) {
        return absl::AlreadyExistsError(absl::StrCat(
            "a sandbox named \"", spec.name(), "\" already exists; choose another --name or "
            "remove it with `airlock rm ", spec.name(), "`"));
      }
      creating_.insert(spec.name());
      kit_grant.reserved = true;
    }
    // A grant left by a sandbox of this name that is gone is not this
    // sandbox's consent.
    if (absl::Status s = ForgetKits(spec.name()); !s.ok()) return s;
    kit_grant.held = true;
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
  if (spec.mounts_size() > 0) {
    std::lock_guard<std::mutex> lock(mu_);
    if (records_.count(spec.name())) {
      return absl::AlreadyExistsError(absl::StrCat(
          "a sandbox named \"", spec.name(), "\" already exists; choose another --name or "
          "remove it with `airlock rm ", spec.name(), "`"));
    }
  }
  vmm::CloneInfo clone;
  if (spec.clone()) {
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
    if (absl::Status s = peers_.git->Baseline(spec.name(), paths); !s.ok()) return s;
  }

  // An agent install's own sandbox is registered with secretsd first, and
  // without the global secrets: no install script gets the user's keys.
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
    if (records_.count(spec.name()) || (!kit_grant.reserved && creating_.count(spec.name()))) {
      // A create of the same name won the race; what policyd and secretsd
      // hold for the name is its own.
      kit_grant.held = false;
      return absl::AlreadyExistsError(absl::StrCat(
          "a sandbox named \"", spec.name(), "\" already exists; choose another --name or "
          "remove it with `airlock rm ", spec.name(), "`"));
    }
    if (absl::Status s = store_->Insert(sb); !s.ok()) return s;
    kit_grant.held = false;
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

absl::Status SandboxManager::PrepareDisk(const std::string& name) {
  std::string dir = SandboxDir(name);
  if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot prepare the disk: ", s.message()));
  }
  vmm::ImageRef image;
  {
    std::lock_guard<std::mutex> lock(mu_);
    image = records_[name].sb.image();
  }
  // A built-in agent's image that did not exist at create is made first.
  if (image.digest().empty() && !image.name().empty()) {
    auto installed = InstallAgentImage(name);
    if (!installed.ok()) return installed.status();
    image = *installed;
    if (absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) { *sb.mutable_image() = image; });
        !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<std::string> base = BootDiskFor(name, image);
  absl::Status s = base.ok() ? CreateOverlay(*base, dir + "/disk.qcow2") : base.status();
  if (s.ok()) {
    vmm::SandboxSpec spec;
    {
      std::lock_guard<std::mutex> lock(mu_);
      spec = records_[name].sb.spec();
    }
    if (HasDocker(spec)) s = MakeDockerDisk(dir + "/docker.img", spec.docker_disk_mib());
  }
  if (!s.ok()) {
    return absl::Status(s.code(), absl::StrCat("cannot prepare the disk: ", s.message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> SandboxManager::BootDiskFor(const std::string& name,
                                                        const vmm::ImageRef& image) {
  // Sandboxes recorded before the image store name no image: the base.
  vmm::ImageRef ref = image;
  if (ref.digest().empty()) {
    auto base = images_->Resolve("");
    if (!base.ok()) return base.status();
    ref = ImageCatalog::RefOf(*base, "");
  }
  return images_->BootDisk(ref, [&](const std::string& what, uint64_t, uint64_t) {
    SetProgress(name, what);
  });
}

Usage SandboxManager::ImageUsage() {
  Usage usage;
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& [name, r] : records_) {
    if (!r.sb.image().digest().empty()) usage[r.sb.image().digest()].push_back(name);
  }
  return usage;
}

void SandboxManager::Boot(const std::string& name, bool launch) {
  absl::Status s = BootSteps(name, launch);
  if (!s.ok()) {
    vmm::Sandbox sb;
    {
      std::lock_guard<std::mutex> lock(mu_);
      sb = records_[name].sb;
    }
    KillVm(sb);
    bool cancelled = s.code() == absl::StatusCode::kCancelled;
    UpdateOrWarn(name, "", [&](vmm::Sandbox& sb) {
      sb.set_state(cancelled ? vmm::STOPPED : vmm::FAILED);
      sb.set_failure(cancelled ? "" : std::string(s.message()));
      sb.set_vmm_pid(0);
    });
    if (!cancelled) {
      AIRLOCK_LOG_WARN("boot failed", {{"sandbox", name}, {"reason", std::string(s.message())}});
    }
  }
  End(name);
}

absl::Status SandboxManager::BootSteps(const std::string& name, bool launch) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  pid_t pid = static_cast<pid_t>(sb.vmm_pid());
  if (launch) {
    // A fresh boot arms a fresh deadline when it is running.
    if (sb.expires_at() != 0) {
      UpdateOrWarn(name, "", [](vmm::Sandbox& s) { s.set_expires_at(0); });
    }
    auto images = LocateGuestImages(options_.image_dir);
    if (!images.ok()) return images.status();
    struct stat st;
    if (stat((SandboxDir(name) + "/disk.qcow2").c_str(), &st) != 0) {
      // A create that never made the disk (vmmd stopped meanwhile, an agent
      // install failed) makes it now; the image may have changed with it.
      if (absl::Status s = PrepareDisk(name); !s.ok()) return s;
      std::lock_guard<std::mutex> lock(mu_);
      sb = records_[name].sb;
    }
    // A docker disk whose making was cut short is made now (an existing
    // one is the engine's state and kept).
    if (HasDocker(sb.spec())) {
      if (absl::Status s = MakeDockerDisk(SandboxDir(name) + "/docker.img",
                                          sb.spec().docker_disk_mib());
          !s.ok()) {
        return s;
      }
    }
    SetProgress(name, "choosing accelerator");
    std::string accel = Accelerator();
    sb.set_accelerator(accel);
    if (absl::Status s = AssignJail(name, sb); !s.ok()) return s;
    VmConfig config = ConfigFor(sb);
    config.kernel = images->kernel;
    config.initrd = images->initrd;
    // The previous boot's console is kept beside the new one.
    rename(config.console_log.c_str(), (config.console_log + ".1").c_str());
    if (absl::Status s = MakeDirs(config.socket_dir, 0700); !s.ok()) return s;
    if (config.jail_uid != 0) {
      if (absl::Status s = jails_.Prepare(config); !s.ok()) {
        return absl::Status(s.code(), absl::StrCat("cannot prepare the jail: ", s.message()));
      }
    }
    unlink(config.agent_socket.c_str());
    unlink(config.egress_socket.c_str());
    unlink(config.vmm_log.c_str());
    std::vector<Share> shares = SharesOf(sb);
    for (size_t i = 0; i < shares.size(); ++i) {
      const Share& share = shares[i];
      for (pid_t old : ProcessesMatching("--socket-path=" + share.socket)) kill(old, SIGKILL);
      ShareJail jail = jails_.ForShare(config, i);
      auto fsd = StartShare(share, config.jail_uid != 0 ? &jail : nullptr,
                            absl::StrCat(config.dir, "/shares/", i),
                            absl::StrCat(config.dir, "/virtiofsd", i, ".log"));
      if (!fsd.ok()) return fsd.status();
    }
    auto launched = hypervisor_->Launch(config);
    if (!launched.ok()) return launched.status();
    pid = *launched;
    absl::Status s = Update(name, "booting kernel", [&](vmm::Sandbox& sb) {
      sb.set_state(vmm::STARTING);
      sb.set_failure("");
      sb.set_accelerator(accel);
      sb.set_vmm_pid(pid);
      sb.set_kernel(images->release);
    });
    if (!s.ok()) return s;
  }
  return WaitForAgent(name, pid, launch);
}

absl::Status SandboxManager::WaitForAgent(const std::string& name, pid_t pid,
                                          bool mount_shares) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  VmConfig config = ConfigFor(sb);
  auto deadline = steady_clock::now() + seconds(options_.boot_timeout_s);
  auto cancelled = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return records_[name].cancel || stopping_;
  };
  // The agent announces on the console that its port is open; connecting
  // earlier would queue bytes for a guest that is not listening yet.
  bool ready = false;
  while (!ready) {
    if (cancelled()) return absl::CancelledError("boot cancelled");
    if (!ProcessAlive(pid)) {
      return absl::UnavailableError(FailureReason(name, "the hypervisor exited during boot"));
    }
    std::string console = ReadFileToString(config.console_log);
    size_t failed = console.find("AIRLOCK-AGENT-FAILED");
    if (failed != std::string::npos) {
      return absl::UnavailableError(FailureReason(
          name, console.substr(failed, console.find('\n', failed) - failed)));
    }
    ready = console.find("AIRLOCK-AGENT-READY") != std::string::npos;
    if (steady_clock::now() > deadline) {
      return absl::DeadlineExceededError(FailureReason(
          name, absl::StrCat("the guest agent did not start within ", options_.boot_timeout_s,
                             " s")));
    }
    if (!ready) std::this_thread::sleep_for(milliseconds(20));
  }
  SetProgress(name, "waiting for agent");
  auto link = std::make_shared<AgentLink>(config.agent_socket);
  std::string last;
  while (steady_clock::now() < deadline) {
    if (cancelled()) return absl::CancelledError("boot cancelled");
    if (!ProcessAlive(pid)) {
      return absl::UnavailableError(FailureReason(name, "the hypervisor exited during boot"));
    }
    auto channel = link->Channel(seconds(10));
    if (!channel.ok()) {
      last = std::string(channel.status().message());
      std::this_thread::sleep_for(milliseconds(100));
      continue;
    }
    auto stub = airlock::agent::v1::Agent::NewStub(*channel);
    grpc::ClientContext ctx;
    DeadlineAfter(ctx, seconds(10));
    airlock::agent::v1::PingResponse pong;
    grpc::Status s = stub->Ping(&ctx, {}, &pong);
    if (s.ok() && mount_shares) {
      for (const Share& share : SharesOf(sb)) {
        grpc::ClientContext mctx;
        DeadlineAfter(mctx, seconds(30));
        airlock::agent::v1::MountRequest mr;
        mr.set_tag(share.tag);
        mr.set_path(share.guest_path);
        mr.set_read_only(share.mount.read_only());
        mr.set_file(share.file);
        airlock::agent::v1::Empty empty;
        grpc::Status ms = stub->Mount(&mctx, mr, &empty);
        if (!ms.ok()) {
          return absl::UnavailableError(FailureReason(
              name, absl::StrCat("cannot mount ", share.mount.host_path(), " in the guest: ",
                                 ms.error_message())));
        }
      }
    }
    if (s.ok() && mount_shares && sb.spec().clone()) {
      SetProgress(name, "cloning the source");
      if (absl::Status cs = SetUpClone(sb, *channel); !cs.ok()) {
        return absl::FailedPreconditionError(FailureReason(name, std::string(cs.message())));
      }
    }
    if (s.ok()) {
      SetProgress(name, "attaching egress");
      if (absl::Status es = AttachEgress(name, config); !es.ok()) {
        return absl::UnavailableError(FailureReason(name, std::string(es.message())));
      }
      // On a live guest (vmmd restarted) this finds the engine running, or
      // starts it when the restart came before it did.
      if (HasDocker(sb.spec())) {
        SetProgress(name, "starting dockerd");
        if (absl::Status ds = StartDocker(name, *channel); !ds.ok()) {
          return absl::Status(ds.code(), FailureReason(name, std::string(ds.message())));
        }
      }
      if (mount_shares) {
        if (absl::Status ks = ApplyKitsAtBoot(name, *channel); !ks.ok()) {
          return absl::Status(ks.code(), FailureReason(name, std::string(ks.message())));
        }
      } else if (sb.has_kit_plan()) {
        // Reattaching (vmmd restarted under a live guest): an install cut
        // short cannot be resumed; a finished one means runtime rules.
        if (!sb.kit_installed()) {
          return absl::FailedPreconditionError(FailureReason(
              name, "vmmd restarted while the kits' install hooks ran; start the sandbox again "
                    "(`airlock stop` then `airlock start`) to rerun them"));
        }
        if (absl::Status ps = SetKitPhase(name, sb.kit_plan(), "runtime"); !ps.ok()) {
          return absl::Status(ps.code(), FailureReason(name, std::string(ps.message())));
        }
      }
      {
        std::lock_guard<std::mutex> lock(mu_);
        records_[name].agent = link;
      }
      absl::Status st = Update(name, "", [&](vmm::Sandbox& sb) {
        sb.set_state(vmm::RUNNING);
        sb.set_kernel(pong.kernel());
        // Armed once per boot: a reattach after a vmmd restart keeps it.
        if (sb.expires_at() == 0) sb.set_expires_at(ArmedExpiry(sb.spec(), time(nullptr)));
      });
      {
        // The agent answers: exec need not wait for the ports and remote.
        std::lock_guard<std::mutex> lock(mu_);
        records_[name].reattaching = false;
        changed_.notify_all();
      }
      if (st.ok()) {
        OpenPorts(name);
        if (sb.spec().clone()) PublishClone(name);
      }
      return st;
    }
    last = s.error_message();
    link->Reset();
  }
  return absl::DeadlineExceededError(
      FailureReason(name, absl::StrCat("the guest agent does not answer: ", last)));
}

absl::Status SandboxManager::AttachEgress(const std::string& name, const VmConfig& config) {
  return peers_.proxy->Attach(name, config.egress_socket);
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

void SandboxManager::DetachEgress(const std::string& name) {
  // Best effort: proxyd drops an attachment whose channel closes anyway.
  if (absl::Status s = peers_.proxy->Detach(name); !s.ok()) {
    AIRLOCK_LOG_WARN("cannot detach egress from proxyd",
                     {{"sandbox", name}, {"error", std::string(s.message())}});
  }
}

std::string SandboxManager::FailureReason(const std::string& name, const std::string& what) const {
  std::string dir = SandboxDir(name);
  std::string out = what;
  std::string vmm_log = Tail(dir + "/vmm.log", 5);
  if (!vmm_log.empty()) absl::StrAppend(&out, "\nhypervisor log:\n", vmm_log);
  absl::StrAppend(&out, "\nconsole (", dir, "/console.log):\n", Tail(dir + "/console.log", 15));
  return out;
}

pid_t SandboxManager::FindVm(const vmm::Sandbox& sb) const {
  std::string marker = hypervisor_->Marker(ConfigFor(sb));
  pid_t pid = static_cast<pid_t>(sb.vmm_pid());
  if (pid > 0 && ProcessAlive(pid) &&
      ProcessCmdline(pid).find(marker) != std::string::npos) {
    return pid;
  }
  std::vector<pid_t> found = ProcessesMatching(marker);
  return found.empty() ? 0 : found.front();
}

void SandboxManager::KillVm(const vmm::Sandbox& sb) {
  std::string marker = hypervisor_->Marker(ConfigFor(sb));
  std::vector<pid_t> pids = ProcessesMatching(marker);
  for (const Share& share : SharesOf(sb)) {
    for (pid_t p : ProcessesMatching("--socket-path=" + share.socket)) pids.push_back(p);
  }
  for (pid_t pid : pids) {
    kill(pid, SIGKILL);
    for (int i = 0; i < 250 && ProcessAlive(pid); ++i) std::this_thread::sleep_for(milliseconds(20));
  }
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
  auto deadline = steady_clock::now() + seconds(timeout_s > 0 ? timeout_s : 10);
  while (pid > 0 && ProcessAlive(pid) && steady_clock::now() < deadline) {
    std::this_thread::sleep_for(milliseconds(20));
  }
  if (pid > 0 && ProcessAlive(pid)) {
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
  if (!RemoveTree(SandboxDir(name))) {
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

absl::StatusOr<vmm::Sandbox> SandboxManager::Get(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) {
    return absl::NotFoundError(absl::StrCat("no sandbox named \"", name, "\" (see `airlock ls`)"));
  }
  vmm::Sandbox sb = it->second.sb;
  WithHostMemory(sb);
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

absl::Status SandboxManager::AssignJail(const std::string& name, vmm::Sandbox& sb) {
  if (!jails_.enabled()) return absl::OkStatus();
  uint32_t base = 0;
  {
    // Picked and taken under one lock: two boots never get one block.
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<uint32_t> used;
    for (const auto& [other, r] : records_) {
      if (other != name && r.sb.jail_uid() != 0) used.push_back(r.sb.jail_uid());
    }
    auto assigned = jails_.Assign(records_[name].sb.jail_uid(), used);
    if (!assigned.ok()) return assigned.status();
    base = *assigned;
    records_[name].sb.set_jail_uid(base);
  }
  sb.set_jail_uid(base);
  return Update(name, "", [&](vmm::Sandbox& s) { s.set_jail_uid(base); });
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
      return r == records_.end() || !r->second.reattaching || stopping_;
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

absl::StatusOr<vmm::CloneInfo> SandboxManager::PrepareClone(const vmm::SandboxSpec& spec) {
  auto resp = peers_.git->PrepareClone(spec.name(), spec.mounts(0).host_path(), spec.branch());
  if (!resp.ok()) return resp.status();
  vmm::CloneInfo info;
  info.set_source_root(resp->source_root());
  info.set_branch(resp->branch());
  for (const auto& [k, v] : resp->remotes()) (*info.mutable_remotes())[k] = v;
  info.set_host_remote(absl::StrCat("sandbox-", spec.name()));
  return info;
}


absl::Status SandboxManager::SetUpClone(const vmm::Sandbox& sb,
                                        std::shared_ptr<grpc::Channel> agent) {
  std::vector<std::string> argv = {"sh", "-c", kCloneSetup, "clone-setup", sb.clone().branch()};
  std::map<std::string, std::string> remotes(sb.clone().remotes().begin(),
                                             sb.clone().remotes().end());
  for (const auto& [name, url] : remotes) {
    argv.push_back(name);
    argv.push_back(url);
  }
  auto setup = GuestRun(agent, {argv});
  if (!setup.ok()) return setup.status();
  if (setup->first != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cloning the source in the guest failed: ", setup->second));
  }
  GuestCommand git_daemon;
  git_daemon.argv = {"git", "daemon", "--reuseaddr", "--listen=127.0.0.1",
                     absl::StrCat("--port=", kGitDaemonPort), "--export-all",
                     "--base-path=/home/agent", "/home/agent/workspace"};
  git_daemon.detach = true;
  auto daemon = GuestRun(agent, git_daemon);
  if (!daemon.ok()) return daemon.status();
  // RUNNING promises a working remote: wait until the daemon listens.
  auto listening = GuestRun(
      agent, {{"bash", "-c",
               absl::StrCat("for i in $(seq 100); do (: <>/dev/tcp/127.0.0.1/", kGitDaemonPort,
                            ") 2>/dev/null && exit 0; sleep 0.1; done; exit 1")}});
  if (!listening.ok()) return listening.status();
  if (listening->first != 0) {
    return absl::FailedPreconditionError("the git daemon in the guest did not start listening");
  }
  return absl::OkStatus();
}

void SandboxManager::PublishClone(const std::string& name) {
  vmm::Sandbox sb;
  bool retrying;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
    retrying = records_[name].publish_pending;
  }
  bool pending = false;
  for (const auto& p : sb.ports()) {
    if (p.sandbox_port() != kGitDaemonPort) continue;
    std::string url = absl::StrCat("git://", p.host_ip(), ":", p.host_port(), "/workspace");
    absl::Status s = peers_.git->Publish(name, url);
    if (s.ok()) continue;
    // Until gitd answers the sandbox runs without the remote and the
    // monitor retries (warning once, not at every try). A refusal is gitd's
    // answer: retrying would not change it.
    bool transient = s.code() == absl::StatusCode::kUnavailable ||
                     s.code() == absl::StatusCode::kDeadlineExceeded;
    if (transient) {
      pending = true;
      if (!retrying) {
        AIRLOCK_LOG_WARN("cannot publish the sandbox remote yet; retrying",
                         {{"sandbox", name}, {"error", std::string(s.message())}});
      }
    } else {
      AIRLOCK_LOG_ERROR("gitd refused the sandbox remote; `git fetch sandbox-NAME` will not work",
                        {{"sandbox", name}, {"error", std::string(s.message())}});
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it == records_.end()) return;
  Record& r = it->second;
  r.publish_pending = pending;
  if (!pending) {
    r.publish_backoff_s = 0;
  } else {
    // 1, 2, 4 ... 30 s between tries.
    r.publish_backoff_s = std::min(30, std::max(1, r.publish_backoff_s * 2));
    r.next_publish_try = time(nullptr) + r.publish_backoff_s;
  }
}

void SandboxManager::RetryPublish(const std::string& name) {
  {
    // Held through the call so that rm's Unpublish comes after it, never
    // before (a remote published after rm would outlive the sandbox).
    std::lock_guard<std::mutex> publishing(publish_mu_);
    bool go;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = records_.find(name);
      go = it != records_.end() && !it->second.busy && it->second.publish_pending &&
           it->second.sb.state() == vmm::RUNNING;
    }
    if (go) PublishClone(name);
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(name);
  if (it != records_.end()) it->second.publish_in_flight = false;
}

void SandboxManager::AnswerStoppedClone(const vmm::Sandbox& sb) {
  if (!sb.spec().clone()) return;
  const std::string& name = sb.spec().name();
  for (const auto& p : sb.spec().ports()) {
    if (p.sandbox_port() != kGitDaemonPort) continue;
    std::string msg = absl::StrCat("ERR sandbox ", name, " is stopped; start it with `airlock start ",
                                   name, "` and fetch again\n");
    if (absl::Status s = ports_.OpenResponder(name, p, PktLine(msg)); !s.ok()) {
      AIRLOCK_LOG_WARN("cannot answer on the stopped sandbox's git port",
                       {{"sandbox", name}, {"error", std::string(s.message())}});
    }
  }
}

void SandboxManager::OpenPorts(const std::string& name) {
  vmm::Sandbox sb;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sb = records_[name].sb;
  }
  ports_.CloseAll(name);
  std::vector<vmm::PortMapping> open;
  std::vector<vmm::PortMapping> requested(sb.spec().ports().begin(), sb.spec().ports().end());
  for (auto& m : requested) {
    auto bound = ports_.Open(name, m, [this, name] { return AgentChannel(name); });
    if (!bound.ok()) {
      AIRLOCK_LOG_WARN("cannot publish port", {{"sandbox", name},
                                               {"error", std::string(bound.status().message())}});
      continue;
    }
    // An ephemeral host port, once chosen, is kept for later boots.
    m.set_host_port(bound->host_port());
    open.push_back(*bound);
  }
  UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
    s.clear_ports();
    for (const auto& m : open) *s.add_ports() = m;
    s.mutable_spec()->clear_ports();
    for (const auto& m : requested) *s.mutable_spec()->add_ports() = m;
  });
}

void SandboxManager::ClosePorts(const std::string& name) {
  ports_.CloseAll(name);
  UpdateOrWarn(name, "", [](vmm::Sandbox& s) { s.clear_ports(); });
}

absl::StatusOr<vmm::PortMapping> SandboxManager::PublishPort(const std::string& name,
                                                             vmm::PortMapping m) {
  if (absl::Status s = ValidatePortMapping(&m); !s.ok()) return s;
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  for (const auto& p : sb->spec().ports()) {
    if (p.sandbox_port() == m.sandbox_port() && p.host_ip() == m.host_ip() &&
        (m.host_port() == 0 || m.host_port() == p.host_port())) {
      return absl::AlreadyExistsError(absl::StrCat("sandbox port ", m.sandbox_port(),
                                                   " is already published on ", p.host_ip(), ":",
                                                   p.host_port()));
    }
  }
  if (sb->state() != vmm::RUNNING) {
    return absl::FailedPreconditionError(absl::StrCat(
        "sandbox ", name, " is not running (`airlock start ", name, "` first)"));
  }
  auto bound = ports_.Open(name, m, [this, name] { return AgentChannel(name); });
  if (!bound.ok()) return bound.status();
  absl::Status s = Update(name, "", [&](vmm::Sandbox& sb) {
    *sb.add_ports() = *bound;
    *sb.mutable_spec()->add_ports() = *bound;
  });
  if (!s.ok()) {
    ports_.Close(name, *bound);
    return s;
  }
  return *bound;
}

absl::Status SandboxManager::UnpublishPort(const std::string& name, const vmm::PortMapping& m) {
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  bool found = false;
  for (const auto& p : sb->spec().ports()) found = found || SameMapping(p, m);
  if (!found) {
    return absl::NotFoundError(absl::StrCat("sandbox ", name, " has no published port ",
                                            m.sandbox_port(), " matching that mapping"));
  }
  ports_.Close(name, m);
  return Update(name, "", [&](vmm::Sandbox& s) {
    auto keep = [&](google::protobuf::RepeatedPtrField<vmm::PortMapping>* list) {
      google::protobuf::RepeatedPtrField<vmm::PortMapping> out;
      for (const auto& p : *list) {
        if (!SameMapping(p, m)) *out.Add() = p;
      }
      list->Swap(&out);
    };
    keep(s.mutable_ports());
    keep(s.mutable_spec()->mutable_ports());
  });
}

absl::StatusOr<std::vector<vmm::PortMapping>> SandboxManager::ListPorts(const std::string& name) {
  auto sb = Get(name);
  if (!sb.ok()) return sb.status();
  const auto& list = sb->state() == vmm::RUNNING ? sb->ports() : sb->spec().ports();
  return std::vector<vmm::PortMapping>(list.begin(), list.end());
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

absl::Status SandboxManager::Recover() {
  if (absl::Status s = MakeDirs(options_.state_dir + "/sandboxes", 0700); !s.ok()) return s;
  auto all = store_->LoadAll();
  if (!all.ok()) return all.status();
  std::vector<std::pair<std::string, pid_t>> reattach;
  std::vector<std::string> reboot;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& sb : *all) records_[sb.spec().name()].sb = sb;
  }
  for (const auto& sb : *all) {
    const std::string& name = sb.spec().name();
    pid_t pid = FindVm(sb);
    switch (sb.state()) {
      case vmm::STARTING:
        // A boot cut short may have any of its steps undone (mounts, the
        // clone, kit hooks, dockerd): the guest is not the user's yet, so
        // it boots again from the start.
        if (pid > 0) {
          KillVm(sb);
          // An unfinished agent install is removed below, not booted.
          if (sb.installs_agent_image().empty()) {
            AIRLOCK_LOG_INFO("restarting a boot vmmd did not finish",
                             {{"sandbox", name}, {"pid", std::to_string(pid)}});
            reboot.push_back(name);
          } else {
            UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
              s.set_state(vmm::FAILED);
              s.set_vmm_pid(0);
              s.set_failure("vmmd stopped during the agent install");
            });
          }
          break;
        }
        [[fallthrough]];
      case vmm::RUNNING:
        if (pid > 0) {
          reattach.emplace_back(name, pid);
        } else {
          std::string console = ReadFileToString(ConfigFor(sb).console_log);
          bool powered_off = console.find("reboot: Power down") != std::string::npos;
          UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
            s.set_state(powered_off ? vmm::STOPPED : vmm::FAILED);
            s.set_vmm_pid(0);
            if (!powered_off) {
              s.set_failure(FailureReason(name, "the VM exited while vmmd was not running"));
            }
          });
        }
        break;
      case vmm::CREATING:
        if (pid > 0) KillVm(sb);
        unlink((SandboxDir(name) + "/disk.qcow2.tmp").c_str());
        UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
          s.set_state(vmm::FAILED);
          s.set_failure("vmmd stopped while the sandbox was being created; "
                        "`airlock start` finishes it");
        });
        break;
      default:
        if (pid > 0) KillVm(sb);
        if (sb.state() == vmm::STOPPED) AnswerStoppedClone(sb);
        if (sb.state() == vmm::STOPPING) {
          UpdateOrWarn(name, "", [](vmm::Sandbox& s) {
            s.set_state(vmm::STOPPED);
            s.set_vmm_pid(0);
          });
        }
        break;
    }
  }
  // VM processes of this state dir that no stored sandbox owns (a crash
  // between launch and the state write) are killed.
  std::string prefix = absl::StrCat("file=", options_.state_dir, "/sandboxes/");
  for (pid_t pid : ProcessesMatching(prefix)) {
    std::string cmd = ProcessCmdline(pid);
    if (cmd.find("qemu") == std::string::npos) continue;
    bool owned = false;
    for (const auto& sb : *all) {
      if (cmd.find(hypervisor_->Marker(ConfigFor(sb))) != std::string::npos) owned = true;
    }
    if (!owned) {
      AIRLOCK_LOG_WARN("killing an orphan VM", {{"pid", std::to_string(pid)}});
      kill(pid, SIGKILL);
    }
  }
  for (const auto& [name, pid] : reattach) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[name].busy = true;
      records_[name].reattaching = true;
    }
    AIRLOCK_LOG_INFO("reattaching", {{"sandbox", name}, {"pid", std::to_string(pid)}});
    UpdateOrWarn(name, "reattaching", [&](vmm::Sandbox& s) { s.set_vmm_pid(pid); });
    StartWorker([this, name = name] { Boot(name, false); });
  }
  for (const auto& name : reboot) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      records_[name].busy = true;
    }
    StartWorker([this, name = name] { Boot(name, true); });
  }
  monitor_ = std::thread([this] { Monitor(); });
  // Agent installs a previous vmmd did not finish: their sandboxes are
  // vmmd's own, and the sandbox that waited is FAILED (start retries it).
  for (const auto& sb : *all) {
    if (sb.installs_agent_image().empty()) continue;
    AIRLOCK_LOG_INFO("removing an unfinished agent install", {{"sandbox", sb.spec().name()}});
    StartWorker([this, name = sb.spec().name()] {
      if (absl::Status s = Remove(name, true); !s.ok()) {
        AIRLOCK_LOG_ERROR("cannot remove an unfinished agent install; `airlock rm -f` it",
                          {{"sandbox", name}, {"error", std::string(s.message())}});
      }
    });
  }
  return absl::OkStatus();
}

void SandboxManager::Monitor() {
  while (!stopping_) {
    std::vector<vmm::Sandbox> running;
    std::vector<vmm::Sandbox> expired;
    std::vector<std::string> publish;
    {
      std::unique_lock<std::mutex> lock(mu_);
      changed_.wait_for(lock, milliseconds(500));
      int64_t now = time(nullptr);
      for (auto& [name, r] : records_) {
        if (r.busy || r.sb.state() != vmm::RUNNING) continue;
        if (r.publish_pending && !r.publish_in_flight && now >= r.next_publish_try) {
          r.publish_in_flight = true;
          publish.push_back(name);
        }
        if (Expired(r.sb, now) && !r.expiring) {
          r.expiring = true;
          expired.push_back(r.sb);
        } else {
          running.push_back(r.sb);
        }
      }
    }
    // Off this thread: a gitd that hangs must not stall noticing VM exits.
    for (const auto& name : publish) StartWorker([this, name] { RetryPublish(name); });
    // A deadline that passed applies its action once, off this thread.
    for (const auto& sb : expired) {
      std::string name = sb.spec().name();
      bool stop = sb.spec().on_timeout() == vmm::TIMEOUT_STOP;
      AIRLOCK_LOG_INFO("timeout reached", {{"sandbox", name}, {"action", stop ? "stop" : "delete"}});
      StartWorker([this, name, stop] {
        absl::Status s = stop ? Stop(name, 10).status() : Remove(name, true);
        if (!s.ok() && s.code() != absl::StatusCode::kNotFound) {
          AIRLOCK_LOG_WARN("timeout action failed; retrying in 30 s",
                           {{"sandbox", name}, {"error", std::string(s.message())}});
          UpdateOrWarn(name, "", [](vmm::Sandbox& sb) { sb.set_expires_at(time(nullptr) + 30); });
        }
        std::lock_guard<std::mutex> lock(mu_);
        auto it = records_.find(name);
        if (it != records_.end()) it->second.expiring = false;
      });
    }
    for (const auto& sb : running) {
      if (FindVm(sb) > 0) continue;
      const std::string& name = sb.spec().name();
      {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = records_.find(name);
        if (it == records_.end() || it->second.busy || it->second.sb.state() != vmm::RUNNING) continue;
        it->second.agent.reset();
      }
      ClosePorts(name);
      std::string console = ReadFileToString(ConfigFor(sb).console_log);
      bool powered_off = console.find("reboot: Power down") != std::string::npos;
      AIRLOCK_LOG_WARN("VM exited", {{"sandbox", name}, {"powered_off", powered_off ? "yes" : "no"}});
      UpdateOrWarn(name, "", [&](vmm::Sandbox& s) {
        s.set_state(powered_off ? vmm::STOPPED : vmm::FAILED);
        s.set_vmm_pid(0);
        s.set_expires_at(0);
        if (!powered_off) s.set_failure(FailureReason(name, "the VM exited unexpectedly"));
      });
    }
  }
}

void SandboxManager::Shutdown() {
  std::vector<std::string> names;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [name, r] : records_) {
      if (r.busy) r.cancel = true;
      if (r.sb.state() == vmm::RUNNING || r.busy) names.push_back(name);
    }
  }
  std::vector<std::thread> stops;
  for (const auto& name : names) {
    stops.emplace_back([this, name] {
      {
        std::unique_lock<std::mutex> lock(mu_);
        changed_.wait_for(lock, seconds(20), [&] { return !records_[name].busy; });
      }
      if (auto s = Stop(name, 10); !s.ok()) {
        AIRLOCK_LOG_WARN("cannot stop the sandbox", {{"sandbox", name},
                                                     {"error", std::string(s.status().message())}});
      }
    });
  }
  for (auto& t : stops) t.join();
  stopping_ = true;
  changed_.notify_all();
}

}  // namespace airlock::vmmd
