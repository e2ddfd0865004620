#include "common/kit/descriptor.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "common/kit/internal/testdata.h"

namespace airlock::kit {
namespace {

using internal::ReadTestdata;

constexpr char kHeader[] = "schemaVersion: \"3\"\n";

// Case is one descriptor and what parsing it must say: "" for success,
// else a substring of the error (which carries the field path).
struct Case {
  const char* name;
  std::string yaml;
  std::string error;
};

void ExpectCases(const std::vector<Case>& cases, Form form = Form::kAuthored) {
  for (const Case& c : cases) {
    absl::StatusOr<Descriptor> d = ParseDescriptor(c.yaml, form);
    if (c.error.empty()) {
      EXPECT_TRUE(d.ok()) << c.name << ": " << d.status() << "\n" << c.yaml;
    } else {
      ASSERT_FALSE(d.ok()) << c.name << " parsed, but should fail with: " << c.error << "\n"
                           << c.yaml;
      EXPECT_NE(d.status().message().find(c.error), absl::string_view::npos)
          << c.name << "\n  want: " << c.error << "\n  got:  " << d.status().message();
    }
  }
}

// Kit writes a descriptor of `kind` with the given flow-style capability
// items.
std::string Kit(const std::string& kind, const std::string& capabilities) {
  return absl::StrCat(kHeader, "kind: ", kind, "\ncapabilities: [", capabilities, "]\n");
}

std::string Mixin(const std::string& capabilities) { return Kit("mixin", capabilities); }

// ---- Fixtures ----

TEST(FixtureTest, QuillWorkloadParses) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(ReadTestdata("quill.yaml"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, KitKind::kWorkload);
  EXPECT_EQ(d->display_name, "Quill coding agent");
  EXPECT_EQ(d->icon_url, "https://quill.invalid/icon.png");
  ASSERT_EQ(d->args.size(), 4u);
  EXPECT_EQ(d->args.at("version").build_arg, "QUILL_VERSION");
  EXPECT_EQ(d->args.at("effort").enum_values, (std::vector<std::string>{"", "low", "high"}));
  // The provide holds a build-phase reference and waits for publish.
  ASSERT_EQ(d->provides.size(), 1u);
  EXPECT_EQ(d->provides[0].text, "quill@${{ kit.args.version }}");
  EXPECT_EQ(d->provides[0].name, "");
  ASSERT_EQ(d->capabilities.size(), 11u);

  const auto& network = std::get<CapabilityEntry>(d->capabilities[1]);
  EXPECT_EQ(network.name, "Quill API");
  const NetworkPolicyConfig* np = network.As<NetworkPolicyConfig>();
  ASSERT_NE(np, nullptr);
  EXPECT_EQ(np->version, 1);
  ASSERT_TRUE(np->runtime.has_value());
  ASSERT_EQ(np->runtime->allow.size(), 3u);
  EXPECT_EQ(np->runtime->allow[0].hosts, std::vector<std::string>{"api.quill.dev:443"});
  EXPECT_FALSE(np->runtime->allow[0].bounded());

  const auto& credential = std::get<CapabilityEntry>(d->capabilities[2]);
  EXPECT_TRUE(credential.optional);
  const CredentialConfig* c = credential.As<CredentialConfig>();
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->service, "quill");
  EXPECT_EQ(c->phases, std::vector<Phase>{Phase::kRuntime});
  ASSERT_TRUE(c->api_key && c->oauth && c->oauth->credential_file);
  EXPECT_TRUE(c->api_key->proxy_managed);
  EXPECT_EQ(c->oauth->token_endpoint->host, "auth.quill.dev");
  EXPECT_EQ(c->oauth->credential_file->format, "json");

  // The port and the lifecycle still hold arg references: no typed view.
  const auto& port = std::get<CapabilityEntry>(d->capabilities[7]);
  EXPECT_TRUE(port.parameterized);
  EXPECT_EQ(port.As<PortConfig>(), nullptr);
  const auto& volume = std::get<CapabilityEntry>(d->capabilities[6]);
  ASSERT_NE(volume.As<VolumeConfig>(), nullptr);
  EXPECT_EQ(volume.As<VolumeConfig>()->mode, "0700");
}

TEST(FixtureTest, ForgeMixinParses) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(ReadTestdata("forge.yaml"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, KitKind::kMixin);
  ASSERT_EQ(d->provides.size(), 1u);
  EXPECT_EQ(d->provides[0].name, "com.docker.kit/forge");
  EXPECT_EQ(d->provides[0].version, "3.2.0");
  EXPECT_EQ(d->conflicts, std::vector<std::string>{"com.docker.kit/forge-legacy"});

  const NetworkPolicyConfig* np =
      std::get<CapabilityEntry>(d->capabilities[0]).As<NetworkPolicyConfig>();
  ASSERT_NE(np, nullptr);
  EXPECT_EQ(np->version, 2);
  ASSERT_EQ(np->runtime->allow.size(), 3u);
  EXPECT_FALSE(np->runtime->allow[0].bounded());
  EXPECT_TRUE(np->runtime->allow[1].bounded());
  EXPECT_EQ(np->runtime->allow[2].methods, (std::vector<std::string>{"POST", "PUT"}));
  ASSERT_EQ(np->runtime->deny.size(), 1u);
  EXPECT_EQ(np->runtime->deny[0].hosts, std::vector<std::string>{"api.codeforge.example"});
  EXPECT_EQ(np->runtime->deny[0].methods, std::vector<std::string>{"DELETE"});
  EXPECT_EQ(np->runtime->deny[0].paths, std::vector<std::string>{"/repos/**"});
  EXPECT_FALSE(np->install.has_value());

  const CredentialConfig* c = std::get<CapabilityEntry>(d->capabilities[1]).As<CredentialConfig>();
  ASSERT_NE(c, nullptr);
  ASSERT_EQ(c->api_key->inject.size(), 3u);
  EXPECT_EQ(c->api_key->inject[2].scheme, "basic");
  EXPECT_EQ(c->api_key->inject[2].username, "x-access-token");
}

TEST(FixtureTest, ShellWorkloadParses) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(ReadTestdata("shell.yaml"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version, "1.4.0");
  const LifecycleConfig* lc = std::get<CapabilityEntry>(d->capabilities[2]).As<LifecycleConfig>();
  ASSERT_NE(lc, nullptr);
  ASSERT_EQ(lc->startup.size(), 1u);
  EXPECT_EQ(lc->startup[0].command[0], "sh");
  EXPECT_EQ(lc->startup[0].user, "0");
  EXPECT_FALSE(lc->interactive.has_value());
}

TEST(FixtureTest, SetParsesOnlyAsAuthored) {
  std::string text = ReadTestdata("team-set.yaml");
  absl::StatusOr<Descriptor> d = ParseDescriptor(text);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, KitKind::kSet);
  ASSERT_EQ(d->kits.size(), 3u);
  EXPECT_EQ(d->kits[1].args.at("model"), "${{ kit.args.model }}");
  ASSERT_TRUE(d->HasGroups());
  const auto& group = std::get<CapabilityGroup>(d->capabilities[0]);
  EXPECT_TRUE(group.optional);
  EXPECT_EQ(group.name, "Shared pip cache");
  ASSERT_EQ(group.members.size(), 2u);
  EXPECT_EQ(group.members[1].As<LifecycleConfig>()->files[0].overwrite, false);

  absl::StatusOr<Descriptor> published = ParseDescriptor(text, Form::kPublished);
  ASSERT_FALSE(published.ok());
  EXPECT_NE(published.status().message().find("kind: set never appears in a published"),
            absl::string_view::npos)
      << published.status();
}

TEST(FixtureTest, QuillMixinAndAdapterParse) {
  for (const char* name : {"quill-mixin.yaml", "quill-acp.yaml"}) {
    absl::StatusOr<Descriptor> d = ParseDescriptor(ReadTestdata(name));
    EXPECT_TRUE(d.ok()) << name << ": " << d.status();
  }
  absl::StatusOr<Descriptor> acp = ParseDescriptor(ReadTestdata("quill-acp.yaml"));
  ASSERT_TRUE(acp.ok());
  ASSERT_EQ(acp->requirements.size(), 1u);
  EXPECT_EQ(acp->requirements[0].name, "com.docker.kit/quill");
  EXPECT_EQ(acp->requirements[0].constraints.size(), 2u);
}

TEST(FixtureTest, PublishedJsonFormParses) {
  // Compact JSON as the annotation carries it, read by the YAML decoder.
  std::string json = R"({"capabilities":[{"config":{"runtime":{"allow":["a.example"]}},)"
                     R"("type":"com.docker.sandbox/network-policy@1"}],"kind":"sandbox",)"
                     R"("provides":["thing@1.0.0"],"schemaVersion":"3"})";
  absl::StatusOr<Descriptor> d = ParseDescriptor(json, Form::kPublished);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->kind, KitKind::kWorkload);
  EXPECT_TRUE(d->legacy_sandbox_kind);
  // Authors must not write the old spelling.
  EXPECT_FALSE(ParseDescriptor(json, Form::kAuthored).ok());
}

// ---- Top level ----

TEST(TopLevelTest, Rules) {
  ExpectCases({
      {"minimal", absl::StrCat(kHeader, "kind: mixin\n"), ""},
      {"schemaVersion number", "schemaVersion: 3\nkind: mixin\n",
       "schemaVersion: schemaVersion must be the string \"3\""},
      {"schemaVersion 2", "schemaVersion: \"2\"\nkind: mixin\n",
       "schemaVersion: schemaVersion must be \"3\", got \"2\""},
      {"schemaVersion missing", "kind: mixin\n", "schemaVersion is required"},
      {"kind missing", kHeader, "kind: kind is required"},
      {"kind unknown", absl::StrCat(kHeader, "kind: tool\n"),
       "kind: kind must be \"workload\", \"mixin\", or \"set\", got \"tool\""},
      {"sandbox spelling authored", absl::StrCat(kHeader, "kind: sandbox\n"),
       "old spelling of \"workload\""},
      {"unknown field", absl::StrCat(kHeader, "kind: mixin\nimage: debian\n"),
       "image: unknown field"},
      {"not a mapping", "- a\n- b\n", "a descriptor is a mapping"},
      {"version ok", absl::StrCat(kHeader, "kind: mixin\nversion: 1.2.0-rc1\n"), ""},
      {"version unquoted float reads as text",
       absl::StrCat(kHeader, "kind: mixin\nversion: 1.10\n"), ""},
      {"version v prefix", absl::StrCat(kHeader, "kind: mixin\nversion: v1.2\n"),
       "version: version \"v1.2\" is not a version"},
      {"licenses", absl::StrCat(kHeader, "kind: mixin\nlicenses: [MIT, Apache-2.0]\n"), ""},
      {"licenses not a list", absl::StrCat(kHeader, "kind: mixin\nlicenses: MIT\n"),
       "licenses: must be a list"},
      {"display strings",
       absl::StrCat(kHeader,
                    "kind: mixin\ndisplayName: X\nauthor: A <a@b.c>\n"
                    "description: d\nsourceUrl: not even a url\n"),
       ""},
  });
}

TEST(TopLevelTest, VersionKeepsItsSpelling) {
  absl::StatusOr<Descriptor> d =
      ParseDescriptor(absl::StrCat(kHeader, "kind: mixin\nversion: 1.10\n"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version, "1.10");
}

TEST(TopLevelTest, IconUrlIsHttpsOnly) {
  auto icon = [](const std::string& url) {
    return absl::StrCat(kHeader, "kind: mixin\niconUrl: '", url, "'\n");
  };
  ExpectCases({
      {"https", icon("https://cdn.example.com/i.png"), ""},
      {"https with port and userinfo", icon("https://u@cdn.example.com:8443/i.png"), ""},
      {"scheme case-folded", icon("HTTPS://cdn.example.com/i.png"), ""},
      {"http", icon("http://cdn.example.com/i.png"),
       "iconUrl: iconUrl \"http://cdn.example.com/i.png\" must be an absolute https URL"},
      {"javascript", icon("javascript:alert(1)"), "must be an absolute https URL"},
      {"data", icon("data:image/png;base64,AAAA"), "must be an absolute https URL"},
      {"file", icon("file:///etc/passwd"), "must be an absolute https URL"},
      {"no host", icon("https:///i.png"), "must be an absolute https URL"},
      {"relative", icon("//cdn.example.com/i.png"), "must be an absolute https URL"},
      {"space", icon("https://cdn.example.com/a b.png"), "must be an absolute https URL"},
  });
}

TEST(TopLevelTest, ContentForms) {
  ExpectCases({
      {"dockerfile relative",
       absl::StrCat(kHeader, "kind: workload\ndockerfile: build/kit.dockerfile\n"), ""},
      {"dockerfile escapes", absl::StrCat(kHeader, "kind: workload\ndockerfile: a/../../x\n"),
       "dockerfile: dockerfile \"a/../../x\" must be a relative path inside"},
      {"dockerfile absolute", absl::StrCat(kHeader, "kind: workload\ndockerfile: /x\n"),
       "must be a relative path inside"},
      {"build and dockerfile",
       absl::StrCat(kHeader, "kind: workload\nbuild: FROM x\ndockerfile: d\n"),
       "dockerfile: build and dockerfile are mutually exclusive"},
      {"build and kits",
       absl::StrCat(kHeader, "kind: workload\nbuild: FROM x\nkits: [{ref: r.io/a:1}]\n"),
       "kits: build and kits are mutually exclusive"},
      {"kits empty", absl::StrCat(kHeader, "kind: mixin\nkits: []\n"),
       "kits: kits: is present but empty"},
      {"set without kits", absl::StrCat(kHeader, "kind: set\n"), "kits: a set lists its kits"},
  });
}

TEST(TopLevelTest, Kits) {
  auto set = [](const std::string& kits) {
    return absl::StrCat(kHeader,
                        "kind: set\nargs: {reg: {default: r.io, buildArg: REG}, m: {default: x}}\n"
                        "kits: [",
                        kits, "]\n");
  };
  const std::string digest = "sha256:" + std::string(64, 'a');
  ExpectCases({
      {"registry refs", set("{ref: r.io/team/a:1.0}, {ref: 'docker.io/b@" + digest + "'}"), ""},
      {"build-phase arg in ref", set("{ref: '${{ kit.args.reg }}/a:1'}"), ""},
      {"create-phase arg in ref", set("{ref: '${{ kit.args.m }}/a:1'}"),
       "kits[0].ref: ref names \"m\", which resolves at create"},
      {"local path", set("{ref: ./a}"), "kits[0].ref: ref \"./a\" is a local path"},
      {"absolute path", set("{ref: /a}"), "is a local path"},
      {"git", set("{ref: 'git+https://x/y'}"), "is a git reference"},
      {"url", set("{ref: 'oci://r.io/a'}"), "is a URL"},
      {"whitespace", set("{ref: 'r.io/a b'}"), "contains whitespace"},
      {"bad reference", set("{ref: 'r.io/A:1'}"), "is not a valid registry reference"},
      {"missing ref", set("{digest: '" + digest + "'}"), "kits[0].ref: ref is required"},
      {"duplicate", set("{ref: r.io/a:1}, {ref: r.io/a:1}"),
       "kits[1].ref: \"r.io/a:1\" already listed at kits[0]"},
      {"bad digest", set("{ref: r.io/a:1, digest: sha256:abc}"),
       "kits[0].digest: digest \"sha256:abc\" is not sha256:<64 hex>"},
      {"digest disagrees",
       set("{ref: 'r.io/a@sha256:" + std::string(64, 'b') + "', digest: '" + digest + "'}"),
       "disagrees with ref"},
      {"args", set("{ref: r.io/a:1, args: {model: fast}}"), ""},
      {"bad arg name", set("{ref: r.io/a:1, args: {'1x': fast}}"),
       "kits[0].args.1x: invalid arg name"},
      {"unknown field", set("{ref: r.io/a:1, tag: x}"), "kits[0].tag: unknown field"},
  });
  // Published: every entry pinned, no references left.
  const std::string published = absl::StrCat(kHeader, "kind: workload\nkits: [{ref: r.io/a:1}]\n");
  ExpectCases({{"published needs digest", published, "kits[0].digest: digest is required"}},
              Form::kPublished);
}

TEST(TopLevelTest, SizeBudget) {
  std::string base = absl::StrCat(kHeader, "kind: mixin\ndescription: ");
  std::string big = base + std::string(70 * 1024, 'x') + "\n";
  absl::StatusOr<Descriptor> d = ParseDescriptor(big);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->warnings.size(), 1u);
  EXPECT_NE(d->warnings[0].find("the advisory budget is 65536"), std::string::npos);

  std::string small = base + "x\n";
  ASSERT_TRUE(ParseDescriptor(small).ok());
  EXPECT_TRUE(ParseDescriptor(small)->warnings.empty());

  std::string huge = base + std::string(kMaxDescriptorBytes, 'x') + "\n";
  absl::StatusOr<Descriptor> h = ParseDescriptor(huge);
  ASSERT_FALSE(h.ok());
  EXPECT_NE(h.status().message().find(
                absl::StrCat("descriptor is ", huge.size(), " bytes, over the 524288 byte budget")),
            absl::string_view::npos)
      << h.status();
}

TEST(TopLevelTest, AllProblemsAreReportedTogether) {
  absl::StatusOr<Descriptor> d =
      ParseDescriptor("schemaVersion: \"2\"\nkind: tool\niconUrl: http://x\nextra: 1\n");
  ASSERT_FALSE(d.ok());
  std::string message(d.status().message());
  EXPECT_NE(message.find("(4 errors)"), std::string::npos) << message;
  for (const char* path : {"schemaVersion:", "kind:", "iconUrl:", "extra:"}) {
    EXPECT_NE(message.find(path), std::string::npos) << path << " in " << message;
  }
}

// ---- Relations ----

TEST(RelationsTest, Rules) {
  auto rel = [](const std::string& key, const std::string& items) {
    return absl::StrCat(kHeader, "kind: mixin\nargs: {v: {default: '1.0', buildArg: V}}\n", key,
                        ": [", items, "]\n");
  };
  ExpectCases({
      {"provides", rel("provides", "gh@2.1.0, com.example/tool, 'libstdc++6'"), ""},
      {"provides arg ref", rel("provides", "'gh@${{ kit.args.v }}'"), ""},
      {"provides create-phase arg ref",
       absl::StrCat(kHeader, "kind: mixin\nargs: {c: {default: '1.0'}}\n",
                    "provides: ['gh@${{ kit.args.c }}']\n"),
       "provides[0]: provides entry \"gh@${{ kit.args.c }}\" names \"c\", which resolves at "
       "create, but provides are expanded at publish; give the arg a buildArg"},
      {"provides bad version", rel("provides", "gh@v2"),
       "provides[0]: provides entry \"gh@v2\": version \"v2\" is not a version"},
      {"provides single-label namespace", rel("provides", "example/gh"),
       "namespace \"example\" in \"example/gh\" is a single label"},
      {"provides deb authored", rel("provides", "deb/curl@8.0"),
       "provides entry \"deb/curl@8.0\" is in the deb/ namespace"},
      {"provides uppercase", rel("provides", "GH"), "is not a valid name"},
      {"requires", rel("requires", "'gh >= 2.0, < 3', 'shell>=1.0.0', tool"), ""},
      {"requires unsatisfiable", rel("requires", "'gh >= 3, < 2'"),
       "requires[0]: requires entry \"gh >= 3, < 2\": unsatisfiable constraints: >= 3 and < 2"},
      {"requires arg ref", rel("requires", "'gh >= ${{ kit.args.v }}'"),
       "requires entry \"gh >= ${{ kit.args.v }}\": arg references are not allowed in requires"},
      {"integrates missing version", rel("integrates", "'gh >='"),
       "integrates[0]: integrates entry \"gh >=\": constraint \">=\": missing version"},
      {"integrates arg ref", rel("integrates", "'${{ kit.args.v }}'"),
       "arg references are not allowed in integrates"},
      {"conflicts", rel("conflicts", "forge-legacy, com.example/old"), ""},
      {"conflicts versioned", rel("conflicts", "forge@1"),
       "conflicts[0]: conflicts entry \"forge@1\": \"forge@1\" is not a bare name"},
      {"conflicts arg ref", rel("conflicts", "'${{ kit.args.v }}'"),
       "arg references are not allowed in conflicts"},
  });
}

TEST(RelationsTest, PublishedProvidesAreVersioned) {
  const std::string bare = absl::StrCat(kHeader, "kind: mixin\nprovides: [tool]\n");
  ExpectCases({{"bare without version", bare,
                "provides entry \"tool\" has no version: add @<version> here or a top-level "
                "version: field"},
               {"bare with fallback", absl::StrCat(bare, "version: '1.0'\n"), ""},
               {"deb allowed once published",
                absl::StrCat(kHeader, "kind: workload\nprovides: [deb/curl@8.0]\n"), ""}},
              Form::kPublished);
}

// ---- Args ----

TEST(ArgsTest, Rules) {
  auto args = [](const std::string& body) {
    return absl::StrCat(kHeader, "kind: mixin\nargs:\n", body);
  };
  ExpectCases({
      {"full",
       args("  model: {default: '', pattern: '[a-z]*', env: MODEL, description: d}\n"
            "  tier: {required: true, enum: [a, b]}\n"
            "  ver: {default: '1', buildArg: VER}\n"),
       ""},
      {"required false with default", args("  x: {required: false, default: a}\n"), ""},
      {"bad name", args("  1x: {default: a}\n"), "args.1x: invalid arg name"},
      {"required and default", args("  x: {required: true, default: a}\n"),
       "args.x: required and default are mutually exclusive"},
      {"enum and pattern", args("  x: {enum: [a], pattern: a}\n"),
       "args.x: enum and pattern are mutually exclusive"},
      {"env and buildArg", args("  x: {env: X, buildArg: X}\n"),
       "args.x: env and buildArg are mutually exclusive; an arg resolves in one phase"},
      {"bad pattern", args("  x: {pattern: '('}\n"), "args.x.pattern: invalid pattern:"},
      {"perl-only pattern", args("  x: {pattern: '(?=a)'}\n"), "args.x.pattern: invalid pattern:"},
      {"bad env", args("  x: {env: 1X}\n"), "args.x.env: env \"1X\" is not a valid env var name"},
      {"bad buildArg", args("  x: {buildArg: A-B}\n"),
       "args.x.buildArg: buildArg \"A-B\" is not a valid build-arg name"},
      {"unknown field", args("  x: {secret: true}\n"), "args.x.secret: unknown field"},
      {"required not bool", args("  x: {required: 'yes'}\n"),
       "args.x.required: must be true or false"},
  });
}

TEST(ArgsTest, ReferencesMustBeDeclared) {
  ExpectCases({
      {"declared",
       absl::StrCat(kHeader,
                    "kind: mixin\nargs: {t: {default: x}}\ndescription: '${{kit.args.t}}'\n"),
       ""},
      {"undeclared in a value",
       absl::StrCat(kHeader, "kind: mixin\ndescription: 'v${{ kit.args.nope }}'\n"),
       "description: descriptor references ${{ kit.args.nope }} but declares no arg \"nope\""},
      {"undeclared in a config key",
       Mixin("{type: com.example/thing@1, config: {'${{ kit.args.k }}': 1}}"),
       "capabilities[0].config.${{ kit.args.k }}: descriptor references ${{ kit.args.k }}"},
  });
}

TEST(ArgsTest, PublishedHasNoBuildPhaseReferences) {
  const std::string text = absl::StrCat(
      kHeader,
      "kind: mixin\nargs: {v: {default: '1', buildArg: V}, m: {default: x}}\n"
      "capabilities: [{type: com.example/thing@1, config: {a: '${{ kit.args.m }}'}}]\n");
  ExpectCases({{"create-phase reference stays", text, ""}}, Form::kPublished);
  ExpectCases(
      {{"build-phase reference left", absl::StrReplaceAll(text, {{"kit.args.m", "kit.args.v"}}),
        "capabilities[0].config.a: published descriptor still references ${{ kit.args.v }}, "
        "which resolves at build"}},
      Form::kPublished);
}

TEST(EnvReferencesTest, OnlyInCapabilityConfigValues) {
  ExpectCases({
      {"config value",
       Mixin("{type: com.example/thing@1, config: {a: [x, '${{ kit.env.HOME }}']}}"), ""},
      {"group member config value",
       Mixin("{group: {capabilities: [{type: com.example/t@1, config: {a: '${{ kit.env.X }}'}}]}}"),
       ""},
      {"display field", absl::StrCat(kHeader, "kind: mixin\ndescription: '${{ kit.env.USER }}'\n"),
       "description: environment references are allowed only in capability config values"},
      {"capability description",
       Mixin("{type: com.example/thing@1, description: '${{ kit.env.X }}'}"),
       "capabilities[0].description: environment references are allowed only"},
      {"config key", Mixin("{type: com.example/thing@1, config: {'${{ kit.env.K }}': 1}}"),
       "capabilities[0].config.${{ kit.env.K }}: environment references are not allowed in "
       "mapping keys"},
  });
}

// ---- Capability entries and groups ----

TEST(CapabilityEntryTest, Rules) {
  ExpectCases({
      {"unknown type opaque", Mixin("{type: com.example/thing@1, config: {any: [thing, {x: 1}]}}"),
       ""},
      {"all entry fields",
       Mixin("{type: com.example/thing@2, name: Thing, optional: true, description: d, "
             "source: {kit: r.io/a:1, path: 'capabilities[0]'}}"),
       ""},
      {"type missing", Mixin("{name: x}"), "capabilities[0]: type is required"},
      {"type uppercase", Mixin("{type: Docker/x@1}"),
       "capabilities[0].type: type \"Docker/x@1\" is not <namespace>/<name>@<version>"},
      {"type leading zero", Mixin("{type: com.example/x@01}"),
       "is not <namespace>/<name>@<version>"},
      {"type no version", Mixin("{type: com.example/x}"), "is not <namespace>/<name>@<version>"},
      {"type no namespace", Mixin("{type: x@1}"), "is not <namespace>/<name>@<version>"},
      {"name number", Mixin("{type: com.example/x@1, name: 3}"),
       "capabilities[0].name: capability name must be a string"},
      {"name null", Mixin("{type: com.example/x@1, name: null}"),
       "capability name must be a string"},
      {"optional not bool", Mixin("{type: com.example/x@1, optional: 'no'}"),
       "capabilities[0].optional: must be true or false"},
      {"unknown field", Mixin("{type: com.example/x@1, labels: {}}"),
       "capabilities[0].labels: unknown field"},
      {"config list", Mixin("{type: com.example/x@1, config: [a]}"),
       "capabilities[0].config: config must be a mapping"},
      {"source not object", Mixin("{type: com.example/x@1, source: here}"),
       "capabilities[0].source: capability source must be an object"},
      {"source without path", Mixin("{type: com.example/x@1, source: {kit: a}}"),
       "capabilities[0].source.path: source path is required"},
      {"item not a mapping", Mixin("just-a-string"), "capabilities[0]: must be a mapping"},
  });
}

TEST(CapabilityEntryTest, WellKnownUntypedConfigsAreStrict) {
  ExpectCases({
      {"agent-context", Mixin("{type: com.docker.sandbox/agent-context@1, config: {content: hi}}"),
       ""},
      {"agent-context unknown key",
       Mixin("{type: com.docker.sandbox/agent-context@1, config: {content: hi, color: red}}"),
       "capabilities[0].config.color: unknown field"},
      {"acp unknown key",
       Mixin("{type: com.docker.sandbox/acp@1, config: {agent: a, command: x, cwd: /}}"),
       "capabilities[0].config.cwd: unknown field"},
      {"unknown type any key", Mixin("{type: com.docker.sandbox/brand-new@1, config: {cwd: /}}"),
       ""},
  });
}

TEST(CapabilityBlockTest, Rules) {
  const std::string lc = "{type: com.docker.sandbox/lifecycle@1, config: {interactive: []}}";
  ExpectCases({
      {"privileged", Mixin("{type: com.docker.sandbox/privileged@1, description: nested engine}"),
       ""},
      {"privileged with empty config", Mixin("{type: com.docker.sandbox/privileged@1, config: {}}"),
       "capabilities[0].config: com.docker.sandbox/privileged@1 takes no config"},
      {"kit-registry with null config",
       Mixin("{type: com.docker.sandbox/kit-registry@1, config: null}"),
       "com.docker.sandbox/kit-registry@1 takes no config"},
      {"singleton twice", Mixin(lc + ", " + lc),
       "capabilities[1]: com.docker.sandbox/lifecycle@1 already declared at capabilities[0]"},
      {"exact duplicate",
       Mixin("{type: com.example/x@1, config: {a: 1}}, {type: com.example/x@1, "
             "name: other, config: {a: 1}}"),
       "capabilities[1]: identical to capabilities[0]"},
      {"empty config equals none",
       Mixin("{type: com.example/x@1}, {type: com.example/x@1, config: {}}"),
       "capabilities[1]: identical to capabilities[0]"},
      {"different configs",
       Mixin("{type: com.example/x@1, config: {a: 1}}, {type: com.example/x@1, "
             "config: {a: 2}}"),
       ""},
      {"network versions together",
       Mixin("{type: com.docker.sandbox/network-policy@1}, {type: "
             "com.docker.sandbox/network-policy@2}"),
       "capabilities[1]: com.docker.sandbox/network-policy@2 cannot be declared beside "
       "com.docker.sandbox/network-policy@1 at capabilities[0]; a descriptor states one "
       "network-policy version"},
      {"sbx on workload", Kit("workload", "{type: com.docker.sandbox/sbx@1}"), ""},
      {"sbx on mixin", Mixin("{type: com.docker.sandbox/sbx@1}"),
       "capabilities[0].type: com.docker.sandbox/sbx@1 is workload-only"},
      {"long-running on mixin", Mixin("{type: com.docker.sandbox/long-running@1}"),
       "com.docker.sandbox/long-running@1 is workload-only"},
  });
}

TEST(CapabilityGroupTest, Rules) {
  const std::string member = "{type: com.example/x@1}";
  auto group = [](const std::string& body) { return Mixin("{group: {" + body + "}}"); };
  ExpectCases({
      {"group", group("name: G, description: d, optional: true, capabilities: [" + member + "]"),
       ""},
      {"required one-member group", group("capabilities: [" + member + "]"), ""},
      {"source beside group", Mixin("{source: {path: x}, group: {capabilities: [" + member + "]}}"),
       ""},
      {"group states type",
       Mixin("{type: com.example/x@1, group: {capabilities: [" + member + "]}}"),
       "capabilities[0].type: group item must not state type"},
      {"group states optional", Mixin("{optional: true, group: {capabilities: [" + member + "]}}"),
       "capabilities[0].optional: group item must not state optional"},
      {"empty group", group("capabilities: []"),
       "capabilities[0].group.capabilities: group must contain at least one member"},
      {"group without members", group("name: G"), "group must contain at least one member"},
      {"nested group", group("capabilities: [{group: {capabilities: [" + member + "]}}]"),
       "capabilities[0].group.capabilities[0]: nested groups are not permitted"},
      {"member states optional", group("capabilities: [{type: com.example/x@1, optional: false}]"),
       "capabilities[0].group.capabilities[0].optional: group members must not state optional"},
      {"group name number", group("name: 7, capabilities: [" + member + "]"),
       "capabilities[0].group.name: group name must be a string"},
      {"group optional string", group("optional: 'yes', capabilities: [" + member + "]"),
       "capabilities[0].group.optional: must be true or false"},
      {"group not object", Mixin("{group: [a]}"), "capabilities[0].group: group must be an object"},
      {"group unknown field", group("color: red, capabilities: [" + member + "]"),
       "capabilities[0].group.color: unknown field"},
      {"member problems carry the member path",
       group("capabilities: [" + member +
             ", {type: com.docker.sandbox/volume@1, config: {path: rel}}]"),
       "capabilities[0].group.capabilities[1].config.path: volume path \"rel\" must be absolute"},
      // Each group is its own declaration block.
      {"singleton in a group and at top",
       Mixin("{type: com.docker.sandbox/privileged@1}, {group: {capabilities: "
             "[{type: com.docker.sandbox/privileged@1}]}}"),
       ""},
      {"singleton twice in one group",
       group("capabilities: [{type: com.docker.sandbox/privileged@1}, "
             "{type: com.docker.sandbox/privileged@1}]"),
       "capabilities[0].group.capabilities[1]: com.docker.sandbox/privileged@1 already declared at "
       "capabilities[0].group.capabilities[0]"},
  });
}

// ---- Typed configs ----

std::string Network1(const std::string& config) {
  return Mixin("{type: com.docker.sandbox/network-policy@1, config: " + config + "}");
}
std::string Network2(const std::string& config) {
  return Mixin("{type: com.docker.sandbox/network-policy@2, config: " + config + "}");
}

TEST(NetworkPolicyTest, Version1) {
  ExpectCases({
      {"both phases",
       Network1("{install: {allow: [registry.npmjs.org]}, runtime: {allow: ['*.x.com', "
                "'api.x.com:443'], deny: [t.x.com]}}"),
       ""},
      {"no config grants nothing", Mixin("{type: com.docker.sandbox/network-policy@1}"), ""},
      {"unknown phase", Network1("{build: {allow: [a]}}"),
       "capabilities[0].config.build: unknown field"},
      {"unknown list", Network1("{runtime: {allowed: [a]}}"),
       "capabilities[0].config.runtime.allowed: unknown field"},
      {"empty host", Network1("{runtime: {allow: ['']}}"),
       "capabilities[0].config.runtime.allow[0]: host must not be empty"},
      {"object entry is @2 only", Network1("{runtime: {allow: [{hosts: [a]}]}}"),
       "capabilities[0].config.runtime.allow[0]: must be a string, got a mapping"},
      {"phase null", Network1("{runtime: null}"), "capabilities[0].config.runtime: is null"},
  });
}

TEST(NetworkPolicyTest, Version2) {
  auto allow = [](const std::string& entry) {
    return Network2("{runtime: {allow: [" + entry + "]}}");
  };
  auto deny = [](const std::string& entry) {
    return Network2("{runtime: {deny: [" + entry + "]}}");
  };
  ExpectCases({
      {"bare host", allow("github.com"), ""},
      {"bounded", allow("{hosts: [api.x.com], methods: [GET, POST], paths: ['/v1/**']}"), ""},
      {"ANY alone", allow("{hosts: [api.x.com], methods: [ANY], paths: ['/v1/**']}"), ""},
      {"unbounded object", allow("{hosts: ['*.x.com']}"), ""},
      {"hosts missing", allow("{methods: [GET]}"),
       "capabilities[0].config.runtime.allow[0]: hosts is required"},
      {"hosts empty", allow("{hosts: []}"),
       "capabilities[0].config.runtime.allow[0].hosts: must name at least one host"},
      {"empty host string", allow("{hosts: ['']}"), "allow[0].hosts[0]: host must not be empty"},
      {"lowercase method", allow("{hosts: [a.x], methods: [get]}"),
       "capabilities[0].config.runtime.allow[0].methods[0]: method \"get\" is not an uppercase "
       "HTTP "
       "method or ANY"},
      {"repeated method", allow("{hosts: [a.x], methods: [GET, GET]}"),
       "allow[0].methods[1]: repeats method \"GET\""},
      {"ANY beside GET", allow("{hosts: [a.x], methods: [ANY, GET]}"),
       "allow[0].methods: names ANY beside a specific method"},
      {"empty methods", allow("{hosts: [a.x], methods: []}"),
       "allow[0].methods: states an empty methods list"},
      {"null methods", allow("{hosts: [a.x], methods: null}"),
       "allow[0].methods: states an empty methods list"},
      {"empty paths", allow("{hosts: [a.x], methods: [GET], paths: []}"),
       "allow[0].paths: states an empty paths list"},
      {"paths without methods", allow("{hosts: [a.x], paths: ['/x']}"),
       "allow[0]: states paths without methods; name the methods the paths bound, or methods: "
       "[ANY]"},
      {"relative path", allow("{hosts: [a.x], methods: [GET], paths: [x/**]}"),
       "allow[0].paths[0]: path \"x/**\" must start with \"/\""},
      {"bounded allow pattern", allow("{hosts: ['*.x.com'], methods: [GET]}"),
       "allow[0].hosts[0]: allow entry bounds the pattern \"*.x.com\"; an entry stating methods or "
       "paths names its hosts exactly"},
      {"bounded deny pattern",
       deny("{hosts: ['*.x.com'], methods: [DELETE], paths: ['/repos/**']}"), ""},
      {"unknown entry field", allow("{hosts: [a.x], ports: [443]}"),
       "allow[0].ports: unknown field"},
  });
}

std::string Credential(const std::string& config, const std::string& network = "") {
  std::string items = "{type: com.docker.sandbox/credential@1, config: " + config + "}";
  if (!network.empty()) items = network + ", " + items;
  return Mixin(items);
}

constexpr char kAllowApi[] =
    "{type: com.docker.sandbox/network-policy@1, config: {runtime: {allow: [api.x.com]}, "
    "install: {allow: [pkg.x.com]}}}";

TEST(CredentialTest, Rules) {
  ExpectCases({
      {"api key", Credential("{service: svc, phase: runtime, apiKey: {name: TOKEN}}"), ""},
      {"phase list", Credential("{service: svc, phase: [install, runtime], apiKey: {name: T}}"),
       ""},
      {"oauth only",
       Credential("{service: svc, phase: runtime, oauth: {tokenEndpoint: {host: a.x}}}"), ""},
      {"service missing", Credential("{phase: runtime, apiKey: {name: T}}"),
       "capabilities[0].config: credential service is required"},
      {"service invalid", Credential("{service: GitHub, phase: runtime, apiKey: {name: T}}"),
       "capabilities[0].config.service: invalid service name \"GitHub\""},
      {"service whole arg reference",
       absl::StrCat(kHeader,
                    "kind: mixin\nargs: {s: {default: svc}}\ncapabilities: [{type: "
                    "com.docker.sandbox/credential@1, config: {service: '${{ kit.args.s }}', "
                    "phase: runtime, apiKey: {name: T}}}]\n"),
       ""},
      {"phase missing", Credential("{service: svc, apiKey: {name: T}}"),
       "capabilities[0].config.phase: phase must be install or runtime, or a non-empty list"},
      {"phase unknown", Credential("{service: svc, phase: build, apiKey: {name: T}}"),
       "capabilities[0].config.phase: phase must be install or runtime"},
      {"phase empty list", Credential("{service: svc, phase: [], apiKey: {name: T}}"),
       "config.phase: phase must be install or runtime"},
      {"phase twice", Credential("{service: svc, phase: [runtime, runtime], apiKey: {name: T}}"),
       "config.phase[1]: phase \"runtime\" listed twice"},
      {"neither apiKey nor oauth", Credential("{service: svc, phase: runtime}"),
       "capabilities[0].config: declare apiKey or oauth"},
      {"apiKey empty", Credential("{service: svc, phase: runtime, apiKey: {proxyManaged: true}}"),
       "capabilities[0].config.apiKey: apiKey needs a name, inject rules, or both"},
      {"apiKey bad name", Credential("{service: svc, phase: runtime, apiKey: {name: 'A-B'}}"),
       "config.apiKey.name: env \"A-B\" is not a valid env var name"},
      {"inject without domain",
       Credential("{service: svc, phase: runtime, apiKey: {inject: [{header: X}]}}", kAllowApi),
       "config.apiKey.inject[0].domain: domain is required"},
      {"inject unknown field",
       Credential(
           "{service: svc, phase: runtime, apiKey: {inject: [{domain: api.x.com, prefix: B}]}}",
           kAllowApi),
       "config.apiKey.inject[0].prefix: unknown field"},
      {"null field",
       Credential("{service: svc, phase: runtime, apiKey: {name: T, proxyManaged: null}}"),
       "config.apiKey.proxyManaged: is null; omit the field or declare a value"},
      {"token endpoint without host",
       Credential("{service: svc, phase: runtime, oauth: {tokenEndpoint: {path: /t}}}"),
       "config.oauth.tokenEndpoint.host: tokenEndpoint host is required"},
      {"credential file format empty",
       Credential(
           "{service: svc, phase: runtime, oauth: {credentialFile: {path: ~/c, format: ''}}}"),
       "config.oauth.credentialFile.format: format must be json or toml, got \"\""},
      {"credential file toml null",
       Credential(
           "{service: svc, phase: runtime, oauth: {credentialFile: {path: ~/c, format: toml, "
           "structure: {a: null}}}}"),
       "config.oauth.credentialFile.structure.a: is null, which TOML cannot spell"},
      {"credential file json null",
       Credential("{service: svc, phase: runtime, oauth: {credentialFile: {path: ~/c, "
                  "structure: {a: null, t: '{{.AccessToken}}'}}}}"),
       ""},
      {"unknown placeholder",
       Credential("{service: svc, phase: runtime, oauth: {credentialFile: {path: ~/c, "
                  "structure: {t: '{{.Token}}'}}}}"),
       "config.oauth.credentialFile.structure.t: unknown placeholder {{.Token}}"},
      {"same service and phase twice",
       Mixin("{type: com.docker.sandbox/credential@1, config: {service: s, phase: runtime, apiKey: "
             "{name: A}}}, {type: com.docker.sandbox/credential@1, config: {service: s, phase: "
             "[install, runtime], apiKey: {name: B}}}"),
       "capabilities[1].config: credential for service \"s\" phase \"runtime\" already declared at "
       "capabilities[0]"},
      {"same service other phase",
       Mixin("{type: com.docker.sandbox/credential@1, config: {service: s, phase: runtime, apiKey: "
             "{name: A}}}, {type: com.docker.sandbox/credential@1, config: {service: s, phase: "
             "install, apiKey: {name: B}}}"),
       ""},
  });
}

TEST(CredentialTest, InjectDomainsMustBeAllowedInTheirPhase) {
  auto inject = [](const std::string& phase, const std::string& domain) {
    return "{service: svc, phase: " + phase + ", apiKey: {inject: [{domain: '" + domain + "'}]}}";
  };
  ExpectCases({
      {"allowed", Credential(inject("runtime", "api.x.com"), kAllowApi), ""},
      {"port ignored", Credential(inject("runtime", "api.x.com:443"), kAllowApi), ""},
      {"install phase", Credential(inject("install", "pkg.x.com"), kAllowApi), ""},
      {"wrong phase", Credential(inject("install", "api.x.com"), kAllowApi),
       "capabilities[1].config.apiKey.inject[0].domain: inject domain \"api.x.com\" is not in the "
       "network policy's install allow list"},
      {"not allowed", Credential(inject("runtime", "evil.x.com"), kAllowApi),
       "inject domain \"evil.x.com\" is not in the network policy's runtime allow list"},
      {"no network policy", Credential(inject("runtime", "api.x.com")),
       "capabilities[0].config.apiKey.inject[0].domain: inject domain \"api.x.com\" is not in"},
      {"globs are not expanded",
       Credential(
           inject("runtime", "api.x.com"),
           "{type: com.docker.sandbox/network-policy@1, config: {runtime: {allow: ['*.x.com']}}}"),
       "is not in the network policy's runtime allow list"},
      {"bare ** covers all",
       Credential(
           inject("runtime", "api.x.com"),
           "{type: com.docker.sandbox/network-policy@1, config: {runtime: {allow: ['**']}}}"),
       ""},
      {"bounded @2 host counts",
       Credential(inject("runtime", "api.x.com"),
                  "{type: com.docker.sandbox/network-policy@2, config: {runtime: {allow: "
                  "[{hosts: [api.x.com], methods: [GET]}]}}}"),
       ""},
      {"deferred while groups remain",
       Mixin("{type: com.docker.sandbox/credential@1, config: " + inject("runtime", "evil.x.com") +
             "}, {group: {capabilities: [{type: com.example/x@1}]}}"),
       ""},
  });
  // Declarations only once published: judged again in the effective form.
  ExpectCases({{"deferred when published", Credential(inject("runtime", "evil.x.com")), ""}},
              Form::kPublished);
}

std::string Lifecycle(const std::string& config) {
  return Mixin("{type: com.docker.sandbox/lifecycle@1, config: " + config + "}");
}

TEST(LifecycleTest, Rules) {
  ExpectCases({
      {"hooks and files",
       Lifecycle("{install: [{command: 'echo hi', user: '0', env: [HOME], description: d}], "
                 "startup: [{command: [sh, -c, x], background: true}], files: [{path: /etc/x, "
                 "content: y, mode: '0644', overwrite: false}]}"),
       ""},
      {"explicit empty interactive tail", Lifecycle("{interactive: []}"), ""},
      {"nothing declared", Lifecycle("{}"),
       "capabilities[0].config: lifecycle declares no hooks, no files, and no interactive tail"},
      {"no config", Mixin("{type: com.docker.sandbox/lifecycle@1}"), "lifecycle declares no hooks"},
      {"command missing", Lifecycle("{install: [{user: '0'}]}"),
       "capabilities[0].config.install[0].command: command is required"},
      {"command empty list", Lifecycle("{startup: [{command: []}]}"),
       "config.startup[0].command: command is required"},
      {"bad env name", Lifecycle("{install: [{command: x, env: [A-B]}]}"),
       "config.install[0].env[0]: env entry \"A-B\" is not a valid env var name"},
      {"background on install", Lifecycle("{install: [{command: x, background: true}]}"),
       "config.install[0].background: unknown field"},
      {"relative file path", Lifecycle("{files: [{path: etc/x, content: y}]}"),
       "config.files[0].path: path \"etc/x\" must be absolute"},
      {"file content missing", Lifecycle("{files: [{path: /etc/x}]}"),
       "config.files[0].content: content is required"},
      {"bad mode", Lifecycle("{files: [{path: /etc/x, content: y, mode: '0999'}]}"),
       "config.files[0].mode: invalid octal mode \"0999\""},
      {"newSession disagrees",
       Kit("workload",
           "{type: com.docker.sandbox/lifecycle@1, config: {interactive: [--tui]}}, "
           "{type: com.docker.sandbox/agent-interactive-sessions@1, config: {newSession: "
           "[--new]}}"),
       "capabilities[1].config.newSession: newSession [\"--new\"] disagrees with lifecycle "
       "interactive [\"--tui\"]; they name the same launch"},
      {"newSession agrees",
       Kit("workload",
           "{type: com.docker.sandbox/lifecycle@1, config: {interactive: [--tui]}}, "
           "{type: com.docker.sandbox/agent-interactive-sessions@1, config: {newSession: "
           "[--tui]}}"),
       ""},
      {"session lists disagree",
       Kit("workload",
           "{type: com.docker.sandbox/agent-sessions@1, config: {list: [a, ls]}}, "
           "{type: com.docker.sandbox/agent-interactive-sessions@1, config: {list: [a, list]}}"),
       "capabilities[1].config.list: list disagrees with the agent-sessions list at "
       "capabilities[0]"},
  });
  absl::StatusOr<Descriptor> d = ParseDescriptor(Lifecycle("{install: [{command: 'echo hi'}]}"));
  ASSERT_TRUE(d.ok()) << d.status();
  const LifecycleConfig* lc = std::get<CapabilityEntry>(d->capabilities[0]).As<LifecycleConfig>();
  ASSERT_NE(lc, nullptr);
  EXPECT_EQ(lc->install[0].command, (std::vector<std::string>{"sh", "-c", "echo hi"}));
}

std::string Agent(const std::string& config) {
  return Kit("workload", "{type: dev.airlock/agent@1, config: " + config + "}");
}

TEST(AirlockAgentTest, Rules) {
  const std::string agent = "{type: dev.airlock/agent@1, config: {command: [agent]}}";
  ExpectCases({
      {"command and image", Agent("{command: [claude, --yolo], image: agent}"), ""},
      {"command only", Agent("{command: [claude]}"), ""},
      {"empty image reads as omitted", Agent("{command: [claude], image: ''}"), ""},
      {"command missing", Agent("{image: agent}"),
       "capabilities[0].config.command: command is required"},
      {"no config", Kit("workload", "{type: dev.airlock/agent@1}"),
       "capabilities[0].config.command: command is required"},
      {"command empty", Agent("{command: []}"),
       "capabilities[0].config.command: command must not be empty: it is the agent's argv"},
      {"empty argument", Agent("{command: [claude, '']}"),
       "capabilities[0].config.command[1]: command arguments must not be empty"},
      {"command a string", Agent("{command: claude}"),
       "capabilities[0].config.command: must be a list, got a string"},
      {"command null", Agent("{command: null}"), "capabilities[0].config.command: is null"},
      {"nested argument", Agent("{command: [[claude]]}"),
       "capabilities[0].config.command[0]: must be a string, got a list"},
      {"image a list", Agent("{command: [claude], image: [a]}"),
       "capabilities[0].config.image: must be a string, got a list"},
      {"unknown field", Agent("{command: [claude], env: [A]}"),
       "capabilities[0].config.env: unknown field"},
      {"on a mixin", Mixin(agent),
       "capabilities[0].type: dev.airlock/agent@1 is workload-only; a mixin cannot declare it"},
      {"twice", Kit("workload", agent + ", {type: dev.airlock/agent@1, config: {command: [b]}}"),
       "capabilities[1]: dev.airlock/agent@1 already declared at capabilities[0]"},
      {"parameterized",
       absl::StrCat(kHeader, "kind: workload\nargs: {model: {default: m}}\ncapabilities: [",
                    "{type: dev.airlock/agent@1, config: {command: [agent, --model, ",
                    "'${{ kit.args.model }}'], image: '${{ kit.args.model }}'}}]\n"),
       ""},
      {"parameterized still strict",
       absl::StrCat(kHeader, "kind: workload\nargs: {model: {default: m}}\ncapabilities: [",
                    "{type: dev.airlock/agent@1, config: {command: ['${{ kit.args.model }}'], ",
                    "cwd: /}}]\n"),
       "capabilities[0].config.cwd: unknown field"},
  });
  absl::StatusOr<Descriptor> d =
      ParseDescriptor(Agent("{command: [claude, --yolo], image: agent}"));
  ASSERT_TRUE(d.ok()) << d.status();
  const auto& entry = std::get<CapabilityEntry>(d->capabilities[0]);
  const AgentConfig* a = entry.As<AgentConfig>();
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->command, (std::vector<std::string>{"claude", "--yolo"}));
  EXPECT_EQ(a->image, "agent");
  EXPECT_TRUE(IsWellKnownType(kAirlockAgent));
  EXPECT_TRUE(IsSingletonType(kAirlockAgent));
  const std::vector<std::string>& typed = TypedCapabilityTypes();
  EXPECT_NE(std::find(typed.begin(), typed.end(), kAirlockAgent), typed.end());

  // A reference keeps the entry untyped until the effective form.
  absl::StatusOr<Descriptor> p = ParseDescriptor(
      absl::StrCat(kHeader, "kind: workload\nargs: {m: {default: x}}\ncapabilities: [",
                   "{type: dev.airlock/agent@1, config: {command: ['${{ kit.args.m }}']}}]\n"));
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& parameterized = std::get<CapabilityEntry>(p->capabilities[0]);
  EXPECT_TRUE(parameterized.parameterized);
  EXPECT_EQ(parameterized.As<AgentConfig>(), nullptr);
}

TEST(VolumePortResourcesTest, Rules) {
  auto volume = [](const std::string& config) {
    return "{type: com.docker.sandbox/volume@1, config: " + config + "}";
  };
  auto port = [](const std::string& config) {
    return "{type: com.docker.sandbox/port@1, config: " + config + "}";
  };
  auto resources = [](const std::string& config) {
    return Kit("workload", "{type: com.docker.sandbox/resources@1, config: " + config + "}");
  };
  ExpectCases({
      {"volume", Mixin(volume("{path: /data, size: 2 GiB, tmpfs: true, mode: '0755'}")), ""},
      {"volume path missing", Mixin(volume("{size: 1g}")),
       "capabilities[0].config.path: volume path is required"},
      {"volume relative", Mixin(volume("{path: data}")),
       "capabilities[0].config.path: volume path \"data\" must be absolute"},
      {"volume bad size", Mixin(volume("{path: /d, size: two gigs}")),
       "capabilities[0].config.size: invalid size \"two gigs\""},
      {"volume bad mode", Mixin(volume("{path: /d, mode: '755x'}")), "invalid octal mode \"755x\""},
      {"volume tmpfs not bool", Mixin(volume("{path: /d, tmpfs: 'yes'}")),
       "config.tmpfs: must be true or false"},
      {"volume same cleaned path",
       Mixin(volume("{path: /a/b}") + ", " + volume("{path: '/a/./b/'}")),
       "capabilities[1].config.path: volume for \"/a/b\" already declared at capabilities[0]"},
      {"volume and host mount",
       Mixin(volume("{path: /cache}") +
             ", {type: com.docker.sandbox/host-mount@1, config: {path: /cache}}"),
       "capabilities[1].config.path: host mount \"/cache\" conflicts with volume at "
       "capabilities[0]"},
      {"port", Mixin(port("{name: web, container: 3000, transport: udp}")), ""},
      {"port missing", Mixin(port("{name: web}")),
       "capabilities[0].config.container: container port is required"},
      {"port zero", Mixin(port("{container: 0}")),
       "config.container: container port 0 out of range"},
      {"port too big", Mixin(port("{container: 70000}")), "container port 70000 out of range"},
      {"port text", Mixin(port("{container: '80'}")), "config.container: must be an integer"},
      {"port transport", Mixin(port("{container: 80, transport: sctp}")),
       "config.transport: transport must be tcp or udp, got \"sctp\""},
      {"port twice",
       Mixin(port("{container: 80}") + ", " + port("{container: 80, transport: tcp, name: x}")),
       "capabilities[1].config.container: port 80 already declared at capabilities[0]"},
      {"same port other transport",
       Mixin(port("{container: 80}") + ", " + port("{container: 80, transport: udp}")), ""},
      {"port from a whole arg reference",
       absl::StrCat(kHeader, "kind: mixin\nargs: {p: {default: '80'}}\ncapabilities: [",
                    port("{container: '${{ kit.args.p }}'}"), "]\n"),
       ""},
      {"resources", resources("{cpu: 2.5, memory: 8g, gpu: '1'}"), ""},
      {"resources negative cpu", resources("{cpu: -1}"), "config.cpu: cpu must be >= 0"},
      {"resources bad memory", resources("{memory: lots}"),
       "config.memory: invalid memory \"lots\""},
      {"resources unknown field", resources("{disk: 1g}"), "config.disk: unknown field"},
  });
  absl::StatusOr<Descriptor> d = ParseDescriptor(Mixin(port("{container: 3000}")));
  ASSERT_TRUE(d.ok()) << d.status();
  const PortConfig* p = std::get<CapabilityEntry>(d->capabilities[0]).As<PortConfig>();
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->Key(), "3000/tcp");
}

// An optional string with a grammar, stated empty, reads as omitted (the
// spec decodes "" as the zero value); a required one stays required, and
// credentialFile.format, whose schema enum excludes "", stays refused.
TEST(EmptyOptionalStringsTest, ReadAsOmitted) {
  auto top = [](const std::string& fields) {
    return absl::StrCat(kHeader, "kind: workload\n", fields);
  };
  const std::string set = absl::StrCat(kHeader, "kind: set\nkits: [{ref: r.io/a:1, digest: ''}]\n");
  ExpectCases({
      {"iconUrl", top("iconUrl: ''\n"), ""},
      {"version", top("version: ''\n"), ""},
      {"dockerfile", top("dockerfile: ''\n"), ""},
      {"empty build beside dockerfile", top("build: ''\ndockerfile: kit.dockerfile\n"), ""},
      {"arg env and buildArg",
       top("args: {a: {env: '', buildArg: A}, b: {env: B, buildArg: ''}}\n"), ""},
      {"kit digest", set, ""},
      {"volume size and mode",
       Mixin("{type: com.docker.sandbox/volume@1, config: {path: /d, size: '', mode: ''}}"), ""},
      {"file mode", Lifecycle("{files: [{path: /etc/x, content: y, mode: ''}]}"), ""},
      {"file mode beside a reference",
       absl::StrCat(kHeader, "kind: mixin\nargs: {v: {default: x}}\ncapabilities: [",
                    "{type: com.docker.sandbox/lifecycle@1, config: {files: [{path: /etc/x, ",
                    "content: '${{ kit.args.v }}', mode: ''}]}}]\n"),
       ""},
      {"resources memory",
       Kit("workload", "{type: com.docker.sandbox/resources@1, config: {memory: ''}}"), ""},
      {"required volume path stays required",
       Mixin("{type: com.docker.sandbox/volume@1, config: {path: ''}}"),
       "capabilities[0].config.path: volume path \"\" must be absolute"},
      {"a non-empty bad mode is still refused",
       Mixin("{type: com.docker.sandbox/volume@1, config: {path: /d, mode: ' '}}"),
       "capabilities[0].config.mode: invalid octal mode \" \""},
      {"credentialFile format",
       Credential(
           "{service: svc, phase: runtime, oauth: {credentialFile: {path: /c, format: ''}}}"),
       "config.oauth.credentialFile.format: format must be json or toml, got \"\""},
  });
  absl::StatusOr<Descriptor> d = ParseDescriptor(top("version: ''\nprovides: [x]\n"));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->version, "");
  // Empty is no pin: a published set entry still needs its digest.
  ExpectCases({{"published kit digest",
                absl::StrCat(kHeader, "kind: workload\nkits: [{ref: r.io/a:1, digest: ''}]\n"),
                "kits[0].digest: digest is required once published"}},
              Form::kPublished);
}

// A legacy agent-context profile (a filename with no directory) is the
// workload's: a mixin states a profile with its directory, or a body only.
TEST(AgentContextTest, LegacyProfileIsWorkloadOnly) {
  const std::string context = "{type: com.docker.sandbox/agent-context@1, config: ";
  const std::string refused =
      "agent-context filename without a directory is workload-only; a mixin states filename "
      "together with an explicit directory";
  ExpectCases({
      {"workload legacy profile", Kit("workload", context + "{filename: AGENTS.md, content: x}}"),
       ""},
      {"mixin explicit profile",
       Mixin(context + "{filename: AGENTS.md, directory: /home/agent/.x, content: x}}"), ""},
      {"mixin body only", Mixin(context + "{contentFile: ./ctx.md}}"), ""},
      {"mixin empty filename", Mixin(context + "{filename: '', content: x}}"), ""},
      {"mixin bare filename", Mixin(context + "{filename: AGENTS.md, content: x}}"),
       "capabilities[0].config.filename: " + refused},
      {"mixin bare filename from an arg",
       absl::StrCat(kHeader, "kind: mixin\nargs: {f: {default: A.md}}\ncapabilities: [", context,
                    "{filename: '${{ kit.args.f }}'}}]\n"),
       "capabilities[0].config.filename: " + refused},
      {"mixin group member",
       Mixin("{group: {optional: true, capabilities: [" + context + "{filename: AGENTS.md}}]}}"),
       "capabilities[0].group.capabilities[0].config.filename: " + refused},
  });
  // The same rule holds once published.
  ExpectCases({{"published mixin", Mixin(context + "{filename: AGENTS.md}}"),
                "capabilities[0].config.filename: " + refused}},
              Form::kPublished);
  absl::StatusOr<Descriptor> fixture = ParseDescriptor(ReadTestdata("notes-mixin.yaml"));
  ASSERT_FALSE(fixture.ok());
  EXPECT_NE(fixture.status().message().find("capabilities[1].config.filename: " + refused),
            absl::string_view::npos)
      << fixture.status();
}

}  // namespace
}  // namespace airlock::kit
