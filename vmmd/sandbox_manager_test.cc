// SandboxManager with a fake hypervisor and fake peers: create's rollback
// when a peer refuses, rm stopping before it loses anything, recovery of
// records a killed vmmd left mid-operation, and the snapshot key a new
// sandbox gets. Milliseconds each; the real boots are
// tests/sandbox_e2e_test's.
#include "vmmd/sandbox_manager.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <mutex>

#include "common/paths.h"
#include "common/state_db.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "vmmd/qemu_backend.h"
#include "vmmd/sandbox_store.h"
#include "vmmd/store/image_store.h"
#include "vmmd/store/oci.h"

namespace airlock::vmmd {
// The manager's snapshot key of a sandbox (its friend).
class SnapshotKeyProbe {
 public:
  static std::string KeyFor(SandboxManager& m, const airlock::vmm::v1::Sandbox& sb,
                            const std::string& disk, const std::string& accelerator) {
    return m.SnapshotKeyFor(sb, disk, accelerator);
  }
};

namespace {

namespace vmm = airlock::vmm::v1;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

namespace policypb = airlock::policy::v1;
namespace secretspb = airlock::secrets::v1;

// FakeHypervisor never starts a VM.
class FakeHypervisor : public Hypervisor {
 public:
  absl::StatusOr<pid_t> Launch(const VmConfig&) override {
    return absl::UnavailableError("fake hypervisor: no VMs here");
  }
  std::string Marker(const VmConfig& config) const override {
    return "airlock-fake-vm-marker-" + config.name;
  }
  std::pair<std::string, std::string> ProbeAccelerator(const std::string&, const std::string&,
                                                       const std::string&) override {
    return {"tcg", "fake"};
  }
  int MaxShares(bool docker) const override { return docker ? 1 : 2; }
};

// DescribingHypervisor is the fake whose snapshot keys are QemuBackend's:
// what a VM of a config is, by the QEMU command line it would get, with
// `qemu` (any file: nothing runs it) standing for QEMU's binary.
class DescribingHypervisor : public FakeHypervisor {
 public:
  explicit DescribingHypervisor(const std::string& qemu) : qemu_(qemu) {}
  std::string Describe(const VmConfig& config) const override { return qemu_.Describe(config); }
  size_t HotplugShares() const override { return 4; }

 private:
  QemuBackend qemu_;
};

// Calls records what the fake peers were asked, in order.
struct Calls {
  std::mutex mu;
  std::vector<std::string> log;
  void Add(const std::string& c) {
    std::lock_guard<std::mutex> lock(mu);
    log.push_back(c);
  }
  int Count(const std::string& c) {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<int>(std::count(log.begin(), log.end(), c));
  }
};

class FakeGit : public GitPeer {
 public:
  explicit FakeGit(Calls* c) : calls(c) {}
  absl::Status baseline;
  absl::Status Baseline(const std::string& s, const std::vector<std::string>&) override {
    calls->Add("git.Baseline " + s);
    return baseline;
  }
  absl::StatusOr<airlock::git::v1::PrepareCloneResponse> PrepareClone(
      const std::string& s, const std::string&, const std::string&) override {
    calls->Add("git.PrepareClone " + s);
    return absl::FailedPreconditionError("gitd refused to prepare the clone: not a repo");
  }
  absl::Status Publish(const std::string& s, const std::string&) override {
    calls->Add("git.Publish " + s);
    return absl::OkStatus();
  }
  absl::Status Unpublish(const std::string& s) override {
    calls->Add("git.Unpublish " + s);
    return absl::OkStatus();
  }
  Calls* calls;
};

class FakeProxy : public ProxyPeer {
 public:
  explicit FakeProxy(Calls* c) : calls(c) {}
  absl::Status Attach(const std::string& s, const std::string&) override {
    calls->Add("proxy.Attach " + s);
    return absl::OkStatus();
  }
  absl::Status Detach(const std::string& s) override {
    calls->Add("proxy.Detach " + s);
    return absl::OkStatus();
  }
  Calls* calls;
};

class FakeSecrets : public SecretsPeer {
 public:
  explicit FakeSecrets(Calls* c) : calls(c) {}
  absl::Status sentinels, forget;
  absl::StatusOr<std::map<std::string, std::string>> Sentinels(const std::string& s, bool,
                                                              bool) override {
    calls->Add("secrets.Sentinels " + s);
    if (!sentinels.ok()) return sentinels;
    return std::map<std::string, std::string>{{"GH_TOKEN", "proxy-managed"}};
  }
  absl::Status Forget(const std::string& s, bool keep_secrets) override {
    calls->Add(std::string(keep_secrets ? "secrets.ForgetRegistration " : "secrets.Forget ") + s);
    return forget;
  }
  absl::StatusOr<secretspb::BindKitResponse> BindKit(const secretspb::BindKitRequest& r) override {
    calls->Add("secrets.BindKit " + r.sandbox());
    return secretspb::BindKitResponse();
  }
  Calls* calls;
};

class FakePolicy : public PolicyPeer {
 public:
  explicit FakePolicy(Calls* c) : calls(c) {}
  absl::StatusOr<policypb::ResolveResponse> Resolve(const policypb::ResolveRequest& r) override {
    calls->Add("policy.Resolve " + r.sandbox());
    return policypb::ResolveResponse();
  }
  absl::Status ForgetKits(const std::string& s) override {
    calls->Add("policy.ForgetKits " + s);
    return absl::OkStatus();
  }
  absl::Status ForgetSandboxRules(const std::string& s) override {
    calls->Add("policy.ForgetSandboxRules " + s);
    return absl::OkStatus();
  }
  absl::Status SetKitPhase(const std::string& s, const std::string& phase) override {
    calls->Add("policy.SetKitPhase " + s + " " + phase);
    return absl::OkStatus();
  }
  absl::StatusOr<policypb::ListHoldsResponse> ListHolds(const std::string&) override {
    return policypb::ListHoldsResponse();
  }
  absl::StatusOr<policypb::ApproveResponse> Approve(const std::string&) override {
    return absl::NotFoundError("no hold");
  }
  Calls* calls;
};

class SandboxManagerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string d = dir_.path();
    // Guest images that exist (nothing boots them).
    ASSERT_TRUE(MakeDirs(d + "/img/kernel", 0755).ok());
    ASSERT_TRUE(MakeDirs(d + "/img/initramfs", 0755).ok());
    std::ofstream(d + "/img/kernel/vmlinuz") << "kernel";
    std::ofstream(d + "/img/kernel/release") << "6.1.0-test\n";
    std::ofstream(d + "/img/initramfs/initramfs.cpio") << "initrd";
    ASSERT_TRUE(MakeDirs(d + "/run", 0700).ok());
    ASSERT_TRUE(MakeDirs(d + "/state", 0700).ok());
    db_ = std::move(*StateDb::Open(d + "/state/vmmd.db"));
    store_ = std::make_unique<SandboxStore>(db_.get());
    ASSERT_TRUE(store_->Init().ok());
    auto images = ImageStore::Open(d + "/state/images", db_.get());
    ASSERT_TRUE(images.ok()) << images.status();
    image_store_ = std::move(*images);
    // A one-layer "base" image whose layer is not a tar: the disk step of
    // a create fails there, after everything this test looks at.
    std::string layer = *image_store_->PutBlob("not a tar");
    oci::ImageConfig c;
    c.diff_ids = {layer};
    std::string config = oci::SerializeConfig(c);
    std::string cd = *image_store_->PutBlob(config);
    oci::Manifest m;
    m.config = {oci::kConfigType, cd, static_cast<int64_t>(config.size()), {}};
    m.layers = {{oci::kLayerTarType, layer, 9, {}}};
    std::string manifest = *image_store_->PutBlob(oci::SerializeManifest(m));
    ASSERT_TRUE(image_store_->Tag("base:latest", manifest, "test").ok());
    catalog_ = std::make_unique<ImageCatalog>(image_store_.get(), RegistryOptions{}, d + "/img");
    git_ = std::make_shared<FakeGit>(&calls_);
    proxy_ = std::make_shared<FakeProxy>(&calls_);
    secrets_ = std::make_shared<FakeSecrets>(&calls_);
    policy_ = std::make_shared<FakePolicy>(&calls_);
  }

  std::unique_ptr<SandboxManager> NewManager(
      std::unique_ptr<Hypervisor> hypervisor = std::make_unique<FakeHypervisor>(),
      const std::string& guest_aslr = "auto") {
    ManagerOptions o;
    o.guest_aslr = guest_aslr;
    o.state_dir = dir_.path() + "/state";
    o.runtime_dir = dir_.path() + "/run";
    o.image_dir = dir_.path() + "/img";
    o.accelerator = "tcg";
    o.jail = false;
    auto m = std::make_unique<SandboxManager>(o, store_.get(), catalog_.get(),
                                              std::move(hypervisor), HostFacts{2, 4096},
                                              PeerClients{git_, proxy_, secrets_, policy_});
    catalog_->SetUsage([p = m.get()] { return p->ImageUsage(); });
    return m;
  }

  std::string SandboxDirOf(const std::string& name) const {
    return dir_.path() + "/state/sandboxes/" + name;
  }

  static vmm::SandboxSpec Spec(const std::string& name) {
    vmm::SandboxSpec s;
    s.set_name(name);
    s.set_agent("shell");
    s.set_memory_mib(1024);
    return s;
  }

  // WaitSettled waits until `name` is no longer CREATING or STARTING.
  static vmm::Sandbox WaitSettled(SandboxManager& m, const std::string& name) {
    for (int i = 0; i < 500; ++i) {
      auto sb = m.Get(name);
      if (sb.ok() && sb->state() != vmm::CREATING && sb->state() != vmm::STARTING) return *sb;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return vmm::Sandbox();
  }

  testing::ShortTempDir dir_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<SandboxStore> store_;
  std::unique_ptr<ImageStore> image_store_;
  std::unique_ptr<ImageCatalog> catalog_;
  Calls calls_;
  std::shared_ptr<FakeGit> git_;
  std::shared_ptr<FakeProxy> proxy_;
  std::shared_ptr<FakeSecrets> secrets_;
  std::shared_ptr<FakePolicy> policy_;
};

TEST_F(SandboxManagerTest, ASecretsdRefusalUndoesTheKitGrantAndRecordsNothing) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  secrets_->sentinels = absl::FailedPreconditionError("secretsd refused to give variables: full");
  vmm::SandboxSpec spec = Spec("k1");
  spec.add_kits("/kits/one");
  auto created = m->Create(spec, false);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kFailedPrecondition) << created.status();
  EXPECT_EQ(created.status().message(), "secretsd refused to give variables: full");
  // The grant policyd recorded for this create is dropped again (once
  // before resolving, once when the create failed), and secretsd's
  // registration with it.
  EXPECT_EQ(calls_.Count("policy.Resolve k1"), 1);
  EXPECT_EQ(calls_.Count("policy.ForgetKits k1"), 2);
  EXPECT_EQ(calls_.Count("secrets.ForgetRegistration k1"), 1);
  EXPECT_TRUE(m->List().empty());
  auto stored = store_->LoadAll();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  // The name is free again: the same create gets as far as before.
  auto again = m->Create(spec, false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(calls_.Count("policy.Resolve k1"), 2);
}

TEST_F(SandboxManagerTest, AGitdRefusalOfTheBaselineKeepsItsCodeAndRecordsNothing) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  std::string ws = dir_.path() + "/ws";
  ASSERT_TRUE(MakeDirs(ws, 0755).ok());
  git_->baseline = absl::PermissionDeniedError("gitd refused to record the baseline: not yours");
  vmm::SandboxSpec spec = Spec("b1");
  spec.add_mounts()->set_host_path(ws);
  auto created = m->Create(spec, false);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kPermissionDenied) << created.status();
  EXPECT_EQ(created.status().message().find("daemon start"), absl::string_view::npos);
  EXPECT_EQ(calls_.Count("secrets.Sentinels b1"), 0) << "nothing registered after the refusal";
  EXPECT_TRUE(m->List().empty());
}

TEST_F(SandboxManagerTest, RmStopsBeforeLosingAnythingWhenSecretsdCannotForget) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  auto created = m->Create(Spec("r1"), false);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->state(), vmm::CREATING);
  // The fake image's layer is not a tar: the disk step fails, with why.
  vmm::Sandbox settled = WaitSettled(*m, "r1");
  ASSERT_EQ(settled.state(), vmm::FAILED) << settled.DebugString();
  EXPECT_FALSE(settled.failure().empty());

  secrets_->forget = absl::UnavailableError(
      "secretsd at /run/airlock/secretsd.sock did not forget the sandbox's secrets (down); "
      "start it with `airlock daemon start`");
  absl::Status rm = m->Remove("r1", false);
  EXPECT_EQ(rm.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(rm.message().rfind("cannot remove sandbox r1: secretsd must forget its secrets first: "
                               "secretsd at ",
                               0),
            0u)
      << rm;
  EXPECT_TRUE(m->Get("r1").ok()) << "still there, to remove once secretsd answers";
  EXPECT_TRUE(Exists(SandboxDirOf("r1"))) << "its directory is kept too";
  EXPECT_EQ(calls_.Count("proxy.Detach r1"), 0);

  secrets_->forget = absl::OkStatus();
  ASSERT_TRUE(m->Remove("r1", false).ok());
  EXPECT_EQ(m->Get("r1").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(calls_.Count("policy.ForgetSandboxRules r1"), 1);
  auto stored = store_->LoadAll();
  ASSERT_TRUE(stored.ok());
  EXPECT_TRUE(stored->empty());
  EXPECT_FALSE(Exists(SandboxDirOf("r1")));
}

TEST_F(SandboxManagerTest, RecoveryFinishesWhatAKilledVmmdLeftMidOperation) {
  // What a vmmd SIGKILLed mid-create, mid-stop, and while running (its VM
  // gone too) left in the store.
  for (auto [name, state] : {std::pair{"c", vmm::CREATING}, std::pair{"s", vmm::STOPPING},
                             std::pair{"r", vmm::RUNNING}, std::pair{"o", vmm::STOPPED}}) {
    vmm::Sandbox sb;
    *sb.mutable_spec() = Spec(name);
    sb.set_state(state);
    sb.set_vmm_pid(state == vmm::RUNNING ? 999999 : 0);
    ASSERT_TRUE(store_->Insert(sb).ok());
  }
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  EXPECT_EQ(m->Get("c")->state(), vmm::FAILED);
  EXPECT_NE(m->Get("c")->failure().find("vmmd stopped while the sandbox was being created"),
            std::string::npos);
  EXPECT_EQ(m->Get("s")->state(), vmm::STOPPED);
  EXPECT_EQ(m->Get("r")->state(), vmm::FAILED);
  EXPECT_NE(m->Get("r")->failure().find("the VM exited while vmmd was not running"),
            std::string::npos);
  EXPECT_EQ(m->Get("r")->vmm_pid(), 0);
  EXPECT_EQ(m->Get("o")->state(), vmm::STOPPED);
  // Stored, not just in memory: the next vmmd reads the same back.
  m.reset();
  auto next = NewManager();
  ASSERT_TRUE(next->Recover().ok());
  EXPECT_EQ(next->Get("c")->state(), vmm::FAILED);
  EXPECT_EQ(next->Get("s")->state(), vmm::STOPPED);
  EXPECT_EQ(next->Get("r")->state(), vmm::FAILED);
  EXPECT_EQ(next->Get("o")->state(), vmm::STOPPED);
}

TEST_F(SandboxManagerTest, StartRetriesAFailedSandboxThroughTheLifecycle) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  ASSERT_TRUE(m->Create(Spec("f1"), false).ok());
  ASSERT_EQ(WaitSettled(*m, "f1").state(), vmm::FAILED);
  // FAILED -> STARTING -> FAILED again (the disk step fails the same way),
  // never refused by the state table.
  auto started = m->Start("f1");
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->state(), vmm::STARTING);
  vmm::Sandbox again = WaitSettled(*m, "f1");
  EXPECT_EQ(again.state(), vmm::FAILED);
  EXPECT_FALSE(again.failure().empty());
  EXPECT_EQ(again.failure().find("a vmmd bug"), std::string::npos) << again.failure();
}


TEST_F(SandboxManagerTest, RecoveryBootsAgainAGuestWhoseBootWasCutShort) {
  // vmmd died while the sandbox booted: its VM runs, but the mounts, the
  // clone and the kit hooks may be half done, so it is not reattached as
  // it is. (The name is this test's own: the marker is looked for in every
  // process of the machine.)
  const std::string name = "st" + std::to_string(getpid());
  vmm::Sandbox sb;
  *sb.mutable_spec() = Spec(name);
  sb.set_state(vmm::STARTING);
  ASSERT_TRUE(store_->Insert(sb).ok());
  pid_t vm = fork();
  ASSERT_GE(vm, 0);
  if (vm == 0) {
    // A stand-in VM, one process whose command line carries the fake
    // hypervisor's marker.
    std::string cmd = "exec -a airlock-fake-vm-marker-" + name + " sleep 600";
    execl("/bin/bash", "bash", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  bool started = false;
  for (int i = 0; i < 500 && !started; ++i) {
    // Its argv[0] once exec'd: bash's own command line holds the marker
    // too, and while it execs, the process's command line reads empty
    // (a scan then would not find it).
    started = ProcessCmdline(vm).rfind("airlock-fake-vm-marker-" + name, 0) == 0;
    if (!started) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!started) {
    kill(vm, SIGKILL);
    waitpid(vm, nullptr, 0);
    FAIL() << "the stand-in VM did not start";
  }
  auto m = NewManager();
  EXPECT_TRUE(m->Recover().ok());
  int status = 0;
  pid_t reaped = 0;
  for (int i = 0; i < 250 && reaped == 0; ++i) {
    reaped = waitpid(vm, &status, WNOHANG);
    if (reaped == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (reaped == 0) {
    kill(vm, SIGKILL);
    waitpid(vm, &status, 0);
    ADD_FAILURE() << "the half-booted VM was left running";
  } else {
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  // Booted again from the start: here the disk step fails (the fake image),
  // with its own reason, not as a reattach.
  vmm::Sandbox after = WaitSettled(*m, name);
  EXPECT_EQ(after.state(), vmm::FAILED) << after.DebugString();
  EXPECT_NE(after.failure().find("layer"), std::string::npos) << after.failure();
  EXPECT_EQ(after.vmm_pid(), 0);
}

TEST_F(SandboxManagerTest, MoreSharesThanTheVmTakesAreRefusedAndRecordNothing) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  vmm::SandboxSpec spec = Spec("many");
  for (const char* leaf : {"a", "b", "c"}) {
    std::string path = dir_.path() + "/" + leaf;
    ASSERT_TRUE(MakeDirs(path, 0755).ok());
    spec.add_mounts()->set_host_path(path);
  }
  auto created = m->Create(spec, false);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(created.status().message(),
            "a sandbox shares at most 2 paths (3 given); share a common parent directory instead");
  EXPECT_TRUE(m->List().empty());
  EXPECT_EQ(calls_.Count("git.Baseline many"), 0);
}

TEST_F(SandboxManagerTest, AFailedCreateDropsTheBaselineAndTheRegistration) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  std::string ws = dir_.path() + "/ws2";
  ASSERT_TRUE(MakeDirs(ws, 0755).ok());
  secrets_->sentinels = absl::UnavailableError("secretsd does not answer");
  vmm::SandboxSpec spec = Spec("b2");
  spec.add_mounts()->set_host_path(ws);
  auto created = m->Create(spec, false);
  EXPECT_EQ(created.status().code(), absl::StatusCode::kUnavailable) << created.status();
  // gitd took a baseline and secretsd was asked to register: both dropped.
  EXPECT_EQ(calls_.Count("git.Baseline b2"), 1);
  EXPECT_EQ(calls_.Count("git.Unpublish b2"), 1);
  EXPECT_EQ(calls_.Count("secrets.ForgetRegistration b2"), 1);
  EXPECT_EQ(calls_.Count("policy.ForgetKits b2"), 0) << "no kits, no grant";
  EXPECT_TRUE(m->List().empty());

  // A create that succeeds keeps what the peers hold.
  secrets_->sentinels = absl::OkStatus();
  ASSERT_TRUE(m->Create(spec, false).ok());
  EXPECT_EQ(calls_.Count("git.Unpublish b2"), 1);
  EXPECT_EQ(calls_.Count("secrets.ForgetRegistration b2"), 1);
}

TEST_F(SandboxManagerTest, ACreateOfATakenNameAsksNoPeerAndDropsNothing) {
  auto m = NewManager();
  ASSERT_TRUE(m->Recover().ok());
  ASSERT_TRUE(m->Create(Spec("taken"), false).ok());
  int sentinels = calls_.Count("secrets.Sentinels taken");
  secrets_->sentinels = absl::UnavailableError("secretsd does not answer");
  auto again = m->Create(Spec("taken"), false);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists) << again.status();
  EXPECT_EQ(calls_.Count("secrets.Sentinels taken"), sentinels) << "no peer asked";
  EXPECT_EQ(calls_.Count("secrets.ForgetRegistration taken"), 0)
      << "the existing sandbox's registration is kept";
  EXPECT_EQ(calls_.Count("git.Unpublish taken"), 0);
}

// A snapshot's key is the same for the sandbox whose boot made it and for
// a new sandbox whose accelerator is not on record yet: both are keyed by
// the accelerator vmmd uses. (Resolving --guest-aslr from the sandbox's
// record once gave a new sandbox under TCG another key, and every sandbox
// booted.)
TEST_F(SandboxManagerTest, ANewSandboxHasTheKeyOfTheSnapshotItsShapeMade) {
  const std::string qemu = dir_.path() + "/qemu-system-x86_64";
  std::ofstream(qemu) << "qemu";
  for (const std::string aslr : {"auto", "on", "off"}) {
    auto m = NewManager(std::make_unique<DescribingHypervisor>(qemu), aslr);
    const std::string disk = dir_.path() + "/base.qcow2";
    std::ofstream(disk) << "disk";
    vmm::Sandbox maker;
    *maker.mutable_spec() = Spec("maker");
    maker.set_cpus(2);
    maker.set_memory_mib(1024);
    maker.set_accelerator("tcg");
    vmm::Sandbox fresh = maker;
    fresh.mutable_spec()->set_name("fresh");
    fresh.clear_accelerator();
    std::string key = SnapshotKeyProbe::KeyFor(*m, maker, disk, "tcg");
    ASSERT_FALSE(key.empty());
    EXPECT_EQ(SnapshotKeyProbe::KeyFor(*m, fresh, disk, "tcg"), key) << aslr;
    // Another accelerator, another size or another disk: another key.
    EXPECT_NE(SnapshotKeyProbe::KeyFor(*m, fresh, disk, "kvm"), key) << aslr;
    vmm::Sandbox bigger = fresh;
    bigger.set_memory_mib(2048);
    EXPECT_NE(SnapshotKeyProbe::KeyFor(*m, bigger, disk, "tcg"), key) << aslr;
    std::ofstream(disk, std::ios::app) << "written";
    EXPECT_NE(SnapshotKeyProbe::KeyFor(*m, fresh, disk, "tcg"), key) << aslr;
  }
}

}  // namespace
}  // namespace airlock::vmmd
