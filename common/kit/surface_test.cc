#include "common/kit/surface.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"
#include "common/kit/descriptor.h"
#include "common/kit/internal/testdata.h"

namespace airlock::kit {
namespace {

using internal::ReadTestdata;
using Lines = std::vector<std::string>;

// MixinSurface parses a mixin holding the given flow-style capability
// items and projects it.
Surface MixinSurface(const std::string& capabilities) {
  std::string yaml =
      absl::StrCat("schemaVersion: \"3\"\nkind: mixin\ncapabilities: [", capabilities, "]\n");
  absl::StatusOr<Descriptor> d = ParseDescriptor(yaml);
  EXPECT_TRUE(d.ok()) << d.status() << "\n" << yaml;
  return d.ok() ? ProjectSurface(*d) : Surface();
}

// Runtime is a mixin whose only request is network-policy@2 with the given
// runtime rules (flow YAML, e.g. "allow: [a.example]").
Surface Runtime(const std::string& rules) {
  return MixinSurface(absl::StrCat(
      "{type: com.docker.sandbox/network-policy@2, config: {runtime: {", rules, "}}}"));
}

// GithubForge is the forge.yaml fixture moved onto github.com, so its deny
// reads "DELETE api.github.com/repos/**" as in the issue.
std::string GithubForge() {
  return absl::StrReplaceAll(ReadTestdata("forge.yaml"), {{"codeforge.example", "github.com"}});
}

Surface Parse(const std::string& yaml) {
  absl::StatusOr<Descriptor> d = ParseDescriptor(yaml);
  EXPECT_TRUE(d.ok()) << d.status() << "\n" << yaml;
  return d.ok() ? ProjectSurface(*d) : Surface();
}

// ---- Projection ----

TEST(ProjectSurfaceTest, ForgeFixture) {
  Surface s = Parse(ReadTestdata("forge.yaml"));
  EXPECT_EQ(s.runtime.allow_hosts, Lines{"codeforge.example"});
  EXPECT_EQ(s.runtime.http_allow, (Lines{
                                      "ANY codeforge.example/**",
                                      "DELETE api.codeforge.example/**",
                                      "GET api.codeforge.example/**",
                                      "HEAD api.codeforge.example/**",
                                      "PATCH api.codeforge.example/**",
                                      "POST api.codeforge.example/**",
                                      "POST uploads.codeforge.example/**",
                                      "PUT api.codeforge.example/**",
                                      "PUT uploads.codeforge.example/**",
                                  }));
  EXPECT_TRUE(s.runtime.deny_hosts.empty());
  EXPECT_EQ(s.runtime.http_deny, Lines{"DELETE api.codeforge.example/repos/**"});
  EXPECT_TRUE(s.install.allow_hosts.empty());
  EXPECT_TRUE(s.install.http_allow.empty());
  ASSERT_EQ(s.credentials_runtime.count("codeforge"), 1u);
  EXPECT_EQ(s.credentials_runtime.at("codeforge").env_name, "FORGE_TOKEN");
  EXPECT_EQ(s.credentials_runtime.at("codeforge").inject_domains,
            (Lines{"api.codeforge.example", "codeforge.example", "uploads.codeforge.example"}));
  EXPECT_TRUE(s.credentials_install.empty());
  // agent-context@1 grants nothing.
  EXPECT_TRUE(s.services.empty());
  EXPECT_FALSE(s.privileged);
}

TEST(ProjectSurfaceTest, BareDenyIsHostAndAtom) {
  Surface s = Runtime("allow: [a.example], deny: [t.example]");
  EXPECT_EQ(s.runtime.deny_hosts, Lines{"t.example"});
  EXPECT_EQ(s.runtime.http_deny, Lines{"ANY t.example/**"});
}

TEST(ProjectSurfaceTest, StoragePortsPrivilegedAndNothingTypes) {
  Surface s = MixinSurface(
      "{type: com.docker.sandbox/volume@1, config: {path: /data, size: 1g}},"
      "{type: com.docker.sandbox/port@1, config: {container: 8080}},"
      "{type: com.docker.sandbox/port@1, config: {container: 53, transport: udp}},"
      "{type: com.docker.sandbox/privileged@1},"
      "{type: com.docker.sandbox/resources@1, config: {cpu: 2}}");
  EXPECT_EQ(s.storage_paths, Lines{"/data"});
  EXPECT_EQ(s.ports, (Lines{"53/udp", "8080/tcp"}));
  EXPECT_TRUE(s.privileged);
  EXPECT_TRUE(s.services.empty());
}

TEST(ProjectSurfaceTest, OtherServicesKeyedByTypeAndConfigHash) {
  Surface a = MixinSurface(
      "{type: com.docker.sandbox/git-identity@1},"
      "{type: com.example/thing@1, config: {a: 1, b: x}}");
  ASSERT_EQ(a.services.size(), 2u);
  EXPECT_EQ(a.services[0], "com.docker.sandbox/git-identity@1");
  const std::string& thing = a.services[1];
  ASSERT_EQ(thing.size(), std::string("com.example/thing@1+").size() + 12) << thing;
  EXPECT_EQ(thing.substr(0, 20), "com.example/thing@1+");
  EXPECT_EQ(thing.find_first_not_of("0123456789abcdef", 20), std::string::npos) << thing;

  // Key order does not matter (canonical JSON); a value does.
  Surface same = MixinSurface("{type: com.example/thing@1, config: {b: x, a: 1}}");
  Surface other = MixinSurface("{type: com.example/thing@1, config: {a: 2, b: x}}");
  EXPECT_EQ(same.services, Lines{thing});
  EXPECT_NE(other.services, Lines{thing});
  // An empty config is the bare type.
  EXPECT_EQ(MixinSurface("{type: com.example/thing@1, config: {}}").services,
            Lines{"com.example/thing@1"});
}

// ---- The issue's scenario ----

TEST(DiffTest, DroppingTheRepoDeleteDenyIsExactlyThatWidening) {
  const std::string granted_yaml = GithubForge();
  std::string upgrade = absl::StrReplaceAll(granted_yaml, {{R"(        deny:
          - hosts: [api.github.com]
            methods: [DELETE]
            paths: [/repos/**]
)",
                                                            ""}});
  ASSERT_NE(upgrade, granted_yaml);
  Surface granted = Parse(granted_yaml);
  ASSERT_EQ(granted.runtime.http_deny, Lines{"DELETE api.github.com/repos/**"});
  SurfaceDiff d = Diff(granted, Parse(upgrade));
  EXPECT_EQ(d.widenings, Lines{"runtime: removed deny DELETE api.github.com/repos/**"});
  EXPECT_TRUE(d.narrowings.empty()) << d.narrowings[0];
}

TEST(DiffTest, RemovingAnAllowIsANarrowingOnly) {
  const std::string granted_yaml = GithubForge();
  std::string upgrade = absl::StrReplaceAll(
      granted_yaml,
      {{"          - {hosts: [uploads.github.com], methods: [POST, PUT]}\n", ""},
       {"          - {domain: uploads.github.com, header: Authorization, format: \"Bearer %s\"}\n",
        ""}});
  ASSERT_NE(upgrade, granted_yaml);
  SurfaceDiff d = Diff(Parse(granted_yaml), Parse(upgrade));
  EXPECT_FALSE(d.widens()) << d.widenings[0];
  EXPECT_EQ(d.narrowings, (Lines{
                              "runtime: removed allow POST uploads.github.com/**",
                              "runtime: removed allow PUT uploads.github.com/**",
                              "credential codeforge (runtime): removed inject domain "
                              "uploads.github.com",
                          }));
}

TEST(DiffTest, SameSurfaceIsNoChange) {
  Surface s = Parse(GithubForge());
  SurfaceDiff d = Diff(s, s);
  EXPECT_TRUE(d.widenings.empty());
  EXPECT_TRUE(d.narrowings.empty());
}

// ---- Allow containment ----

TEST(DiffTest, NewAllowHost) {
  SurfaceDiff d =
      Diff(Runtime("allow: [a.example]"), Runtime("allow: [a.example, api.example.com]"));
  EXPECT_EQ(d.widenings, Lines{"runtime: new allow api.example.com"});
  // A new host reports once, not again as its ANY atom.
  EXPECT_TRUE(d.narrowings.empty());
}

TEST(DiffTest, InstallPhaseIsSeparate) {
  Surface granted = MixinSurface(
      "{type: com.docker.sandbox/network-policy@1, config: {runtime: {allow: [npm.example]}}}");
  Surface proposed = MixinSurface(
      "{type: com.docker.sandbox/network-policy@1, config: {install: {allow: [npm.example]},"
      " runtime: {allow: [npm.example]}}}");
  EXPECT_EQ(Diff(granted, proposed).widenings, Lines{"install: new allow npm.example"});
}

TEST(DiffTest, AnyMethodCoversEveryMethod) {
  Surface granted = Runtime("allow: [{hosts: [h.example], methods: [ANY], paths: [/v1/**]}]");
  EXPECT_FALSE(
      Diff(granted, Runtime("allow: [{hosts: [h.example], methods: [DELETE], paths: [/v1/x]}]"))
          .widens());
  // Only ANY covers ANY.
  Surface get_only = Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [/v1/**]}]");
  EXPECT_EQ(
      Diff(get_only, Runtime("allow: [{hosts: [h.example], methods: [ANY], paths: [/v1/**]}]"))
          .widenings,
      Lines{"runtime: new allow ANY h.example/v1/**"});
  EXPECT_EQ(
      Diff(get_only, Runtime("allow: [{hosts: [h.example], methods: [POST], paths: [/v1/**]}]"))
          .widenings,
      Lines{"runtime: new allow POST h.example/v1/**"});
}

TEST(DiffTest, DoubleStarPathCoversNarrowerPaths) {
  Surface granted = Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [/x/**]}]");
  for (const char* path : {"/x/y", "/x/**/z", "/x/**", "/x", "/x/a/**"}) {
    Surface p = Runtime(
        absl::StrCat("allow: [{hosts: [h.example], methods: [GET], paths: [\"", path, "\"]}]"));
    EXPECT_FALSE(Diff(granted, p).widens()) << path;
  }
  for (const char* path : {"/xy", "/y/x", "/**"}) {
    Surface p = Runtime(
        absl::StrCat("allow: [{hosts: [h.example], methods: [GET], paths: [\"", path, "\"]}]"));
    EXPECT_EQ(Diff(granted, p).widenings,
              Lines{absl::StrCat("runtime: new allow GET h.example", path)})
        << path;
  }
  // Nothing subtler: a single star covers only itself.
  Surface star = Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [\"/x/*\"]}]");
  EXPECT_TRUE(
      Diff(star, Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [/x/a]}]")).widens());
}

TEST(DiffTest, HostWideAllowCoversHttpAtoms) {
  Surface granted = Runtime("allow: [h.example]");
  EXPECT_FALSE(
      Diff(granted, Runtime("allow: [{hosts: [h.example], methods: [DELETE], paths: [/repos/**]}]"))
          .widens());
  EXPECT_EQ(Diff(granted, Runtime("allow: [{hosts: [g.example], methods: [GET]}]")).widenings,
            Lines{"runtime: new allow GET g.example/**"});
}

TEST(DiffTest, BoundingAHostIsANarrowingAndUnboundingAWidening) {
  Surface open = Runtime("allow: [h.example]");
  Surface bounded = Runtime("allow: [{hosts: [h.example], methods: [GET]}]");
  SurfaceDiff narrow = Diff(open, bounded);
  EXPECT_FALSE(narrow.widens()) << narrow.widenings[0];
  EXPECT_EQ(narrow.narrowings, Lines{"runtime: removed allow h.example"});
  EXPECT_EQ(Diff(bounded, open).widenings, Lines{"runtime: new allow h.example"});
}

TEST(DiffTest, HostGlobs) {
  Surface deep = Runtime("allow: [\"**.example.com\"]");
  EXPECT_FALSE(Diff(deep, Runtime("allow: [a.b.example.com]")).widens());
  EXPECT_FALSE(Diff(deep, Runtime("allow: [\"*.example.com\"]")).widens());
  EXPECT_TRUE(Diff(deep, Runtime("allow: [example.com]")).widens());
  EXPECT_TRUE(Diff(deep, Runtime("allow: [a.example.org]")).widens());

  Surface one = Runtime("allow: [\"*.example.com\"]");
  EXPECT_FALSE(Diff(one, Runtime("allow: [a.example.com]")).widens());
  EXPECT_FALSE(Diff(one, Runtime("allow: [{hosts: [api.example.com], methods: [GET]}]")).widens());
  EXPECT_EQ(Diff(one, Runtime("allow: [a.b.example.com]")).widenings,
            Lines{"runtime: new allow a.b.example.com"});
  EXPECT_TRUE(Diff(one, Runtime("allow: [\"**.example.com\"]")).widens());

  Surface all = Runtime("allow: [\"**\"]");
  EXPECT_FALSE(Diff(all, Runtime("allow: [anything.example, \"*\"]")).widens());
}

TEST(DiffTest, Ports) {
  Surface any_port = Runtime("allow: [h.example]");
  EXPECT_FALSE(Diff(any_port, Runtime("allow: [\"h.example:8443\"]")).widens());
  Surface p443 = Runtime("allow: [\"h.example:443\"]");
  EXPECT_TRUE(Diff(p443, Runtime("allow: [\"h.example:8443\"]")).widens());
  EXPECT_TRUE(Diff(p443, Runtime("allow: [h.example]")).widens());
}

// ---- Deny removal ----

TEST(DiffTest, EveryRemovedDenyWidens) {
  Surface granted = Runtime("allow: [\"**\"], deny: [telemetry.example]");
  EXPECT_EQ(Diff(granted, Runtime("allow: [\"**\"]")).widenings,
            Lines{"runtime: removed deny telemetry.example"});

  // Even where no kit allow reaches it: the global rules may.
  Surface narrow = Runtime("allow: [api.example], deny: [telemetry.example]");
  EXPECT_EQ(Diff(narrow, Runtime("allow: [api.example]")).widenings,
            Lines{"runtime: removed deny telemetry.example"});
  // A deny the proposal still covers (here by a wider one) is kept.
  EXPECT_FALSE(Diff(narrow, Runtime("allow: [api.example], deny: [\"*.example\"]")).widens());
}

TEST(DiffTest, RemovedHttpDenyWidens) {
  Surface granted = Runtime(
      "allow: [{hosts: [h.example], methods: [GET], paths: [/public/**]}],"
      " deny: [{hosts: [h.example], methods: [GET], paths: [/private/**]}]");
  EXPECT_EQ(
      Diff(granted, Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [/public/**]}]"))
          .widenings,
      Lines{"runtime: removed deny GET h.example/private/**"});
  // Narrowing the denied path is removing part of the deny.
  EXPECT_TRUE(Diff(granted, Runtime("allow: [{hosts: [h.example], methods: [GET], paths: "
                                    "[/public/**]}], deny: [{hosts: [h.example], methods: [GET], "
                                    "paths: [/private/keys/**]}]"))
                  .widens());
}

TEST(DiffTest, StrengtheningADenyIsNotAWidening) {
  Surface granted = Runtime(
      "allow: [h.example], deny: [{hosts: [h.example], methods: [GET], paths: [/private/**]}]");
  Surface proposed = Runtime(
      "allow: [h.example], deny: [{hosts: [h.example], methods: [ANY], paths: [/private/**]}]");
  SurfaceDiff d = Diff(granted, proposed);
  EXPECT_FALSE(d.widens()) << d.widenings[0];
  EXPECT_EQ(d.narrowings, Lines{"runtime: new deny ANY h.example/private/**"});
  // The reverse weakens it.
  EXPECT_EQ(Diff(proposed, granted).widenings,
            Lines{"runtime: removed deny ANY h.example/private/**"});
}

// ---- Credentials, storage, ports, privileged, others ----

std::string Credential(const std::string& service, const std::string& phase,
                       const std::string& domain) {
  return absl::StrCat("{type: com.docker.sandbox/network-policy@2, config: {install: {allow: [",
                      domain, "]}, runtime: {allow: [", domain, "]}}},",
                      "{type: com.docker.sandbox/credential@1, config: {service: ", service,
                      ", phase: ", phase, ", apiKey: {inject: [{domain: ", domain,
                      ", header: Authorization}]}}}");
}

TEST(DiffTest, Credentials) {
  Surface granted = MixinSurface(Credential("github", "runtime", "api.github.com"));
  EXPECT_FALSE(
      Diff(granted, MixinSurface(Credential("github", "runtime", "api.github.com"))).widens());
  EXPECT_EQ(
      Diff(granted, MixinSurface(Credential("gitlab", "runtime", "api.github.com"))).widenings,
      Lines{"new credential gitlab (runtime)"});
  // Moving between phases widens.
  EXPECT_EQ(
      Diff(granted, MixinSurface(Credential("github", "install", "api.github.com"))).widenings,
      Lines{"new credential github (install)"});
  // A new inject domain widens.
  SurfaceDiff d = Diff(granted, MixinSurface(Credential("github", "runtime", "github.com")));
  EXPECT_EQ(d.widenings, (Lines{"install: new allow github.com", "runtime: new allow github.com",
                                "credential github (runtime): new inject domain github.com"}));
  // Dropping the credential narrows.
  SurfaceDiff drop = Diff(granted, Surface());
  EXPECT_FALSE(drop.widens());
  EXPECT_NE(std::find(drop.narrowings.begin(), drop.narrowings.end(),
                      "removed credential github (runtime)"),
            drop.narrowings.end());
}

TEST(DiffTest, StoragePortsPrivileged) {
  Surface granted = MixinSurface(
      "{type: com.docker.sandbox/volume@1, config: {path: /data}},"
      "{type: com.docker.sandbox/port@1, config: {container: 3000}}");
  Surface proposed = MixinSurface(
      "{type: com.docker.sandbox/volume@1, config: {path: /data, size: 2g}},"
      "{type: com.docker.sandbox/volume@1, config: {path: /cache}},"
      "{type: com.docker.sandbox/port@1, config: {container: 3000}},"
      "{type: com.docker.sandbox/port@1, config: {container: 8080}},"
      "{type: com.docker.sandbox/privileged@1}");
  SurfaceDiff d = Diff(granted, proposed);
  // A volume's size is not a grant.
  EXPECT_EQ(d.widenings,
            (Lines{"new volume /cache", "new port 8080/tcp", "privileged: now requested"}));
  SurfaceDiff back = Diff(proposed, granted);
  EXPECT_FALSE(back.widens());
  EXPECT_EQ(back.narrowings, (Lines{"removed volume /cache", "removed port 8080/tcp",
                                    "privileged: no longer requested"}));
}

TEST(DiffTest, OtherServices) {
  Surface granted =
      MixinSurface("{type: com.docker.sandbox/ssh-agent@1, config: {phase: runtime}}");
  EXPECT_FALSE(Diff(granted, granted).widens());
  EXPECT_EQ(Diff(granted,
                 MixinSurface("{type: com.docker.sandbox/ssh-agent@1, config: {phase: install}}"))
                .widenings,
            Lines{"other: changed ssh-agent@1 config"});
  EXPECT_EQ(Diff(Surface(), granted).widenings, Lines{"other: new ssh-agent@1"});
  SurfaceDiff drop = Diff(granted, Surface());
  EXPECT_FALSE(drop.widens());
  EXPECT_EQ(drop.narrowings, Lines{"other: removed ssh-agent@1"});
}

}  // namespace
}  // namespace airlock::kit
