#include "policyd/kit_grant.h"

#include <cstdlib>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "common/policy/rule_wire.h"

namespace airlock::policyd {
namespace {

namespace pb = airlock::policy::v1;

constexpr char kKits[] = "tests/fixtures/kits/";

std::string Kit(const std::string& name) { return std::string(kKits) + name; }

pb::ResolveRequest KitRequest(const std::string& sandbox, const std::vector<std::string>& refs,
                              bool create = false) {
  pb::ResolveRequest r;
  r.set_sandbox(sandbox);
  r.set_create(create);
  for (const auto& ref : refs) r.add_kits()->set_ref(Kit(ref));
  return r;
}

// Rendered lists a sandbox's kit rules as "allow|deny resource methods paths".
std::vector<std::string> KitRules(RuleStore* store, const std::string& sandbox) {
  std::vector<std::string> out;
  for (const Rule& r : store->List(sandbox)) {
    if (r.sandbox != sandbox) continue;
    out.push_back(absl::StrCat(r.action == Action::kAllow ? "allow " : "deny ", r.resource.text,
                               " ", absl::StrJoin(r.methods, ","), " ",
                               absl::StrJoin(r.paths, ","), " ", r.origin));
  }
  return out;
}

bool Has(const std::vector<std::string>& v, const std::string& item) {
  return std::find(v.begin(), v.end(), item) != v.end();
}

class KitGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::string(getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    Open();
  }
  void Open() {
    gate_.reset();
    store_.reset();
    db_.reset();
    db_ = std::move(*StateDb::Open(path_));
    store_ = std::make_unique<RuleStore>(db_.get());
    ASSERT_TRUE(store_->Init().ok());
    gate_ = std::make_unique<KitGate>(db_.get(), store_.get());
  }
  std::string path_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<RuleStore> store_;
  std::unique_ptr<KitGate> gate_;
};

TEST(CompileNetworkRulesTest, EveryHostOfEveryEntryBecomesARule) {
  auto resolved = kit::ResolveKits({Kit("agent.yaml"), Kit("gh.yaml")}, {});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  auto runtime = CompileNetworkRules(resolved->composition.merged, kit::Phase::kRuntime, "s1");
  ASSERT_TRUE(runtime.ok()) << runtime.status();
  std::vector<std::string> got;
  for (const RuleSpec& s : *runtime) {
    got.push_back(absl::StrCat(s.action == Action::kAllow ? "allow " : "deny ", s.resource, " ",
                               s.methods, " ", absl::StrJoin(s.paths, ","), " ", s.sandbox,
                               " ", s.origin));
  }
  EXPECT_TRUE(Has(got, "allow allowed.example.test   s1 kit:runtime")) << absl::StrJoin(got, "\n");
  EXPECT_TRUE(Has(got, "allow api.github.com GET,POST,PUT,DELETE  s1 kit:runtime"));
  EXPECT_TRUE(Has(got, "deny api.github.com DELETE /repos/** s1 kit:runtime"));
  EXPECT_EQ(got.size(), 3u);
  auto install = CompileNetworkRules(resolved->composition.merged, kit::Phase::kInstall, "s1");
  ASSERT_TRUE(install.ok());
  ASSERT_EQ(install->size(), 1u);
  EXPECT_EQ((*install)[0].resource, "install.example.test");
  EXPECT_EQ((*install)[0].origin, "kit:install");
}

TEST(CompileNetworkRulesTest, WildcardAllAndUnexpressibleHosts) {
  kit::Descriptor d;
  kit::CapabilityEntry e;
  e.type = std::string(kit::kNetworkPolicyV2);
  kit::NetworkPolicyConfig config;
  config.version = 2;
  config.runtime = kit::NetworkRules{};
  config.runtime->allow.push_back(kit::NetworkEntry{{"*"}, {"ANY"}, {}});
  e.typed = config;
  d.capabilities.push_back(e);
  auto rules = CompileNetworkRules(d, kit::Phase::kRuntime, "s");
  ASSERT_TRUE(rules.ok()) << rules.status();
  ASSERT_EQ(rules->size(), 1u);
  EXPECT_EQ((*rules)[0].resource, "**");
  EXPECT_EQ((*rules)[0].methods, "");

  config.runtime->allow[0].hosts = {"bad host"};
  std::get<kit::CapabilityEntry>(d.capabilities[0]).typed = config;
  auto bad = CompileNetworkRules(d, kit::Phase::kRuntime, "s");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("runtime.allow[0] host \"bad host\""), std::string::npos)
      << bad.status();
}

TEST(InjectFormatTest, KitRulesMapToProxydPlacements) {
  auto f = [](std::string header, std::string format, std::string scheme = "",
              std::string user = "") {
    kit::InjectRule r;
    r.domain = "api.example.test";
    r.header = header;
    r.format = format;
    r.scheme = scheme;
    r.username = user;
    auto got = InjectFormat(r);
    return got.ok() ? *got : "error: " + std::string(got.status().message());
  };
  EXPECT_EQ(f("Authorization", "Bearer %s"), "bearer");
  EXPECT_EQ(f("", ""), "bearer");
  EXPECT_EQ(f("X-Api-Key", ""), "header:X-Api-Key");
  EXPECT_EQ(f("X-Api-Key", "%s"), "header:X-Api-Key");
  EXPECT_EQ(f("Authorization", "token %s"), "header:Authorization=token %s");
  EXPECT_EQ(f("", "", "basic", "x-access-token"), "basic:x-access-token");
  EXPECT_EQ(f("X", "no placeholder").rfind("error: inject format", 0), 0u);
  EXPECT_EQ(f("X", "%s and %s").rfind("error: inject format", 0), 0u);
  EXPECT_EQ(f("X", "%d %s").rfind("error: inject format", 0), 0u);
  EXPECT_EQ(f("", "", "basic").rfind("error: inject scheme basic needs", 0), 0u);
  EXPECT_EQ(f("", "", "digest", "u").rfind("error: inject scheme", 0), 0u);
}

TEST(BuildPlanTest, CarriesWhatVmmdApplies) {
  auto resolved = kit::ResolveKits({Kit("agent.yaml"), Kit("gh.yaml")}, {{"greeting", "howdy"}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::vector<std::string> skipped;
  auto plan = BuildPlan(*resolved, false, &skipped);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->order_size(), 2);
  EXPECT_EQ(plan->order(0), Kit("agent.yaml"));
  EXPECT_EQ(plan->env().at("AGENT_GREETING"), "howdy");
  ASSERT_EQ(plan->credentials_size(), 1);
  EXPECT_EQ(plan->credentials(0).service(), "github");
  EXPECT_EQ(plan->credentials(0).env(), "GH_TOKEN");
  EXPECT_TRUE(plan->credentials(0).optional());
  ASSERT_EQ(plan->credentials(0).inject_size(), 1);
  EXPECT_EQ(plan->credentials(0).inject(0).format(), "bearer");
  ASSERT_EQ(plan->install_size(), 3);
  EXPECT_EQ(plan->install(1).env(0), "KIT_PROBE_PORT");
  EXPECT_EQ(plan->install(0).command(0), "sh");
  ASSERT_EQ(plan->startup_size(), 1);
  ASSERT_EQ(plan->files_size(), 1);
  EXPECT_EQ(plan->files(0).content(), "greeting=howdy\n");
  EXPECT_TRUE(plan->files(0).overwrite());
  ASSERT_EQ(plan->volumes_size(), 2);
  ASSERT_EQ(plan->ports_size(), 1);
  EXPECT_EQ(plan->ports(0).container(), 8123u);
  EXPECT_EQ(plan->ports(0).transport(), "tcp");
  EXPECT_EQ(plan->cpus(), 1.0);
  EXPECT_EQ(plan->memory_mib(), 768u);
  EXPECT_FALSE(plan->privileged());
}

TEST(BuildPlanTest, CarriesTheWorkloadsAgent) {
  auto resolved = kit::ResolveKits({"builtin:claude"}, {{"version", "2.0.0"}});
  ASSERT_TRUE(resolved.ok()) << resolved.status();
  std::vector<std::string> skipped;
  auto plan = BuildPlan(*resolved, false, &skipped);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(std::vector<std::string>(plan->command().begin(), plan->command().end()),
            (std::vector<std::string>{"claude", "--dangerously-skip-permissions"}));
  EXPECT_EQ(plan->image(), "agent");
  ASSERT_EQ(plan->install_size(), 1);
  EXPECT_NE(plan->install(0).command(2).find("v='2.0.0'"), std::string::npos);
  EXPECT_TRUE(skipped.empty()) << absl::StrJoin(skipped, "\n");

  // Args expand into the command; a workload without an agent has none.
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/agent";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  std::ofstream(dir + "/quill.yaml")
      << "schemaVersion: \"3\"\nkind: workload\nargs: {model: {default: swift}}\n"
      << "capabilities:\n  - type: dev.airlock/agent@1\n"
      << "    config: {command: [quill, --model, '${{ kit.args.model }}']}\n";
  auto quill = kit::ResolveKits({dir + "/quill.yaml"}, {{"model", "swift-2"}});
  ASSERT_TRUE(quill.ok()) << quill.status();
  auto quill_plan = BuildPlan(*quill, false, &skipped);
  ASSERT_TRUE(quill_plan.ok()) << quill_plan.status();
  EXPECT_EQ(absl::StrJoin(quill_plan->command(), " "), "quill --model swift-2");
  EXPECT_EQ(quill_plan->image(), "");

  auto none = kit::ResolveKits({Kit("agent.yaml"), Kit("gh.yaml")}, {});
  ASSERT_TRUE(none.ok()) << none.status();
  auto none_plan = BuildPlan(*none, false, &skipped);
  ASSERT_TRUE(none_plan.ok()) << none_plan.status();
  EXPECT_EQ(none_plan->command_size(), 0);
  EXPECT_EQ(none_plan->image(), "");
}

TEST(BuildPlanTest, PrivilegedNeedsConsent) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/priv";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  auto write = [&](const std::string& name, bool optional) {
    std::ofstream(dir + "/" + name) << "schemaVersion: \"3\"\nkind: workload\ncapabilities:\n"
                                    << "  - type: com.docker.sandbox/privileged@1\n"
                                    << (optional ? "    optional: true\n" : "");
    return dir + "/" + name;
  };
  auto required = kit::ResolveKits({write("req.yaml", false)}, {});
  ASSERT_TRUE(required.ok()) << required.status();
  std::vector<std::string> skipped;
  auto refused = BuildPlan(*required, false, &skipped);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("--allow-privileged"), std::string::npos);
  auto granted = BuildPlan(*required, true, &skipped);
  ASSERT_TRUE(granted.ok());
  EXPECT_TRUE(granted->privileged());

  auto optional = kit::ResolveKits({write("opt.yaml", true)}, {});
  ASSERT_TRUE(optional.ok());
  auto left_out = BuildPlan(*optional, false, &skipped);
  ASSERT_TRUE(left_out.ok());
  EXPECT_FALSE(left_out->privileged());
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("privileged@1 (optional)"), std::string::npos);
}

TEST(SurfaceProtoTest, RoundTrips) {
  auto resolved = kit::ResolveKits({Kit("agent.yaml"), Kit("gh.yaml")}, {});
  ASSERT_TRUE(resolved.ok());
  pb::GrantSurface wire;
  SurfaceToProto(resolved->surface, &wire);
  kit::Surface back = SurfaceFromProto(wire);
  kit::SurfaceDiff diff = kit::Diff(resolved->surface, back);
  EXPECT_TRUE(diff.widenings.empty()) << absl::StrJoin(diff.widenings, "\n");
  EXPECT_TRUE(diff.narrowings.empty()) << absl::StrJoin(diff.narrowings, "\n");
  EXPECT_EQ(back.runtime.http_deny, resolved->surface.runtime.http_deny);
  EXPECT_EQ(back.credentials_runtime.at("github").inject_domains,
            std::vector<std::string>{"api.github.com"});
  EXPECT_EQ(back.storage_paths, resolved->surface.storage_paths);
  EXPECT_EQ(back.ports, std::vector<std::string>{"8123/tcp"});
}

TEST_F(KitGateTest, FirstResolveGrantsAndPutsTheInstallPhaseInForce) {
  auto r = gate_->Resolve(KitRequest("s1", {"gh.yaml", "agent.yaml"}, true));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->hold_id().empty());
  EXPECT_TRUE(r->widenings().empty());
  EXPECT_EQ(r->plan().order(0), Kit("agent.yaml"));  // never by flag order
  auto rules = KitRules(store_.get(), "s1");
  EXPECT_EQ(rules, std::vector<std::string>{"allow install.example.test   kit:install"});
  EXPECT_TRUE(KitRules(store_.get(), "s2").empty());

  ASSERT_TRUE(gate_->SetPhase("s1", "runtime").ok());
  rules = KitRules(store_.get(), "s1");
  EXPECT_EQ(rules.size(), 3u);
  EXPECT_TRUE(Has(rules, "deny api.github.com DELETE /repos/** kit:runtime"));
  EXPECT_FALSE(Has(rules, "allow install.example.test   kit:install"));
  Request q = *ParseTarget("https://api.github.com/repos/o/r", "DELETE");
  q.sandbox = "s1";
  EXPECT_EQ(store_->Compiled()->Decide(q).action, Action::kDeny);
  q.path = "/user/repos";
  q.method = "POST";
  EXPECT_EQ(store_->Compiled()->Decide(q).action, Action::kAllow);

  EXPECT_EQ(gate_->SetPhase("s1", "build").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gate_->SetPhase("nokits", "runtime").code(), absl::StatusCode::kNotFound);
}

TEST_F(KitGateTest, AWideningUpdateIsHeldUntilApproved) {
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  ASSERT_TRUE(gate_->SetPhase("s1", "runtime").ok());
  auto before = KitRules(store_.get(), "s1");

  auto held = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}));
  ASSERT_TRUE(held.ok()) << held.status();
  ASSERT_FALSE(held->hold_id().empty());
  ASSERT_EQ(held->widenings_size(), 1) << absl::StrJoin(held->widenings(), "\n");
  EXPECT_NE(held->widenings(0).find("DELETE api.github.com/repos/**"), std::string::npos)
      << held->widenings(0);
  EXPECT_FALSE(held->has_plan());
  EXPECT_EQ(KitRules(store_.get(), "s1"), before);  // nothing changed

  auto holds = gate_->Holds("s1");
  ASSERT_TRUE(holds.ok());
  ASSERT_EQ(holds->size(), 1u);
  EXPECT_EQ((*holds)[0].id(), held->hold_id());
  EXPECT_TRUE(gate_->Holds("other")->empty());

  // policyd restarting keeps the hold and the grant.
  Open();
  auto approved = gate_->Approve(held->hold_id());
  ASSERT_TRUE(approved.ok()) << approved.status();
  EXPECT_EQ(approved->sandbox(), "s1");
  EXPECT_EQ(approved->kits(1).ref(), Kit("gh-v2.yaml"));
  auto after = KitRules(store_.get(), "s1");
  EXPECT_FALSE(Has(after, "deny api.github.com DELETE /repos/** kit:runtime"));
  EXPECT_TRUE(Has(after, "allow api.github.com GET,POST,PUT,DELETE  kit:runtime"));
  EXPECT_TRUE(gate_->Holds("")->empty());
  EXPECT_EQ(gate_->Approve(held->hold_id()).status().code(), absl::StatusCode::kNotFound);

  // The same update again is now within the grant.
  auto again = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}));
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->hold_id().empty());
}

TEST_F(KitGateTest, ANarrowingUpdateAppliesSilently) {
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  ASSERT_TRUE(gate_->SetPhase("s1", "runtime").ok());
  auto r = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v3.yaml"}));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->hold_id().empty());
  EXPECT_GT(r->narrowings_size(), 0);
  EXPECT_TRUE(r->has_plan());
  EXPECT_TRUE(Has(KitRules(store_.get(), "s1"), "allow api.github.com GET,POST,DELETE  kit:runtime"));
  // Going back to the wider version is now a widening.
  auto back = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}));
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->hold_id().empty());
}

TEST_F(KitGateTest, BadRequestsChangeNothing) {
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  auto before = KitRules(store_.get(), "s1");
  auto missing = gate_->Resolve(KitRequest("s1", {"agent.yaml", "nope.yaml"}));
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("nope.yaml"), std::string::npos);
  auto two_workloads = gate_->Resolve(KitRequest("s1", {"agent.yaml"}));
  ASSERT_TRUE(two_workloads.ok());  // dropping the mixin only narrows
  pb::ResolveRequest typo = KitRequest("s2", {"agent.yaml"}, true);
  (*typo.mutable_args())["greting"] = "x";
  auto bad_arg = gate_->Resolve(typo);
  ASSERT_FALSE(bad_arg.ok());
  EXPECT_NE(bad_arg.status().message().find("greting"), std::string::npos);
  EXPECT_TRUE(KitRules(store_.get(), "s2").empty());
  EXPECT_EQ(gate_->Resolve(KitRequest("", {"agent.yaml"}, true)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gate_->Approve("").status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KitGateTest, ForgetDropsGrantHoldsAndRules) {
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  ASSERT_FALSE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}))->hold_id().empty());
  ASSERT_TRUE(gate_->Forget("s1").ok());
  EXPECT_TRUE(KitRules(store_.get(), "s1").empty());
  EXPECT_TRUE(gate_->Holds("s1")->empty());
  // A new sandbox of the same name starts afresh: its first resolve grants.
  auto fresh = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}, true));
  ASSERT_TRUE(fresh.ok());
  EXPECT_TRUE(fresh->hold_id().empty());
}

TEST_F(KitGateTest, OnlyACreateGrantsAndACreateNeverReusesAGrant) {
  // An update of a sandbox that holds no grant is not a way to get one.
  auto update = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}));
  ASSERT_FALSE(update.ok());
  EXPECT_EQ(update.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(KitRules(store_.get(), "s1").empty());
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  auto again = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}, true));
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST_F(KitGateTest, ApplyingAnUpdateDropsHoldsJudgedAgainstTheOldGrant) {
  ASSERT_TRUE(gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh.yaml"}, true)).ok());
  auto held = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v2.yaml"}));
  ASSERT_FALSE(held->hold_id().empty());
  // A narrowing applies; the hold was judged against what it replaced.
  auto narrowed = gate_->Resolve(KitRequest("s1", {"agent.yaml", "gh-v3.yaml"}));
  ASSERT_TRUE(narrowed.ok());
  ASSERT_TRUE(narrowed->hold_id().empty());
  EXPECT_TRUE(gate_->Holds("s1")->empty());
  auto stale = gate_->Approve(held->hold_id());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(stale.status().message().find("superseded"), std::string::npos);
}

TEST_F(KitGateTest, AnArgThatWidensIsHeldLikeANewVersion) {
  // quill.yaml publishes a port from its apiPort arg.
  auto request = [](const std::string& port, bool create) {
    pb::ResolveRequest r;
    r.set_sandbox("q1");
    r.set_create(create);
    r.add_kits()->set_ref("common/kit/testdata/quill.yaml");
    (*r.mutable_args())["apiPort"] = port;
    (*r.mutable_env())["WORKSPACE_DIR"] = "/workspace";
    return r;
  };
  auto created = gate_->Resolve(request("7070", true));
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->plan().ports(0).container(), 7070u);
  auto same = gate_->Resolve(request("7070", false));
  ASSERT_TRUE(same.ok());
  EXPECT_TRUE(same->hold_id().empty());
  auto moved = gate_->Resolve(request("9090", false));
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_FALSE(moved->hold_id().empty());
  ASSERT_EQ(moved->widenings_size(), 1);
  EXPECT_NE(moved->widenings(0).find("9090/tcp"), std::string::npos) << moved->widenings(0);
}

// A built-in agent's ref reaches the gate as "builtin:NAME", with no file
// on the host; a new version of it changes what is installed, which
// grants nothing new.
TEST_F(KitGateTest, ABuiltinAgentRefResolvesAndGates) {
  pb::ResolveRequest req;
  req.set_sandbox("s1");
  req.set_create(true);
  req.add_kits()->set_ref("builtin:claude");
  auto r = gate_->Resolve(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->plan().order(0), "builtin:claude");
  EXPECT_EQ(r->plan().command(0), "claude");
  EXPECT_EQ(r->plan().image(), "agent");
  EXPECT_TRUE(r->not_enforced().empty());
  EXPECT_EQ(KitRules(store_.get(), "s1"),
            std::vector<std::string>{"allow registry.npmjs.org:443   kit:install"});

  req.set_create(false);
  (*req.mutable_args())["version"] = "2.0.0";
  auto update = gate_->Resolve(req);
  ASSERT_TRUE(update.ok()) << update.status();
  EXPECT_TRUE(update->hold_id().empty());
  EXPECT_TRUE(update->widenings().empty()) << absl::StrJoin(update->widenings(), "\n");
  EXPECT_NE(update->plan().install(0).command(2).find("v='2.0.0'"), std::string::npos);

  req.clear_kits();
  req.add_kits()->set_ref("builtin:nope");
  auto unknown = gate_->Resolve(req);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("no built-in agent \"nope\""), std::string::npos)
      << unknown.status();
}

TEST(BuildPlanTest, GuestPathsSizesAndLargeFiles) {
  std::string dir = std::string(getenv("TEST_TMPDIR")) + "/paths";
  ASSERT_EQ(system(("mkdir -p " + dir).c_str()), 0);
  auto plan = [&](const std::string& name, const std::string& capability) {
    std::ofstream(dir + "/" + name) << "schemaVersion: \"3\"\nkind: workload\ncapabilities:\n"
                                    << capability;
    auto resolved = kit::ResolveKits({dir + "/" + name}, {});
    EXPECT_TRUE(resolved.ok()) << resolved.status();
    std::vector<std::string> skipped;
    return resolved.ok() ? BuildPlan(*resolved, false, &skipped)
                         : absl::StatusOr<pb::KitPlan>(resolved.status());
  };
  auto tmpfs = plan("tmpfs.yaml",
                    "  - type: com.docker.sandbox/volume@1\n"
                    "    config: {path: /home/agent/cache, tmpfs: true, size: 1.5g}\n");
  ASSERT_TRUE(tmpfs.ok()) << tmpfs.status();
  EXPECT_EQ(tmpfs->volumes(0).size(), "1536m");
  for (const char* path : {"/", "/proc", "/sys/kernel", "/dev", "/run/sandbox/source", "/a/../proc"}) {
    auto bad = plan("bad.yaml", absl::StrCat("  - type: com.docker.sandbox/volume@1\n"
                                             "    config: {path: \"", path, "\"}\n"));
    ASSERT_FALSE(bad.ok()) << path;
    EXPECT_NE(bad.status().message().find("is not allowed"), std::string::npos)
        << path << ": " << bad.status();
  }
  // Past the old 96 KiB cap (and a command line's 128 KiB argument): the
  // plan keeps the whole file.
  auto big = plan("big.yaml", absl::StrCat("  - type: com.docker.sandbox/lifecycle@1\n"
                                           "    config:\n      files:\n"
                                           "        - {path: /home/agent/big, content: \"",
                                           std::string(300 * 1024, 'x'), "\"}\n"));
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(big->files(0).content(), std::string(300 * 1024, 'x'));
}

}  // namespace
}  // namespace airlock::policyd
