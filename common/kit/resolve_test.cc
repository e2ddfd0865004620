#include "common/kit/resolve.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "common/kit/internal/testdata.h"
#include "common/kit/oci.h"

namespace airlock::kit {
namespace {

namespace fs = std::filesystem;
using internal::ReadTestdata;
using internal::TestdataPath;
using Lines = std::vector<std::string>;

// quill.yaml reads ${{ kit.env.WORKSPACE_DIR }}; the image would set it.
const std::map<std::string, std::string> kEnv = {{"WORKSPACE_DIR", "/workspace"}};

constexpr char kAgentContext[] = "com.docker.sandbox/agent-context@1";
constexpr char kForgeDeny[] = "DELETE api.codeforge.example/repos/**";
// forge.yaml's deny entry, as written there.
constexpr char kForgeDenyYaml[] =
    "        deny:\n"
    "          - hosts: [api.codeforge.example]\n"
    "            methods: [DELETE]\n"
    "            paths: [/repos/**]\n";

bool Has(const Lines& lines, const std::string& want) {
  return std::find(lines.begin(), lines.end(), want) != lines.end();
}

void WriteFile(const fs::path& path, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  out << data;
}

// Scratch is a fresh directory under the test's TEST_TMPDIR for modified
// copies of the fixtures.
class Scratch {
 public:
  explicit Scratch(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    path_ = fs::path(tmp ? tmp : "/tmp") / ("resolve_test_" + name);
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  // File writes `data` as `name` and returns its path.
  std::string File(const std::string& name, const std::string& data) const {
    WriteFile(path_ / name, data);
    return (path_ / name).string();
  }
  // Layout writes an OCI image layout `name` whose one manifest carries
  // `descriptor_json` as the descriptor annotation, and returns its path.
  std::string Layout(const std::string& name, const std::string& descriptor_json) const {
    using Json = nlohmann::json;
    fs::path dir = path_ / name;
    fs::create_directories(dir / "blobs" / "sha256");
    WriteFile(dir / "oci-layout", R"({"imageLayoutVersion":"1.0.0"})");
    auto blob = [&](const std::string& media_type, const std::string& data) {
      std::string digest = Sha256Digest(data);
      WriteFile(dir / "blobs" / "sha256" / digest.substr(7), data);
      return Json{{"mediaType", media_type}, {"digest", digest}, {"size", data.size()}};
    };
    Json manifest = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.manifest.v1+json"},
        {"config", blob("application/vnd.oci.image.config.v1+json", R"({"os":"linux"})")},
        {"layers", Json::array()},
        {"annotations",
         {{std::string(kDescriptorAnnotation), descriptor_json},
          {std::string(kSchemaVersionAnnotation), "3"}}}};
    Json index = {
        {"schemaVersion", 2},
        {"mediaType", "application/vnd.oci.image.index.v1+json"},
        {"manifests",
         Json::array({blob("application/vnd.oci.image.manifest.v1+json", manifest.dump())})}};
    WriteFile(dir / "index.json", index.dump());
    return dir.string();
  }

 private:
  fs::path path_;
};

void ExpectError(const absl::Status& s, const std::string& want) {
  ASSERT_FALSE(s.ok()) << "resolved, but want: " << want;
  EXPECT_NE(s.message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << s.message();
}

// ---- Composition ----

TEST(ResolveKitsTest, WorkloadPlusMixinComposesWorkloadFirst) {
  // Given mixin first: the order still puts the workload first.
  auto r = ResolveKits({TestdataPath("forge.yaml"), TestdataPath("quill.yaml")}, {}, kEnv);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->composition.order, (Lines{TestdataPath("quill.yaml"), TestdataPath("forge.yaml")}));
  EXPECT_EQ(r->composition.merged.kind, KitKind::kWorkload);
  EXPECT_EQ(r->composition.merged.display_name, "Quill coding agent");
  EXPECT_TRUE(Has(r->surface.runtime.http_deny, kForgeDeny))
      << ::testing::PrintToString(r->surface.runtime.http_deny);
  EXPECT_TRUE(Has(r->surface.runtime.allow_hosts, "api.quill.dev:443"));
  EXPECT_TRUE(r->surface.credentials_runtime.count("codeforge"));
  EXPECT_EQ(r->env_exports.count("QUILL_MODEL"), 1u);
}

TEST(ResolveKitsTest, TwoProvidersOfOneNameDoNotCompose) {
  auto r = ResolveKits({TestdataPath("quill.yaml"), TestdataPath("quill-mixin.yaml")}, {}, kEnv);
  ExpectError(r.status(), "quill");
}

// ---- Args ----

TEST(ResolveKitsTest, AnArgNoKitDeclaresIsRefusedByName) {
  auto ok = ResolveKits({TestdataPath("quill.yaml"), TestdataPath("forge.yaml")},
                        {{"model", "swift-2"}}, kEnv);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->env_exports.at("QUILL_MODEL"), "swift-2");

  auto typo = ResolveKits({TestdataPath("quill.yaml"), TestdataPath("forge.yaml")},
                          {{"modle", "swift-2"}}, kEnv);
  ExpectError(typo.status(), "modle");
  ExpectError(typo.status(), "no kit declares");
}

TEST(ResolveKitsTest, AnArgChangesTheKitThatDeclaresIt) {
  auto defaults = ResolveKits({TestdataPath("quill.yaml")}, {}, kEnv);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->surface.ports, Lines{"7070/tcp"});
  EXPECT_EQ(defaults->args.at(TestdataPath("quill.yaml")).at("apiPort"), "7070");

  auto port = ResolveKits({TestdataPath("quill.yaml"), TestdataPath("forge.yaml")},
                          {{"apiPort", "8181"}}, kEnv);
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(port->surface.ports, Lines{"8181/tcp"});
  EXPECT_EQ(port->args.at(TestdataPath("quill.yaml")).at("apiPort"), "8181");
  EXPECT_EQ(port->args.at(TestdataPath("forge.yaml")).count("apiPort"), 0u)
      << "an arg goes only to the kits that declare it";

  // A value outside the declared pattern is refused naming the arg.
  auto bad = ResolveKits({TestdataPath("quill.yaml")}, {{"apiPort", "http"}}, kEnv);
  ExpectError(bad.status(), "apiPort");
  ExpectError(bad.status(), TestdataPath("quill.yaml"));
}

TEST(ResolveKitsTest, BuildArgsExpandForFilesButNotForOciLayouts) {
  // A descriptor file is expanded here: the build arg reaches `provides`.
  auto file = ResolveKits({TestdataPath("quill.yaml")}, {{"version", "3.0.1"}}, kEnv);
  ASSERT_TRUE(file.ok()) << file.status();
  Lines provides;
  for (const Provide& p : file->composition.merged.provides) provides.push_back(p.text);
  EXPECT_TRUE(Has(provides, "quill@3.0.1")) << ::testing::PrintToString(provides);

  // A published layout declaring the same build arg has it fixed.
  Scratch dir("build_arg");
  std::string layout =
      dir.Layout("tool-oci", R"({"args":{"version":{"buildArg":"TOOL_VERSION","default":"1.0.0"}},)"
                             R"("capabilities":[{"config":{"runtime":{"allow":["tool.example"]}},)"
                             R"("type":"com.docker.sandbox/network-policy@1"}],"kind":"mixin",)"
                             R"("provides":["tool@1.0.0"],"schemaVersion":"3"})");
  auto published = ResolveKits({TestdataPath("shell.yaml"), layout}, {}, kEnv);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(Has(published->surface.runtime.allow_hosts, "tool.example"));

  auto fixed = ResolveKits({TestdataPath("shell.yaml"), layout}, {{"version", "2.0.0"}}, kEnv);
  ExpectError(fixed.status(), layout + ": arg \"version\" is a build arg");

  // The checked-in forge layout resolves (it declares no args at all).
  auto forge = ResolveKits({TestdataPath("shell.yaml"), TestdataPath("forge-oci")}, {}, kEnv);
  ASSERT_TRUE(forge.ok()) << forge.status();
  EXPECT_TRUE(Has(forge->surface.runtime.http_deny, kForgeDeny));
}

// ---- References ----

TEST(ResolveKitsTest, AMissingRefIsNamed) {
  Scratch dir("missing");
  std::string missing = (fs::path(dir.File("x", "")).parent_path() / "no-such-kit.yaml").string();
  auto r = ResolveKits({TestdataPath("shell.yaml"), missing}, {}, kEnv);
  ExpectError(r.status(), missing);

  auto present = ResolveKits({TestdataPath("shell.yaml")}, {}, kEnv);
  EXPECT_TRUE(present.ok()) << present.status();

  EXPECT_FALSE(ResolveKits({}, {}, kEnv).ok());
}

// ---- Enforcement and selection ----

TEST(ResolveKitsTest, NotEnforcedListsOnlyRecordedTypes) {
  auto r = ResolveKits({TestdataPath("quill.yaml"), TestdataPath("forge.yaml")}, {}, kEnv);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(Has(r->not_enforced, kAgentContext)) << ::testing::PrintToString(r->not_enforced);
  EXPECT_FALSE(Has(r->not_enforced, std::string(kNetworkPolicyV1)));
  EXPECT_FALSE(Has(r->not_enforced, std::string(kNetworkPolicyV2)));
  EXPECT_FALSE(Has(r->not_enforced, std::string(kCredential)));
  EXPECT_TRUE(std::is_sorted(r->not_enforced.begin(), r->not_enforced.end()));

  // A workload asking only for enforced types has nothing to report.
  Scratch dir("enforced");
  std::string plain = dir.File("plain.yaml",
                               "schemaVersion: \"3\"\nkind: workload\nversion: '1.0'\n"
                               "provides: [plain]\ncapabilities:\n"
                               "  - type: com.docker.sandbox/network-policy@1\n"
                               "    config: {runtime: {allow: [a.example]}}\n");
  auto enforced = ResolveKits({plain}, {}, kEnv);
  ASSERT_TRUE(enforced.ok()) << enforced.status();
  EXPECT_EQ(enforced->not_enforced, Lines{});
  EXPECT_TRUE(IsEnforcedType(std::string(kNetworkPolicyV2)));
  EXPECT_FALSE(IsEnforcedType(kAgentContext));

  // Airlock's own agent type is accepted and enforced.
  std::string agent = dir.File("agent.yaml",
                               "schemaVersion: \"3\"\nkind: workload\ncapabilities:\n"
                               "  - type: dev.airlock/agent@1\n"
                               "    config: {command: [agent]}\n");
  auto with_agent = ResolveKits({agent}, {}, kEnv);
  ASSERT_TRUE(with_agent.ok()) << with_agent.status();
  EXPECT_EQ(with_agent->not_enforced, Lines{});
  EXPECT_TRUE(with_agent->skipped.empty());
  EXPECT_TRUE(AcceptedTypes().count(std::string(kAirlockAgent)));
  EXPECT_TRUE(IsEnforcedType(std::string(kAirlockAgent)));
}

TEST(ResolveKitsTest, UnknownCapabilityTypesRefuseWhenRequiredAndSkipWhenOptional) {
  std::string shell = ReadTestdata("shell.yaml");
  Scratch dir("unknown_type");
  std::string required =
      dir.File("required.yaml", shell + "  - type: com.example/thing@1\n    config: {size: 3}\n");
  std::string optional = dir.File(
      "optional.yaml", shell +
                           "  - type: com.example/thing@1\n    optional: true\n    name: Thing\n"
                           "    config: {size: 3}\n");

  auto refused = ResolveKits({required}, {}, kEnv);
  ExpectError(refused.status(), "\"com.example/thing@1\"");
  ExpectError(refused.status(), required + ": ");

  auto skipped = ResolveKits({optional}, {}, kEnv);
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  ASSERT_EQ(skipped->skipped.size(), 1u);
  EXPECT_EQ(skipped->skipped[0].ref, optional);
  EXPECT_EQ(skipped->skipped[0].skipped.path, "capabilities[4]");
  EXPECT_EQ(skipped->skipped[0].skipped.name, "Thing");
  EXPECT_NE(skipped->skipped[0].skipped.reason.find("com.example/thing@1"), std::string::npos);
  EXPECT_EQ(skipped->surface.services, Lines{}) << "a skipped entry grants nothing";

  // The unmodified shell skips nothing.
  auto plain = ResolveKits({TestdataPath("shell.yaml")}, {}, kEnv);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_TRUE(plain->skipped.empty());
}

// ---- Diff ----

TEST(DiffKitsTest, RemovingTheDenyWidensOnceAndRestoringItOnlyNarrows) {
  std::string forge = ReadTestdata("forge.yaml");
  ASSERT_NE(forge.find(kForgeDenyYaml), std::string::npos) << "forge.yaml changed shape";
  Scratch dir("diff");
  std::string open =
      dir.File("forge-nodeny.yaml", absl::StrReplaceAll(forge, {{kForgeDenyYaml, ""}}));
  std::string shell = TestdataPath("shell.yaml");
  std::string guarded = TestdataPath("forge.yaml");

  auto widened = DiffKits({shell, guarded}, {shell, open}, {});
  ASSERT_TRUE(widened.ok()) << widened.status();
  ASSERT_EQ(widened->widenings.size(), 1u) << ::testing::PrintToString(widened->widenings);
  EXPECT_NE(widened->widenings[0].find(kForgeDeny), std::string::npos) << widened->widenings[0];
  EXPECT_TRUE(widened->widens());

  auto narrowed = DiffKits({shell, open}, {shell, guarded}, {});
  ASSERT_TRUE(narrowed.ok()) << narrowed.status();
  EXPECT_TRUE(narrowed->widenings.empty()) << ::testing::PrintToString(narrowed->widenings);
  EXPECT_FALSE(narrowed->narrowings.empty());

  auto same = DiffKits({shell, guarded}, {shell, guarded}, {});
  ASSERT_TRUE(same.ok()) << same.status();
  EXPECT_TRUE(same->widenings.empty());
  EXPECT_TRUE(same->narrowings.empty());
}

TEST(DiffKitsTest, AnArgTheNewVersionAddsAppliesToItAlone) {
  // DiffKits takes no container environment: drop quill's kit.env use.
  std::string quill = absl::StrReplaceAll(ReadTestdata("quill.yaml"),
                                          {{"${{ kit.env.WORKSPACE_DIR }}", "/workspace"}});
  constexpr char kPortArg[] = "  apiPort:\n    default: \"7070\"\n    pattern: '[0-9]{2,5}'\n";
  ASSERT_NE(quill.find(kPortArg), std::string::npos) << "quill.yaml changed shape";
  Scratch dir("diff_args");
  // The old version had the port fixed; the new one makes it an arg.
  std::string old_quill = dir.File(
      "quill-old.yaml",
      absl::StrReplaceAll(quill, {{kPortArg, ""}, {"\"${{ kit.args.apiPort }}\"", "7070"}}));
  std::string new_quill = dir.File("quill-new.yaml", quill);

  auto moved = DiffKits({old_quill}, {new_quill}, {{"apiPort", "9090"}});
  ASSERT_TRUE(moved.ok()) << moved.status();
  EXPECT_EQ(moved->widenings.size(), 1u) << ::testing::PrintToString(moved->widenings);
  ASSERT_FALSE(moved->widenings.empty());
  EXPECT_NE(moved->widenings[0].find("9090/tcp"), std::string::npos) << moved->widenings[0];

  // An arg only the old side declares is fine too: fixing the port at the
  // value the arg had changes nothing.
  auto fixed = DiffKits({new_quill}, {old_quill}, {{"apiPort", "7070"}});
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_TRUE(fixed->widenings.empty()) << ::testing::PrintToString(fixed->widenings);
  EXPECT_TRUE(fixed->narrowings.empty()) << ::testing::PrintToString(fixed->narrowings);

  // One neither side declares is a typo, refused by name.
  auto typo = DiffKits({old_quill}, {new_quill}, {{"apiPrt", "9090"}});
  ExpectError(typo.status(), "apiPrt");

  // A mixin diffs on its own.
  auto mixin = DiffKits({TestdataPath("forge.yaml")}, {TestdataPath("forge.yaml")}, {});
  ASSERT_TRUE(mixin.ok()) << mixin.status();
  EXPECT_FALSE(mixin->widens());

  std::string missing = (fs::path(old_quill).parent_path() / "missing.yaml").string();
  auto gone = DiffKits({old_quill}, {missing}, {});
  ExpectError(gone.status(), missing);
}

}  // namespace
}  // namespace airlock::kit
