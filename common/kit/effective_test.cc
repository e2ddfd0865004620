#include "common/kit/effective.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "common/kit/internal/testdata.h"

namespace airlock::kit {
namespace {

using internal::ReadTestdata;

constexpr char kHeader[] = "schemaVersion: \"3\"\n";

Descriptor Published(const std::string& yaml) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(yaml, Form::kPublished);
  EXPECT_TRUE(d.ok()) << d.status() << "\n" << yaml;
  return d.ok() ? *d : Descriptor();
}

std::set<std::string> AllTypesBut(std::initializer_list<absl::string_view> missing) {
  std::set<std::string> types;
  for (absl::string_view t :
       {kNetworkPolicyV1, kNetworkPolicyV2, kCredential, kLifecycle, kVolume, kHostMount, kPort,
        kResources, kPrivileged, kSbx, kAgentSessions, kAgentInteractiveSessions, kAgentContext,
        kAgentSkills, kAcp, kAirlockAgent}) {
    types.insert(std::string(t));
  }
  types.insert("com.example/thing@1");
  for (absl::string_view t : missing) types.erase(std::string(t));
  return types;
}

void ExpectError(const absl::Status& status, const std::string& want) {
  ASSERT_FALSE(status.ok()) << "succeeded, but want: " << want;
  EXPECT_NE(status.message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << status.message();
}

const CapabilityEntry& Entry(const Descriptor& d, size_t i) {
  return std::get<CapabilityEntry>(d.capabilities.at(i));
}

// ---- ResolveArgs ----

constexpr char kArgs[] =
    "kind: mixin\nargs:\n"
    "  model: {default: '', pattern: '[a-z0-9-]*', env: MODEL}\n"
    "  tier: {enum: [free, pro]}\n"
    "  token: {required: true}\n"
    "  ver: {default: '1.0', pattern: '[0-9.]+', buildArg: VER}\n";

TEST(ResolveArgsTest, DefaultsSuppliedAndAbsent) {
  Descriptor d = Published(absl::StrCat(kHeader, kArgs));
  absl::StatusOr<ArgValues> v = ResolveArgs(d, {{"token", "t"}}, ArgPhase::kCreate);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, (ArgValues{{"model", ""}, {"token", "t"}}));  // tier: no default, no value
  // Template text that is not a Kit placeholder is just a value.
  EXPECT_TRUE(ResolveArgs(d, {{"token", "${{ github.token }}"}}, ArgPhase::kCreate).ok());
  absl::StatusOr<ArgValues> b = ResolveArgs(d, {}, ArgPhase::kBuild);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(*b, (ArgValues{{"ver", "1.0"}}));
}

TEST(ResolveArgsTest, Refusals) {
  Descriptor d = Published(absl::StrCat(kHeader, kArgs));
  struct Case {
    ArgValues supplied;
    ArgPhase phase;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {{}, ArgPhase::kCreate, "kit arg \"token\" is required and no value was supplied"},
           {{{"token", "t"}, {"nope", "x"}},
            ArgPhase::kCreate,
            "kit arg \"nope\" is not declared by this kit"},
           {{{"token", "t"}, {"ver", "2.0"}},
            ArgPhase::kCreate,
            "kit arg \"ver\" resolves at build and is already baked into this kit"},
           {{{"token", "t"}}, ArgPhase::kBuild, "kit arg \"token\" resolves at create"},
           {{{"token", "t"}, {"tier", "gold"}},
            ArgPhase::kCreate,
            "kit arg \"tier\": value \"gold\" is not one of [\"free\", \"pro\"]"},
           // The pattern must match the whole value.
           {{{"token", "t"}, {"model", "fast-1!"}},
            ArgPhase::kCreate,
            "kit arg \"model\": value \"fast-1!\" does not match pattern \"[a-z0-9-]*\""},
           {{{"token", "${{ kit.env.SECRET }}"}},
            ArgPhase::kCreate,
            "kit arg \"token\": values must not contain Kit placeholders or NUL"},
           {{{"ver", "1.x"}}, ArgPhase::kBuild, "kit arg \"ver\": value \"1.x\" does not match"},
       }) {
    ExpectError(ResolveArgs(d, c.supplied, c.phase).status(), c.error);
  }
  // A default is held to the same constraints as a supplied value.
  Descriptor bad_default = Published(
      absl::StrCat(kHeader, "kind: mixin\nargs: {x: {default: 'A', pattern: '[a-z]+'}}\n"));
  ExpectError(ResolveArgs(bad_default, {}, ArgPhase::kCreate).status(),
              "kit arg \"x\": value \"A\" does not match pattern");
}

// ---- The fixtures end to end ----

TEST(MakeEffectiveTest, QuillWorkload) {
  absl::StatusOr<Descriptor> authored = ParseDescriptor(ReadTestdata("quill.yaml"));
  ASSERT_TRUE(authored.ok()) << authored.status();
  absl::StatusOr<Descriptor> published = ExpandBuildArgs(*authored, {});
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(published->form, Form::kPublished);
  ASSERT_EQ(published->provides.size(), 1u);
  EXPECT_EQ(published->provides[0].name, "com.docker.kit/quill");
  EXPECT_EQ(published->provides[0].version, "2.4.1");

  CreateRequest request;
  request.args = {{"model", "swift-2"}};
  request.image_env = {{"WORKSPACE_DIR", "/workspace"}, {"PATH", "/usr/bin"}};
  request.host_types = AllTypesBut({kAgentSkills});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(*published, request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  const Descriptor& d = kit->descriptor;
  EXPECT_EQ(d.form, Form::kEffective);
  EXPECT_EQ(ToCanonicalJson(d.document).find("${{"), std::string::npos);

  EXPECT_EQ(kit->args, (ArgValues{{"apiPort", "7070"}, {"effort", ""}, {"model", "swift-2"}}));
  EXPECT_EQ(kit->env_exports,
            (std::map<std::string, std::string>{{"QUILL_EFFORT", ""}, {"QUILL_MODEL", "swift-2"}}));

  // The optional agent-skills entry is skipped and recorded.
  ASSERT_EQ(kit->skipped.size(), 1u);
  EXPECT_EQ(kit->skipped[0].path, "capabilities[9]");
  EXPECT_EQ(kit->skipped[0].rejected, std::vector<std::string>{"capabilities[9]"});
  ASSERT_EQ(d.capabilities.size(), 10u);

  // The whole-value port reference became an integer.
  const PortConfig* port = Entry(d, 7).As<PortConfig>();
  ASSERT_NE(port, nullptr);
  EXPECT_EQ(port->container, 7070);
  EXPECT_EQ(port->Key(), "7070/tcp");

  const LifecycleConfig* lc = Entry(d, 8).As<LifecycleConfig>();
  ASSERT_NE(lc, nullptr);
  EXPECT_EQ(lc->install[1].command[2],
            "printf 'model=%s\\n' 'swift-2' > /home/agent/.quill/config");
  EXPECT_EQ(lc->files[0].content, R"({"effort": "", "workspace": "/workspace"})");
  EXPECT_EQ(lc->interactive, std::vector<std::string>{"--tui"});
}

TEST(MakeEffectiveTest, ForgeMixinChecksInjectDomainsInTheEffectiveForm) {
  absl::StatusOr<Descriptor> published =
      ParseDescriptor(ReadTestdata("forge.yaml"), Form::kPublished);
  ASSERT_TRUE(published.ok()) << published.status();
  CreateRequest request;
  request.host_types = AllTypesBut({});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(*published, request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_TRUE(kit->skipped.empty());
  EXPECT_NE(Entry(kit->descriptor, 1).As<CredentialConfig>(), nullptr);
}

TEST(MakeEffectiveTest, UnknownRequiredTypeIsRefusedByName) {
  absl::StatusOr<Descriptor> published =
      ParseDescriptor(ReadTestdata("shell.yaml"), Form::kPublished);
  ASSERT_TRUE(published.ok()) << published.status();
  CreateRequest request;
  request.host_types = AllTypesBut({kSbx});
  ExpectError(MakeEffective(*published, request).status(),
              "capabilities[0]: kit requires capability type \"com.docker.sandbox/sbx@1\", which "
              "this host does not provide");
}

TEST(MakeEffectiveTest, RefusesSetsAndEffectiveInput) {
  absl::StatusOr<Descriptor> set = ParseDescriptor(ReadTestdata("team-set.yaml"));
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(MakeEffective(*set, {}).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ExpandBuildArgs(*set, {}).status().code(), absl::StatusCode::kUnimplemented);

  Descriptor d = Published(absl::StrCat(kHeader, "kind: mixin\n"));
  absl::StatusOr<EffectiveKit> kit = MakeEffective(d, {});
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_EQ(MakeEffective(kit->descriptor, {}).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// ---- Arg expansion ----

TEST(ArgExpansionTest, TypingRule) {
  Descriptor d = Published(absl::StrCat(
      kHeader,
      "kind: mixin\nargs: {size: {default: '20'}, mode: {default: '755'}, flag: {default: 'true'},"
      " ratio: {default: '1.5'}, id: {default: '007'}, port: {default: '8080'}}\n"
      "capabilities:\n"
      "  - type: com.docker.sandbox/volume@1\n"
      "    config: {path: /data, size: '${{ kit.args.size }}', mode: '${{ kit.args.mode }}'}\n"
      "  - type: com.example/thing@1\n"
      "    config: {flag: '${{ kit.args.flag }}', ratio: '${{ kit.args.ratio }}',"
      " id: '${{ kit.args.id }}', port: '${{ kit.args.port }}', url: 'h:${{ kit.args.port }}',"
      " size: '${{ kit.args.size }}'}\n"));
  CreateRequest request;
  request.host_types = AllTypesBut({});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(d, request);
  ASSERT_TRUE(kit.ok()) << kit.status();

  // volume@1 size and mode stay text whatever they look like.
  const CapabilityEntry& volume = Entry(kit->descriptor, 0);
  EXPECT_EQ(volume.config.Find("size")->kind, Value::Kind::kString);
  EXPECT_EQ(volume.config.Find("mode")->kind, Value::Kind::kString);
  EXPECT_EQ(volume.As<VolumeConfig>()->size, "20");
  EXPECT_EQ(volume.As<VolumeConfig>()->mode, "755");

  const Value& thing = Entry(kit->descriptor, 1).config;
  EXPECT_EQ(thing.Find("flag")->kind, Value::Kind::kBool);
  EXPECT_EQ(thing.Find("ratio")->kind, Value::Kind::kFloat);
  EXPECT_EQ(thing.Find("id")->kind, Value::Kind::kString);
  EXPECT_EQ(thing.Find("port")->kind, Value::Kind::kInt);
  EXPECT_EQ(thing.Find("url")->text, "h:8080");            // embedded: text
  EXPECT_EQ(thing.Find("size")->kind, Value::Kind::kInt);  // the exception is volume@1's only
}

TEST(ArgExpansionTest, Refusals) {
  auto make = [](const std::string& body, const ArgValues& args = {}) {
    absl::StatusOr<Descriptor> d = ParseDescriptor(absl::StrCat(kHeader, body), Form::kPublished);
    if (!d.ok()) return d.status();
    CreateRequest request;
    request.args = args;
    request.host_types = AllTypesBut({});
    request.image_env = {{"HOME", "/home/agent"}};
    return MakeEffective(*d, request).status();
  };
  ExpectError(
      make("kind: mixin\nargs: {a: {default: x}, b: {default: x}}\ncapabilities: [{type: "
           "com.example/thing@1, config: {'${{ kit.args.a }}': 1, '${{ kit.args.b }}': 2}}]\n"),
      "capabilities[0].config: create-phase expansion collapses two keys onto \"x\"");
  ExpectError(
      make("kind: mixin\nargs: {d: {default: $}}\ncapabilities: [{type: com.example/thing@1,"
           " config: {a: '${{ kit.args.d }}{{ kit.env.HOME }}'}}]\n"),
      "capabilities[0].config.a: create-phase argument substitution introduces an "
      "environment reference");
  ExpectError(make("kind: mixin\nargs: {o: {description: 'optional, no default'}}\n"
                   "description: 'v${{ kit.args.o }}'\n"),
              "description: create-phase kit arg \"o\" has no resolved value");
  // Expanded values are validated strictly, optional entries included.
  ExpectError(
      make("kind: mixin\nargs: {p: {default: data}}\ncapabilities: [{type: "
           "com.docker.sandbox/volume@1, optional: true, config: {path: '${{ kit.args.p }}'}}]\n"),
      "capabilities[0].config.path: volume path \"data\" must be absolute");
  ExpectError(make("kind: mixin\nargs: {p: {default: '70000'}}\ncapabilities: [{type: "
                   "com.docker.sandbox/port@1, config: {container: '${{ kit.args.p }}'}}]\n"),
              "capabilities[0].config.container: container port 70000 out of range");
  // A text reference where the type wants a number stays text and fails.
  ExpectError(make("kind: mixin\nargs: {p: {default: '80x'}}\ncapabilities: [{type: "
                   "com.docker.sandbox/port@1, config: {container: '${{ kit.args.p }}'}}]\n"),
              "capabilities[0].config.container: must be an integer, got a string");
}

// The agent's command is typed once its references are expanded: a
// whole-value reference that reads as a number is still an argument, and
// an argument expanded to nothing is refused.
TEST(ArgExpansionTest, AgentCommandIsTypedInTheEffectiveForm) {
  Descriptor d = Published(absl::StrCat(
      kHeader,
      "kind: workload\nargs: {model: {default: swift}, level: {default: '3'}, image: {default: "
      "agent}}\ncapabilities:\n"
      "  - type: dev.airlock/agent@1\n"
      "    config: {command: [quill, '--model=${{ kit.args.model }}', --level,"
      " '${{ kit.args.level }}'], image: '${{ kit.args.image }}'}\n"));
  ASSERT_TRUE(Entry(d, 0).parameterized);
  CreateRequest request;
  request.args = {{"model", "swift-2"}};
  request.host_types = AllTypesBut({});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(d, request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  const AgentConfig* agent = Entry(kit->descriptor, 0).As<AgentConfig>();
  ASSERT_NE(agent, nullptr);
  EXPECT_EQ(agent->command, (std::vector<std::string>{"quill", "--model=swift-2", "--level", "3"}));
  EXPECT_EQ(agent->image, "agent");

  request.args = {{"model", "swift-2"}, {"level", ""}};
  ExpectError(MakeEffective(d, request).status(),
              "capabilities[0].config.command[3]: command arguments must not be empty");
}

// ---- Environment expansion ----

TEST(EnvExpansionTest, FinalContainerEnvironment) {
  Descriptor d = Published(absl::StrCat(
      kHeader,
      "kind: mixin\nargs: {x: {default: from-arg, env: X}, y: {default: from-arg, env: Y}}\n"
      "capabilities: [{type: com.example/thing@1, config: {x: '${{ kit.env.X }}', y: '${{ "
      "kit.env.Y }}',"
      " z: '${{ kit.env.Z }}', port: '${{ kit.env.PORT }}', empty: 'a${{ kit.env.EMPTY }}b'}}]\n"));
  CreateRequest request;
  request.host_types = AllTypesBut({});
  request.image_env = {
      {"X", "image"}, {"Y", "image"}, {"Z", "image"}, {"PORT", "8080"}, {"EMPTY", ""}};
  request.env_overrides = {{"Y", "override"}};
  absl::StatusOr<EffectiveKit> kit = MakeEffective(d, request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  const Value& config = Entry(kit->descriptor, 0).config;
  EXPECT_EQ(config.Find("x")->text, "from-arg");  // arg export replaces the image default
  EXPECT_EQ(config.Find("y")->text, "override");  // explicit overrides win last
  EXPECT_EQ(config.Find("z")->text, "image");
  EXPECT_EQ(config.Find("port")->kind, Value::Kind::kString);  // env values are never typed
  EXPECT_EQ(config.Find("empty")->text, "ab");                 // empty counts as present
}

TEST(EnvExpansionTest, Refusals) {
  auto make = [](const std::string& value, std::map<std::string, std::string> env) {
    Descriptor d = Published(absl::StrCat(
        kHeader, "kind: mixin\ncapabilities: [{type: com.example/thing@1, config: {a: [ok, '",
        value, "']}}]\n"));
    CreateRequest request;
    request.host_types = AllTypesBut({});
    request.image_env = std::move(env);
    return MakeEffective(d, request).status();
  };
  ExpectError(make("${{ kit.env.NOPE }}", {}),
              "capabilities[0].config.a[1]: final container environment has no variable \"NOPE\"");
  absl::Status placeholder = make("${{ kit.env.V }}", {{"V", "${{ kit.args.x }}"}});
  ExpectError(placeholder, "environment variable \"V\" contains NUL or Kit placeholders");
  EXPECT_EQ(placeholder.message().find("kit.args.x"), absl::string_view::npos)
      << "the value must not be echoed: " << placeholder;
  ExpectError(make("${{ kit.env.V", {{"V", "x"}}), "malformed kit.env reference");
}

TEST(EnvExpansionTest, ExpansionStaysWithinTheBudget) {
  Descriptor d = Published(absl::StrCat(
      kHeader,
      "kind: mixin\ncapabilities: [{type: com.example/thing@1, config: {a: '${{ kit.env.BIG }}',"
      " b: '${{ kit.env.BIG }}'}}]\n"));
  CreateRequest request;
  request.host_types = AllTypesBut({});
  request.image_env = {{"BIG", std::string(200 * 1024, 'x')}};
  EXPECT_TRUE(MakeEffective(d, request).ok());
  request.image_env = {{"BIG", std::string(300 * 1024, 'x')}};
  ExpectError(MakeEffective(d, request).status(), "byte budget");
}

// ---- Selection ----

constexpr char kGroupKit[] =
    "kind: mixin\ncapabilities:\n"
    "  - type: com.docker.sandbox/network-policy@1\n"
    "    config: {runtime: {allow: [api.x.com]}}\n"
    "  - group:\n"
    "      name: Shared cache\n"
    "      optional: %s\n"
    "      capabilities:\n"
    "        - type: com.docker.sandbox/host-mount@1\n"
    "          config: {path: /home/agent/.cache/pip}\n"
    "        - type: com.docker.sandbox/lifecycle@1\n"
    "          config: {files: [{path: /etc/pip.conf, content: x}]}\n"
    "  - type: com.example/thing@1\n";

std::string GroupKit(bool optional) {
  std::string text = kGroupKit;
  text.replace(text.find("%s"), 2, optional ? "true" : "false");
  return absl::StrCat(kHeader, text);
}

TEST(SelectionTest, SelectedGroupsFlattenInPlace) {
  CreateRequest request;
  request.host_types = AllTypesBut({});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(Published(GroupKit(true)), request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  const Descriptor& d = kit->descriptor;
  EXPECT_FALSE(d.HasGroups());
  ASSERT_EQ(d.capabilities.size(), 4u);
  EXPECT_EQ(Entry(d, 1).type, kHostMount);
  EXPECT_EQ(Entry(d, 2).type, kLifecycle);
  EXPECT_EQ(Entry(d, 3).type, "com.example/thing@1");
  ASSERT_TRUE(Entry(d, 1).source.has_value());
  EXPECT_EQ(Entry(d, 1).source->path, "capabilities[1].group.capabilities[0]");
}

TEST(SelectionTest, OptionalGroupIsSkippedWhole) {
  CreateRequest request;
  request.host_types = AllTypesBut({kHostMount});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(Published(GroupKit(true)), request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  // The lifecycle member the host could run is not applied either.
  ASSERT_EQ(kit->descriptor.capabilities.size(), 2u);
  EXPECT_EQ(Entry(kit->descriptor, 1).type, "com.example/thing@1");
  ASSERT_EQ(kit->skipped.size(), 1u);
  const SkippedCapability& s = kit->skipped[0];
  EXPECT_EQ(s.path, "capabilities[1]");
  EXPECT_EQ(s.name, "Shared cache");
  EXPECT_EQ(s.members, (std::vector<std::string>{"capabilities[1].group.capabilities[0]",
                                                 "capabilities[1].group.capabilities[1]"}));
  EXPECT_EQ(s.rejected, std::vector<std::string>{"capabilities[1].group.capabilities[0]"});
  EXPECT_NE(s.reason.find("com.docker.sandbox/host-mount@1"), std::string::npos);
}

TEST(SelectionTest, RequiredGroupIsRefused) {
  CreateRequest request;
  request.host_types = AllTypesBut({kHostMount});
  ExpectError(MakeEffective(Published(GroupKit(false)), request).status(),
              "capabilities[1]: required capability group \"Shared cache\" needs "
              "com.docker.sandbox/host-mount@1, which this host does not provide "
              "(capabilities[1].group.capabilities[0])");
}

TEST(SelectionTest, OptionalUnknownEntryIsSkippedRequiredRefused) {
  std::string optional = absl::StrCat(
      kHeader,
      "kind: mixin\ncapabilities: [{type: com.example/new@3, optional: true, name: New}]\n");
  CreateRequest request;
  request.host_types = AllTypesBut({});
  absl::StatusOr<EffectiveKit> kit = MakeEffective(Published(optional), request);
  ASSERT_TRUE(kit.ok()) << kit.status();
  EXPECT_TRUE(kit->descriptor.capabilities.empty());
  ASSERT_EQ(kit->skipped.size(), 1u);
  EXPECT_EQ(kit->skipped[0].name, "New");

  std::string required =
      absl::StrCat(kHeader, "kind: mixin\ncapabilities: [{type: com.example/new@3}]\n");
  ExpectError(MakeEffective(Published(required), request).status(),
              "kit requires capability type \"com.example/new@3\"");
}

TEST(SelectionTest, CrossEntryRulesJudgeTheSelectedWhole) {
  // Deferred while the group stands; judged once it is flattened.
  std::string text = absl::StrCat(
      kHeader,
      "kind: mixin\ncapabilities:\n"
      "  - type: com.docker.sandbox/network-policy@1\n"
      "    config: {runtime: {allow: [api.x.com]}}\n"
      "  - group:\n"
      "      capabilities:\n"
      "        - type: com.docker.sandbox/credential@1\n"
      "          config: {service: x, phase: runtime, apiKey: {inject: [{domain: evil.x.com}]}}\n");
  CreateRequest request;
  request.host_types = AllTypesBut({});
  ExpectError(MakeEffective(Published(text), request).status(),
              "capabilities[1].config.apiKey.inject[0].domain: inject domain \"evil.x.com\" is not "
              "in the network policy's runtime allow list");
}

}  // namespace
}  // namespace airlock::kit
