#include "common/kit/compose.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/kit/effective.h"
#include "common/kit/internal/testdata.h"

namespace airlock::kit {
namespace {

using internal::ReadTestdata;

constexpr char kHeader[] = "schemaVersion: \"3\"\n";

std::set<std::string> HostTypes() {
  std::set<std::string> types;
  for (absl::string_view t :
       {kNetworkPolicyV1, kNetworkPolicyV2, kCredential, kLifecycle, kVolume, kHostMount, kPort,
        kResources, kPrivileged, kSbx, kAgentSessions, kAgentInteractiveSessions, kAgentContext,
        kAgentSkills, kAcp, kAirlockAgent}) {
    types.insert(std::string(t));
  }
  types.insert("com.example/thing@1");
  return types;
}

// Effective takes a descriptor (authored YAML, build args at defaults)
// through the create pipeline with default create args.
KitInput Effective(const std::string& ref, const std::string& yaml) {
  KitInput in;
  in.ref = ref;
  absl::StatusOr<Descriptor> authored = ParseDescriptor(yaml);
  EXPECT_TRUE(authored.ok()) << ref << ": " << authored.status();
  if (!authored.ok()) return in;
  absl::StatusOr<Descriptor> published = ExpandBuildArgs(*authored, {});
  EXPECT_TRUE(published.ok()) << ref << ": " << published.status();
  if (!published.ok()) return in;
  CreateRequest request;
  request.host_types = HostTypes();
  request.image_env = {{"WORKSPACE_DIR", "/workspace"}};
  absl::StatusOr<EffectiveKit> kit = MakeEffective(*published, request);
  EXPECT_TRUE(kit.ok()) << ref << ": " << kit.status();
  if (kit.ok()) in.descriptor = kit->descriptor;
  return in;
}

KitInput Fixture(const std::string& name) {
  return Effective("registry.example.com/kits/" + name.substr(0, name.find('.')),
                   ReadTestdata(name));
}

KitInput Mixin(const std::string& ref, const std::string& body) {
  return Effective(ref, absl::StrCat(kHeader, "kind: mixin\n", body));
}

KitInput Base(const std::string& body = "") {
  return Effective(
      "base", absl::StrCat(kHeader, "kind: workload\nversion: '1.0'\nprovides: [base]\n", body));
}

void ExpectError(const absl::StatusOr<Composition>& c, const std::string& want) {
  ASSERT_FALSE(c.ok()) << "composed, but want: " << want;
  EXPECT_NE(c.status().message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << c.status().message();
}

std::vector<const CapabilityEntry*> OfType(const Descriptor& d, absl::string_view type) {
  std::vector<const CapabilityEntry*> out;
  for (const CapabilityItem& item : d.capabilities) {
    const auto& e = std::get<CapabilityEntry>(item);
    if (e.type == type) out.push_back(&e);
  }
  return out;
}

std::vector<std::string> Texts(const std::vector<Provide>& provides) {
  std::vector<std::string> out;
  for (const Provide& p : provides) out.push_back(p.text);
  return out;
}

// ---- The fixtures together ----

TEST(ComposeTest, ShellWithForgeQuillAndItsAdapter) {
  std::vector<KitInput> kits = {Fixture("quill-acp.yaml"), Fixture("forge.yaml"),
                                Fixture("quill-mixin.yaml"), Fixture("shell.yaml")};
  absl::StatusOr<Composition> c = Compose(kits);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->order,
            (std::vector<std::string>{
                "registry.example.com/kits/shell", "registry.example.com/kits/forge",
                "registry.example.com/kits/quill-mixin", "registry.example.com/kits/quill-acp"}));
  // Flag order never matters.
  std::reverse(kits.begin(), kits.end());
  absl::StatusOr<Composition> reversed = Compose(kits);
  ASSERT_TRUE(reversed.ok()) << reversed.status();
  EXPECT_EQ(reversed->order, c->order);
  EXPECT_EQ(ToCanonicalJson(reversed->merged.document), ToCanonicalJson(c->merged.document));

  const Descriptor& m = c->merged;
  EXPECT_EQ(m.form, Form::kEffective);
  EXPECT_EQ(m.kind, KitKind::kWorkload);
  EXPECT_EQ(m.display_name, "Plain shell");
  EXPECT_EQ(Texts(m.provides), (std::vector<std::string>{"shell@1.4.0", "forge@3.2.0",
                                                         "quill@2.4.1", "quill-acp@0.3.0"}));
  EXPECT_TRUE(m.requirements.empty());  // met inside the composition
  EXPECT_EQ(m.conflicts, std::vector<std::string>{"com.docker.kit/forge-legacy"});
  EXPECT_EQ(m.licenses, std::vector<std::string>{"MIT"});

  // One network policy, @2 because forge used @2; every deny kept.
  ASSERT_EQ(OfType(m, kNetworkPolicyV1).size(), 0u);
  ASSERT_EQ(OfType(m, kNetworkPolicyV2).size(), 1u);
  const NetworkPolicyConfig* np = OfType(m, kNetworkPolicyV2)[0]->As<NetworkPolicyConfig>();
  ASSERT_NE(np, nullptr);
  std::vector<std::string> hosts;
  for (const NetworkEntry& e : np->runtime->allow) hosts.push_back(e.hosts[0]);
  EXPECT_EQ(hosts,
            (std::vector<std::string>{"deb.debian.org", "security.debian.org", "codeforge.example",
                                      "api.codeforge.example", "uploads.codeforge.example",
                                      "api.quill.dev:443", "auth.quill.dev:443"}));
  ASSERT_EQ(np->runtime->deny.size(), 1u);
  EXPECT_EQ(np->runtime->deny[0].paths, std::vector<std::string>{"/repos/**"});

  EXPECT_EQ(OfType(m, kCredential).size(), 2u);
  EXPECT_EQ(OfType(m, kVolume).size(), 1u);
  EXPECT_EQ(OfType(m, kAgentContext).size(), 3u);
  ASSERT_EQ(OfType(m, kAcp).size(), 1u);
  EXPECT_TRUE(OfType(m, kAcp)[0]->optional);

  // Hooks in composition order: the shell's startup, quill's install.
  ASSERT_EQ(OfType(m, kLifecycle).size(), 1u);
  const LifecycleConfig* lc = OfType(m, kLifecycle)[0]->As<LifecycleConfig>();
  ASSERT_NE(lc, nullptr);
  ASSERT_EQ(lc->startup.size(), 1u);
  ASSERT_EQ(lc->install.size(), 1u);
  EXPECT_EQ(lc->install[0].command[2], "printf 'model=%s\\n' '' > /home/agent/.quill/config");

  // Output order: network first, lifecycle then agent-context last.
  const auto& first = std::get<CapabilityEntry>(m.capabilities.front());
  const auto& last = std::get<CapabilityEntry>(m.capabilities.back());
  EXPECT_EQ(first.type, kNetworkPolicyV2);
  EXPECT_EQ(last.type, kAgentContext);
}

// ---- The closed-set rules ----

TEST(ComposeTest, ExactlyOneWorkload) {
  ExpectError(Compose({Fixture("forge.yaml")}),
              "a composition has exactly one workload, and none of the kits is one");
  ExpectError(Compose({Fixture("shell.yaml"), Fixture("quill.yaml")}),
              "merge: registry.example.com/kits/shell and registry.example.com/kits/quill are both "
              "workload kits; a composition has exactly one base");
  EXPECT_TRUE(Compose({Fixture("shell.yaml")}).ok());
}

TEST(ComposeTest, OneProviderPerName) {
  ExpectError(Compose({Fixture("quill.yaml"), Fixture("quill-mixin.yaml")}),
              "registry.example.com/kits/quill and registry.example.com/kits/quill-mixin both "
              "provide quill; one name has one owner");
  // One Kit may provide a name at several versions.
  EXPECT_TRUE(Compose({Base(), Mixin("m", "provides: [tool@1.0, tool@2.0]\n"),
                       Mixin("n", "requires: ['tool >= 2']\n")})
                  .ok());
}

TEST(ComposeTest, RequiresAreMetInsideTheSet) {
  ExpectError(Compose({Fixture("shell.yaml"), Fixture("quill-acp.yaml")}),
              "registry.example.com/kits/quill-acp requires \"quill >= 2.0, < 3\", which no other "
              "kit in the composition provides");
  ExpectError(
      Compose({Base(), Fixture("quill-acp.yaml"), Mixin("quill3", "provides: [quill@3.0.0]\n")}),
      "requires \"quill >= 2.0, < 3\", but quill3 provides quill@3.0.0");
  // A Kit's own provide never satisfies its own require.
  ExpectError(Compose({Base(), Mixin("self", "provides: [x@1.0]\nrequires: [x]\n")}),
              "self requires \"x\", which no other kit in the composition provides");
  // The version fallback materializes a bare provide.
  EXPECT_TRUE(Compose({Base(), Mixin("needs-base", "requires: ['base >= 1.0']\n")}).ok());
}

TEST(ComposeTest, ConflictsAndIntegrates) {
  ExpectError(
      Compose({Base(), Fixture("forge.yaml"), Mixin("legacy", "provides: [forge-legacy@1.0]\n")}),
      "registry.example.com/kits/forge conflicts with forge-legacy, which legacy provides");
  ExpectError(
      Compose({Base(), Fixture("forge.yaml"), Mixin("ext", "integrates: ['forge >= 4']\n")}),
      "ext integrates \"forge >= 4\", but registry.example.com/kits/forge provides "
      "forge@3.2.0");
  // An absent provider is fine.
  EXPECT_TRUE(Compose({Base(), Mixin("ext", "integrates: ['forge >= 4']\n")}).ok());
  // A met integrates orders like a require: "a-ext" sorts first by ref but
  // composes after the provider.
  absl::StatusOr<Composition> c = Compose({Base(), Mixin("a-ext", "integrates: ['zz-tool >= 1']\n"),
                                           Mixin("zz-tool", "provides: [zz-tool@1.5]\n")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->order, (std::vector<std::string>{"base", "zz-tool", "a-ext"}));
  absl::StatusOr<Composition> unordered =
      Compose({Base(), Mixin("a-ext", ""), Mixin("zz-tool", "provides: [zz-tool@1.5]\n")});
  ASSERT_TRUE(unordered.ok());
  EXPECT_EQ(unordered->order, (std::vector<std::string>{"base", "a-ext", "zz-tool"}));
}

TEST(ComposeTest, CyclesAndInputShape) {
  ExpectError(Compose({Base(), Mixin("a", "provides: [a@1.0]\nrequires: [b]\n"),
                       Mixin("b", "provides: [b@1.0]\nrequires: [a]\n")}),
              "dependency cycle among a, b");
  ExpectError(Compose({Base(), Base()}), "kit base is listed twice");

  absl::StatusOr<Descriptor> set = ParseDescriptor(ReadTestdata("team-set.yaml"));
  ASSERT_TRUE(set.ok());
  ExpectError(Compose({Base(), KitInput{"team", *set}}),
              "merge: team declares kind: set; a set has to be merged before it can contribute");
  absl::StatusOr<Descriptor> authored = ParseDescriptor(ReadTestdata("forge.yaml"));
  ASSERT_TRUE(authored.ok());
  ExpectError(Compose({Base(), KitInput{"forge", *authored}}), "compose: forge is not effective");
}

// ---- Merge rules ----

TEST(MergeTest, NetworkPolicies) {
  absl::StatusOr<Composition> v1 = Compose(
      {Base("capabilities: [{type: com.docker.sandbox/network-policy@1, optional: true, config: "
            "{runtime: {allow: [a.x, b.x], deny: [t.x]}}}]\n"),
       Mixin("m",
             "capabilities: [{type: com.docker.sandbox/network-policy@1, name: M net, config: "
             "{runtime: {allow: [b.x, c.x]}, install: {allow: [pkg.x]}}}]\n")});
  ASSERT_TRUE(v1.ok()) << v1.status();
  ASSERT_EQ(OfType(v1->merged, kNetworkPolicyV1).size(), 1u);
  const CapabilityEntry& e = *OfType(v1->merged, kNetworkPolicyV1)[0];
  EXPECT_FALSE(e.optional);    // required wins
  EXPECT_EQ(e.name, "M net");  // the first non-empty name
  EXPECT_EQ(
      ToCanonicalJson(e.config),
      R"({"install":{"allow":["pkg.x"]},"runtime":{"allow":["a.x","b.x","c.x"],"deny":["t.x"]}})");

  // A host one Kit grants outright stays unbounded whatever another
  // bounds; a bounded entry on another host stays bounded.
  absl::StatusOr<Composition> v2 = Compose(
      {Base("capabilities: [{type: com.docker.sandbox/network-policy@1, config: "
            "{runtime: {allow: [api.x]}}}]\n"),
       Mixin("m",
             "capabilities: [{type: com.docker.sandbox/network-policy@2, config: {runtime: "
             "{allow: [{hosts: [api.x, up.x], methods: [GET]}, {hosts: [api.x], methods: [PUT]}],"
             " deny: [{hosts: [api.x], methods: [DELETE], paths: ['/repos/**']}, api.x]}}}]\n")});
  ASSERT_TRUE(v2.ok()) << v2.status();
  ASSERT_EQ(OfType(v2->merged, kNetworkPolicyV2).size(), 1u);
  EXPECT_EQ(ToCanonicalJson(OfType(v2->merged, kNetworkPolicyV2)[0]->config),
            R"({"runtime":{"allow":["api.x",{"hosts":["up.x"],"methods":["GET"]}],)"
            R"("deny":[{"hosts":["api.x"],"methods":["DELETE"],"paths":["/repos/**"]},"api.x"]}})");
}

TEST(MergeTest, OwnedInstances) {
  const std::string cred =
      "capabilities: [{type: com.docker.sandbox/credential@1, config: {service: svc, phase: "
      "runtime, apiKey: {name: TOKEN}}}]\n";
  ExpectError(Compose({Base(cred), Mixin("m", cred)}),
              "merge: base and m both declare com.docker.sandbox/credential@1 for service \"svc\" "
              "phase runtime; one credential has one owner");
  EXPECT_TRUE(Compose({Base(cred), Mixin("m",
                                         "capabilities: [{type: com.docker.sandbox/credential@1,"
                                         " config: {service: svc, phase: install, apiKey: "
                                         "{name: TOKEN}}}]\n")})
                  .ok());

  ExpectError(
      Compose({Base("capabilities: [{type: com.docker.sandbox/volume@1, config: {path: /d}}]\n"),
               Mixin("m",
                     "capabilities: [{type: com.docker.sandbox/volume@1, config: "
                     "{path: '/d/'}}]\n")}),
      "merge: base and m both declare \"/d\"; volume paths cannot be shared");
  ExpectError(
      Compose({Base("capabilities: [{type: com.docker.sandbox/volume@1, config: {path: /d}}]\n"),
               Mixin("m",
                     "capabilities: [{type: com.docker.sandbox/host-mount@1, config: "
                     "{path: /d}}]\n")}),
      "merge: base and m both declare \"/d\"; a host mount has one owner");

  ExpectError(
      Compose({Base("capabilities: [{type: com.docker.sandbox/acp@1, config: {agent: a, "
                    "command: x}}]\n"),
               Mixin("m",
                     "capabilities: [{type: com.docker.sandbox/acp@1, config: "
                     "{agent: com.docker.kit/a, command: y}}]\n")}),
      "merge: base and m both declare com.docker.sandbox/acp@1 for agent \"com.docker.kit/a\" "
      "but ask for different things; one of them has to change");
}

TEST(MergeTest, CollapsingRequests) {
  absl::StatusOr<Composition> c = Compose(
      {Base("capabilities: [{type: com.docker.sandbox/port@1, optional: true, config: {container: "
            "80}},"
            " {type: com.example/thing@1, config: {a: 1}}, {type: com.docker.sandbox/privileged@1,"
            " optional: true}]\n"),
       Mixin("m",
             "capabilities: [{type: com.docker.sandbox/port@1, config: {name: web, container: 80,"
             " transport: tcp}}, {type: com.example/thing@1, config: {a: 1}},"
             " {type: com.example/thing@1, config: {a: 2}}, {type: "
             "com.docker.sandbox/privileged@1}]\n")});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(OfType(c->merged, kPort).size(), 1u);
  EXPECT_FALSE(OfType(c->merged, kPort)[0]->optional);
  EXPECT_EQ(OfType(c->merged, kPort)[0]->name, "");  // display names never change the request
  EXPECT_EQ(OfType(c->merged, "com.example/thing@1").size(), 2u);
  ASSERT_EQ(OfType(c->merged, kPrivileged).size(), 1u);
  EXPECT_FALSE(OfType(c->merged, kPrivileged)[0]->optional);
}

TEST(MergeTest, WholeSandboxTypesHaveOneAuthor) {
  const std::string res =
      "capabilities: [{type: com.docker.sandbox/resources@1, config: {cpu: 2}}]\n";
  absl::StatusOr<Composition> same = Compose({Base(res), Mixin("m", res)});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_EQ(OfType(same->merged, kResources).size(), 1u);
  ExpectError(Compose({Base(res), Mixin("m",
                                        "capabilities: [{type: com.docker.sandbox/resources@1,"
                                        " config: {cpu: 4}}]\n")}),
              "merge: base and m both declare com.docker.sandbox/resources@1, which describes the "
              "whole sandbox, so it has one author");
}

TEST(MergeTest, TheAgentIsTheWorkloads) {
  const std::string agent =
      "capabilities: [{type: dev.airlock/agent@1, config: {command: [quill, --yolo], image: "
      "agent}}]\n";
  // The mixin provides what the workload requires, so it comes first; the
  // agent is still the workload's.
  absl::StatusOr<Composition> c = Compose({Base("requires: [helper]\n" + agent),
                                           Mixin("m",
                                                 "version: '1.0'\nprovides: [helper]\n"
                                                 "capabilities: [{type: com.example/thing@1}]\n")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->order, (std::vector<std::string>{"m", "base"}));
  ASSERT_EQ(OfType(c->merged, kAirlockAgent).size(), 1u);
  const AgentConfig* merged = OfType(c->merged, kAirlockAgent)[0]->As<AgentConfig>();
  ASSERT_NE(merged, nullptr);
  EXPECT_EQ(merged->command, (std::vector<std::string>{"quill", "--yolo"}));
  EXPECT_EQ(merged->image, "agent");

  // Decoding refuses an agent on a mixin; composition holds the rule for a
  // descriptor that did not come through it.
  KitInput forged = Effective("m", absl::StrCat(kHeader, "kind: workload\n", agent));
  forged.descriptor.kind = KitKind::kMixin;
  ExpectError(Compose({Base(), forged}),
              "merge: m declares dev.airlock/agent@1, which only the workload (base) may declare");
}

TEST(MergeTest, Lifecycle) {
  auto lc = [](const std::string& config) {
    return "capabilities: [{type: com.docker.sandbox/lifecycle@1, config: " + config + "}]\n";
  };
  absl::StatusOr<Composition> c = Compose(
      {Base(lc("{install: [{command: a}], interactive: [--tui]}")),
       Mixin("m", lc("{install: [{command: a}, {command: b}], files: [{path: /f, content: x}]}"))});
  ASSERT_TRUE(c.ok()) << c.status();
  const LifecycleConfig* merged = OfType(c->merged, kLifecycle)[0]->As<LifecycleConfig>();
  ASSERT_NE(merged, nullptr);
  ASSERT_EQ(merged->install.size(), 3u);  // repeated commands stay separate
  EXPECT_EQ(merged->install[2].command[2], "b");
  EXPECT_EQ(merged->files.size(), 1u);
  EXPECT_EQ(merged->interactive, std::vector<std::string>{"--tui"});

  ExpectError(Compose({Base(lc("{files: [{path: /etc/x, content: a}]}")),
                       Mixin("m", lc("{files: [{path: /etc/./x, content: b}]}"))}),
              "merge: base and m both write \"/etc/x\"; one file has one author");
  ExpectError(Compose({Base(lc("{interactive: []}")), Mixin("m", lc("{interactive: [--tui]}"))}),
              "merge: base and m both state the lifecycle interactive tail");
}

TEST(MergeTest, SourceIsStripped) {
  // Flattened group members carry a source.path in the effective form.
  absl::StatusOr<Composition> c = Compose(
      {Base(),
       Mixin("m", "capabilities: [{group: {capabilities: [{type: com.example/thing@1}]}}]\n")});
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(OfType(c->merged, "com.example/thing@1").size(), 1u);
  EXPECT_FALSE(OfType(c->merged, "com.example/thing@1")[0]->source.has_value());
}

}  // namespace
}  // namespace airlock::kit
