#include "common/kit/validate.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/kit/internal/testdata.h"
#include "common/kit/resolve.h"
#include "gtest/gtest.h"

namespace airlock::kit {
namespace {

using internal::TestdataPath;
using Lines = std::vector<std::string>;

// quill.yaml reads ${{ kit.env.WORKSPACE_DIR }}; the image would set it.
const std::map<std::string, std::string> kQuillEnv = {{"WORKSPACE_DIR", "/workspace"}};
// What relay.yaml needs to resolve: both required args and RELAY_HOME.
const ArgValues kRelayArgs = {{"token", "t0k"}, {"channel", "main"}};
const std::map<std::string, std::string> kRelayEnv = {{"RELAY_HOME", "/etc/relay"}};

void ExpectError(const absl::Status& s, const std::string& want) {
  ASSERT_FALSE(s.ok()) << "succeeded, but want: " << want;
  EXPECT_NE(s.message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << s.message();
}

// Typed returns the config of the first entry of `type` (composition
// reorders entries), or null.
template <typename T>
const T* Typed(const Descriptor& d, absl::string_view type) {
  for (const CapabilityItem& item : d.capabilities) {
    const auto* e = std::get_if<CapabilityEntry>(&item);
    if (e != nullptr && e->type == type) return e->As<T>();
  }
  return nullptr;
}

bool HasSubstring(const Lines& lines, const std::string& want) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& l) { return l.find(want) != std::string::npos; });
}

// ---- Authoring rules only ----

TEST(ValidateKitsTest, RequiredArgsNeedNoValues) {
  const std::string relay = TestdataPath("relay.yaml");
  auto v = ValidateKits({relay}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  ASSERT_EQ(v->kits.size(), 1u);
  EXPECT_EQ(v->kits[0].descriptor.kind, KitKind::kWorkload);
  EXPECT_EQ(v->kits[0].descriptor.form, Form::kAuthored);
  EXPECT_TRUE(v->order.empty());

  // Resolution still asks for them: the build-phase one first.
  ExpectError(ResolveKits({relay}, {}, kRelayEnv).status(),
              "kit arg \"channel\" is required and no value was supplied");
  ExpectError(ResolveKits({relay}, {{"channel", "main"}}, kRelayEnv).status(),
              "kit arg \"token\" is required and no value was supplied");
  EXPECT_TRUE(ResolveKits({relay}, kRelayArgs, kRelayEnv).ok());
}

TEST(ValidateKitsTest, AContainerVariableInAFilePathNeedsNoValue) {
  const std::string relay = TestdataPath("relay.yaml");
  EXPECT_TRUE(ValidateKits({relay}, kRelayArgs).ok());

  // Resolution expands it, naming the field that needs it.
  ExpectError(ResolveKits({relay}, kRelayArgs).status(),
              "capabilities[3].config.files[0].path: final container environment has no "
              "variable \"RELAY_HOME\"");
  auto r = ResolveKits({relay}, kRelayArgs, kRelayEnv);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto* lifecycle = Typed<LifecycleConfig>(r->composition.merged, kLifecycle);
  ASSERT_NE(lifecycle, nullptr);
  EXPECT_EQ(lifecycle->files[0].path, "/etc/relay/relay.toml");
  EXPECT_EQ(lifecycle->files[0].mode, "");
}

TEST(ValidateKitsTest, AnUnknownRequiredTypeIsAcceptedAndRefusedAtResolution) {
  const std::string probe = TestdataPath("probe.yaml");
  auto v = ValidateKits({probe}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  // Said, with what creating a sandbox would do.
  EXPECT_TRUE(HasSubstring(v->warnings, probe + ": capabilities[0]: this host does not provide "
                                                "com.example/probe-sensor@1; creating a sandbox "
                                                "refuses the kit"))
      << ::testing::PrintToString(v->warnings);
  EXPECT_TRUE(HasSubstring(v->warnings, probe + ": capabilities[1]: this host does not provide "
                                                "com.example/probe-cache@1; a sandbox skips"))
      << ::testing::PrintToString(v->warnings);

  // Spec §7.3: resolution refuses the kit by the type's name.
  ExpectError(ResolveKits({probe}, {}).status(),
              probe +
                  ": capability selection: capabilities[0]: kit requires capability type "
                  "\"com.example/probe-sensor@1\", which this host does not provide");
}

TEST(ValidateKitsTest, ASetValidates) {
  const std::string set = TestdataPath("team-set.yaml");
  auto v = ValidateKits({set}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->kits[0].descriptor.kind, KitKind::kSet);
  // Using one needs the merge publishing does.
  ExpectError(ResolveKits({set}, {}).status(), "set merging is not implemented");
}

TEST(ValidateKitsTest, EmptyOptionalStringsAreAccepted) {
  // relay.yaml states mode, size, memory and iconUrl empty; they stay
  // valid in the effective form too.
  EXPECT_TRUE(ValidateKits({TestdataPath("relay.yaml")}, {}).ok());
  auto r = ResolveKits({TestdataPath("relay.yaml")}, kRelayArgs, kRelayEnv);
  ASSERT_TRUE(r.ok()) << r.status();
  const auto* volume = Typed<VolumeConfig>(r->composition.merged, kVolume);
  ASSERT_NE(volume, nullptr);
  EXPECT_EQ(volume->mode, "");
  const auto* resources = Typed<ResourcesConfig>(r->composition.merged, kResources);
  ASSERT_NE(resources, nullptr);
  EXPECT_EQ(resources->memory, "");
  EXPECT_EQ(r->surface.storage_paths, Lines{"/var/lib/relay"});
}

TEST(ValidateKitsTest, AMixinClaimingTheLegacyContextProfileIsRefused) {
  const std::string notes = TestdataPath("notes-mixin.yaml");
  auto v = ValidateKits({notes}, {});
  ExpectError(v.status(), notes + ": ");
  ExpectError(v.status(),
              "capabilities[1].config.filename: agent-context filename without a directory is "
              "workload-only");
  // Resolution refuses it the same way.
  ExpectError(ResolveKits({notes}, {}).status(), "capabilities[1].config.filename: ");
}

// ---- Supplied values ----

TEST(ValidateKitsTest, SuppliedArgsAreCheckedAgainstTheirDeclarations) {
  const std::string relay = TestdataPath("relay.yaml");
  EXPECT_TRUE(ValidateKits({relay}, {{"channel", "main"}}).ok());
  auto bad = ValidateKits({relay}, {{"channel", "Main!"}});
  ExpectError(bad.status(), relay +
                                ": kit args: kit arg \"channel\": value \"Main!\" does not "
                                "match pattern");
  ExpectError(ValidateKits({relay}, {{"tokne", "x"}}).status(), "no kit declares the arg tokne");
  ExpectError(ValidateKits({relay}, {{"token", "${{ kit.env.X }}"}}).status(),
              "kit arg \"token\": values must not contain Kit placeholders");

  // A published layout's build args are fixed.
  auto fixed = ValidateKits({TestdataPath("forge-oci")}, {});
  ASSERT_TRUE(fixed.ok()) << fixed.status();
  EXPECT_EQ(fixed->kits[0].descriptor.form, Form::kPublished);
  EXPECT_TRUE(fixed->kits[0].from_oci_layout);
}

TEST(ValidateKitsTest, ALoneMixinsRequiresAreLeftToAComposition) {
  auto v = ValidateKits({TestdataPath("quill-acp.yaml")}, {});
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_TRUE(HasSubstring(v->warnings, "requires quill >= 2.0, < 3, which only a composition"))
      << ::testing::PrintToString(v->warnings);
}

// ---- Several kits: the composition is resolved ----

TEST(ValidateKitsTest, SeveralKitsAreComposedAsASandboxWould) {
  auto both = ValidateKits({TestdataPath("forge.yaml"), TestdataPath("quill.yaml")}, {}, kQuillEnv);
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(both->order, (Lines{TestdataPath("quill.yaml"), TestdataPath("forge.yaml")}));
  ASSERT_EQ(both->kits.size(), 2u);
  EXPECT_EQ(both->kits[0].ref, TestdataPath("forge.yaml"));

  ExpectError(
      ValidateKits({TestdataPath("quill.yaml"), TestdataPath("quill-mixin.yaml")}, {}, kQuillEnv)
          .status(),
      "quill");
  // Composing resolves, so a composition needs the values creation gives.
  ExpectError(ValidateKits({TestdataPath("relay.yaml"), TestdataPath("forge.yaml")}, {}).status(),
              "is required and no value was supplied");
  EXPECT_TRUE(
      ValidateKits({TestdataPath("relay.yaml"), TestdataPath("forge.yaml")}, kRelayArgs, kRelayEnv)
          .ok());
  // Each kit's own rules are judged first, whatever the composition says.
  ExpectError(
      ValidateKits({TestdataPath("shell.yaml"), TestdataPath("notes-mixin.yaml")}, {}).status(),
      TestdataPath("notes-mixin.yaml") + ": ");
  EXPECT_FALSE(ValidateKits({}, {}).ok());
}

}  // namespace
}  // namespace airlock::kit
