#include "common/kit/surface.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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

// The agent's command and image name what runs inside the sandbox: they
// reach nothing outside it, so changing them neither widens nor narrows.
TEST(ProjectSurfaceTest, TheAgentGrantsNothing) {
  auto workload = [](const std::string& config) {
    return Parse(absl::StrCat("schemaVersion: \"3\"\nkind: workload\ncapabilities: [",
                              "{type: dev.airlock/agent@1, config: ", config, "}]\n"));
  };
  Surface before = workload("{command: [claude]}");
  Surface after = workload("{command: [claude, --yolo, --model, x], image: other}");
  EXPECT_TRUE(before.services.empty());
  EXPECT_TRUE(after.services.empty());
  SurfaceDiff d = Diff(before, after);
  EXPECT_TRUE(d.widenings.empty()) << absl::StrJoin(d.widenings, "\n");
  EXPECT_TRUE(d.narrowings.empty()) << absl::StrJoin(d.narrowings, "\n");
  d = Diff(Parse("schemaVersion: \"3\"\nkind: workload\n"), after);
  EXPECT_TRUE(d.widenings.empty()) << absl::StrJoin(d.widenings, "\n");
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

  // Found by //fuzz:kit_descriptor: a granted host sorting before '*'
  // hid the wildcards after it, so a covered host read as a widening.
  Surface odd = Runtime("allow: [\" **.invalid\", \"(x)\", \"*\"]");
  EXPECT_FALSE(
      Diff(odd, Runtime("allow: [\" **.invalid\", \"(x)\", \"*\", new.invalid]")).widens());
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

bool Has(const Lines& lines, const std::string& want) {
  return std::find(lines.begin(), lines.end(), want) != lines.end();
}

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
      MixinSurface("{type: com.docker.sandbox/acp@1, config: {agent: a, command: x}}");
  EXPECT_FALSE(Diff(granted, granted).widens());
  EXPECT_EQ(Diff(granted,
                 MixinSurface("{type: com.docker.sandbox/acp@1, config: {agent: a, command: y}}"))
                .widenings,
            Lines{"other: changed acp@1 config"});
  EXPECT_EQ(Diff(Surface(), granted).widenings, Lines{"other: new acp@1"});
  SurfaceDiff drop = Diff(granted, Surface());
  EXPECT_FALSE(drop.widens());
  EXPECT_EQ(drop.narrowings, Lines{"other: removed acp@1"});
}

// ---- Typed entries: what `kit diff --json` lists ----

// Change renders a SurfaceChange for comparing whole lists.
std::string Change(const SurfaceChange& c) {
  return absl::StrCat(c.category, " | ", c.phase, " | ", c.detail);
}
Lines Changes(const std::vector<SurfaceChange>& changes) {
  Lines out;
  for (const SurfaceChange& c : changes) out.push_back(Change(c));
  return out;
}

// ExpectConsistent: the string lists are the typed lists' details.
void ExpectConsistent(const SurfaceDiff& d) {
  ASSERT_EQ(d.widenings.size(), d.widened.size());
  ASSERT_EQ(d.narrowings.size(), d.narrowed.size());
  for (size_t i = 0; i < d.widened.size(); ++i) EXPECT_EQ(d.widenings[i], d.widened[i].detail);
  for (size_t i = 0; i < d.narrowed.size(); ++i) EXPECT_EQ(d.narrowings[i], d.narrowed[i].detail);
  EXPECT_EQ(d.widens(), !d.widened.empty());
}

TEST(SurfaceChangeTest, NetworkCategoriesNameTheSurfaceFieldAndPhase) {
  Surface granted = MixinSurface(
      "{type: com.docker.sandbox/network-policy@2, config: {"
      "install: {allow: [pkg.example], deny: [mirror.example]},"
      "runtime: {allow: [a.example, {hosts: [api.example], methods: [GET]}],"
      " deny: [t.example, {hosts: [api.example], methods: [DELETE], paths: [/repos/**]}]}}}");
  Surface proposed = MixinSurface(
      "{type: com.docker.sandbox/network-policy@2, config: {"
      "install: {allow: [pkg.example, cdn.example], deny: [mirror.example]},"
      "runtime: {allow: [a.example, {hosts: [api.example], methods: [GET, POST]}]}}}");
  SurfaceDiff d = Diff(granted, proposed);
  ExpectConsistent(d);
  EXPECT_EQ(Changes(d.widened),
            (Lines{
                "network.install.allow | install | install: new allow cdn.example",
                "network.runtime.http.allow | runtime | runtime: new allow POST api.example/**",
                "network.runtime.deny-removed | runtime | runtime: removed deny t.example",
                "network.runtime.http.deny-removed | runtime | runtime: removed deny DELETE "
                "api.example/repos/**",
            }));
  EXPECT_TRUE(d.narrowed.empty()) << ::testing::PrintToString(d.narrowings);

  // The reverse: each narrowing names the field it shrinks (a new deny,
  // the deny lists).
  SurfaceDiff back = Diff(proposed, granted);
  ExpectConsistent(back);
  EXPECT_EQ(Changes(back.narrowed),
            (Lines{
                "network.install.allow | install | install: removed allow cdn.example",
                "network.runtime.http.allow | runtime | runtime: removed allow POST api.example/**",
                "network.runtime.deny | runtime | runtime: new deny t.example",
                "network.runtime.http.deny | runtime | runtime: new deny DELETE "
                "api.example/repos/**",
            }));
  EXPECT_TRUE(back.widened.empty()) << ::testing::PrintToString(back.widenings);
  EXPECT_EQ(
      Changes(
          Diff(Runtime("allow: [a.example]"), Runtime("allow: [a.example, b.example]")).widened),
      Lines{"network.runtime.allow | runtime | runtime: new allow b.example"});
}

TEST(SurfaceChangeTest, CredentialsStoragePortsPrivilegedServices) {
  Surface granted = MixinSurface(Credential("github", "runtime", "api.github.com") +
                                 ", {type: com.docker.sandbox/volume@1, config: {path: /data}}");
  Surface proposed = MixinSurface(
      Credential("github", "runtime", "api.github.com") + ", " +
      "{type: com.docker.sandbox/credential@1, config: {service: npm, phase: install, apiKey: "
      "{name: NPM_TOKEN}}}, "
      "{type: com.docker.sandbox/volume@1, config: {path: /cache}},"
      "{type: com.docker.sandbox/port@1, config: {container: 8080}},"
      "{type: com.docker.sandbox/privileged@1},"
      "{type: com.example/thing@1, config: {a: 1}}");
  SurfaceDiff d = Diff(granted, proposed);
  ExpectConsistent(d);
  EXPECT_EQ(Changes(d.widened), (Lines{
                                    "credentials.install | install | new credential npm (install)",
                                    "storage |  | new volume /cache",
                                    "ports |  | new port 8080/tcp",
                                    "privileged |  | privileged: now requested",
                                    "services |  | other: new com.example/thing@1",
                                }));
  EXPECT_EQ(Changes(d.narrowed), Lines{"storage |  | removed volume /data"});

  SurfaceDiff domain =
      Diff(granted, MixinSurface(Credential("github", "runtime", "github.com") +
                                 ", {type: com.docker.sandbox/volume@1, config: {path: /data}}"));
  ExpectConsistent(domain);
  EXPECT_TRUE(Has(Changes(domain.widened),
                  "credentials.runtime | runtime | credential github (runtime): new inject domain "
                  "github.com"))
      << ::testing::PrintToString(Changes(domain.widened));
}

// ---- Containment between bare hosts and bounded entries ----

TEST(BareAndBoundedTest, ABareAllowContainsEveryBoundedAllowOnItsHost) {
  Surface bounded = Runtime("allow: [{hosts: [h.example], methods: [DELETE], paths: [/repos/**]}]");
  EXPECT_FALSE(Diff(Runtime("allow: [h.example]"), bounded).widens());
  // Also when the granted surface was stored with its host list alone (a
  // grant from before HTTP atoms were recorded): a bare host is every
  // request to it.
  Surface hosts_only;
  hosts_only.runtime.allow_hosts = {"h.example"};
  SurfaceDiff d = Diff(hosts_only, bounded);
  EXPECT_FALSE(d.widens()) << d.widenings[0];
  // A bare pattern covering every host contains them as well; a port-
  // qualified bare host contains only requests on its port.
  EXPECT_FALSE(Diff(Runtime("allow: [\"**\"]"), bounded).widens());
  Surface p443 = Runtime("allow: [\"h.example:443\"]");
  EXPECT_FALSE(
      Diff(p443, Runtime("allow: [{hosts: [\"h.example:443\"], methods: [GET]}]")).widens());
  EXPECT_EQ(Diff(p443, bounded).widenings, Lines{"runtime: new allow DELETE h.example/repos/**"});
  // And the reverse direction reads the same: a bounded grant dropped
  // where the proposal allows the host bare is no narrowing of it.
  Surface both;
  both.runtime.allow_hosts = {"h.example"};
  EXPECT_TRUE(Diff(bounded, both).narrowings.empty())
      << ::testing::PrintToString(Diff(bounded, both).narrowings);
}

TEST(BareAndBoundedTest, ABareAllowWhereOnlyABoundedOneWasIsOneWidening) {
  Surface bounded = Runtime("allow: [{hosts: [h.example], methods: [GET], paths: [/v1/**]}]");
  SurfaceDiff d = Diff(bounded, Runtime("allow: [h.example]"));
  ExpectConsistent(d);
  EXPECT_EQ(Changes(d.widened),
            Lines{"network.runtime.allow | runtime | runtime: new allow h.example"});
  // Beside the bounded entry too: the bare one opens the host.
  SurfaceDiff beside = Diff(bounded, Runtime("allow: [h.example, {hosts: [h.example], methods: "
                                             "[GET], paths: [/v1/**]}]"));
  EXPECT_EQ(Changes(beside.widened),
            Lines{"network.runtime.allow | runtime | runtime: new allow h.example"});
}

TEST(BareAndBoundedTest, RemovingABoundedDenyWidens) {
  const std::string allow = "allow: [h.example], ";
  Surface guarded =
      Runtime(allow + "deny: [{hosts: [h.example], methods: [DELETE], paths: [/repos/**]}]");
  SurfaceDiff d = Diff(guarded, Runtime("allow: [h.example]"));
  ExpectConsistent(d);
  EXPECT_EQ(Changes(d.widened), Lines{"network.runtime.http.deny-removed | runtime | runtime: "
                                      "removed deny DELETE h.example/repos/**"});
  // A bare deny of the host contains it, stored with its host list alone or not.
  EXPECT_FALSE(Diff(guarded, Runtime(allow + "deny: [h.example]")).widens());
  Surface bare_deny;
  bare_deny.runtime.allow_hosts = {"h.example"};
  bare_deny.runtime.http_allow = {"ANY h.example/**"};
  bare_deny.runtime.deny_hosts = {"h.example"};
  EXPECT_FALSE(Diff(guarded, bare_deny).widens()) << Diff(guarded, bare_deny).widenings[0];
  // Removing the bare deny is the one widening, reported against the host list.
  SurfaceDiff bare = Diff(Runtime(allow + "deny: [t.example]"), Runtime("allow: [h.example]"));
  EXPECT_EQ(Changes(bare.widened),
            Lines{"network.runtime.deny-removed | runtime | runtime: removed deny t.example"});
}

// ---- The categories the spec's surface has beyond the enforced ones ----

TEST(ProjectSurfaceTest, SshAgentHostMountSkillsAndUsb) {
  Surface s = MixinSurface(
      "{type: com.docker.sandbox/ssh-agent@1, config: {phase: runtime}},"
      "{type: com.docker.sandbox/ssh-agent@1, config: {phase: install, unrestricted: false,"
      " sign: [git], authenticate: [git@github.com]}},"
      "{type: com.docker.sandbox/host-mount@1, config: {path: /home/agent/.cache/pip}},"
      "{type: com.docker.sandbox/agent-skills@1, config: {path: /skills/a}},"
      "{type: com.docker.sandbox/agent-skills@1, config: {path: /skills/b, mode: readwrite}},"
      "{type: com.docker.sandbox/usb-device@1, config: {vendorId: '1d6b', productId: '0104'}},"
      "{type: com.docker.sandbox/usb-device@1, config: {class: '03'}},"
      "{type: com.docker.sandbox/git-identity@1}");
  EXPECT_EQ(s.ssh_agent,
            (Lines{"install authenticate git@github.com", "install sign git", "runtime"}));
  EXPECT_EQ(s.host_mount_paths, Lines{"/home/agent/.cache/pip"});
  EXPECT_EQ(s.skills_paths, (Lines{"/skills/a", "/skills/b"}));
  EXPECT_EQ(s.skills_write_paths, Lines{"/skills/b"});
  EXPECT_EQ(s.usb, (Lines{"1d6b:0104", "class:03"}));
  // Their services keys stay (a store keeping only services still gates
  // every change); the other services are what no typed list spells out.
  EXPECT_EQ(s.services.size(), 8u) << ::testing::PrintToString(s.services);
  EXPECT_EQ(s.typed_services.size(), 7u) << ::testing::PrintToString(s.typed_services);
  EXPECT_EQ(s.OtherServices(), Lines{"com.docker.sandbox/git-identity@1"});
  EXPECT_TRUE(s.storage_paths.empty());
}

TEST(SurfaceChangeTest, SshAgent) {
  auto ssh = [](const std::string& config) {
    return MixinSurface("{type: com.docker.sandbox/ssh-agent@1, config: " + config + "}");
  };
  Surface open = ssh("{phase: runtime}");
  Surface signing = ssh("{phase: runtime, unrestricted: false, sign: [git]}");
  Surface login = ssh("{phase: runtime, unrestricted: false, authenticate: [github.com]}");
  // An unbounded phase covers everything in it.
  SurfaceDiff narrow = Diff(open, signing);
  ExpectConsistent(narrow);
  EXPECT_FALSE(narrow.widens()) << narrow.widenings[0];
  EXPECT_EQ(Changes(narrow.narrowed),
            Lines{"ssh-agent | runtime | ssh-agent (runtime): removed grant unrestricted"});
  SurfaceDiff widen = Diff(signing, open);
  EXPECT_EQ(Changes(widen.widened),
            Lines{"ssh-agent | runtime | ssh-agent (runtime): new grant unrestricted"});
  // A destination without a user covers every user at that host.
  EXPECT_FALSE(
      Diff(login, ssh("{phase: runtime, unrestricted: false, authenticate: [git@github.com]}"))
          .widens());
  EXPECT_EQ(Changes(Diff(login, ssh("{phase: runtime, unrestricted: false, authenticate: "
                                    "[gitlab.com]}"))
                        .widened),
            Lines{"ssh-agent | runtime | ssh-agent (runtime): new grant authenticate gitlab.com"});
  // Another phase is another grant.
  EXPECT_EQ(Changes(Diff(open, ssh("{phase: [runtime, install]}")).widened),
            Lines{"ssh-agent | install | ssh-agent (install): new grant unrestricted"});
}

TEST(SurfaceChangeTest, HostMountSkillsAndUsb) {
  auto mount = [](const std::string& path) {
    return "{type: com.docker.sandbox/host-mount@1, config: {path: " + path + "}}";
  };
  auto skills = [](const std::string& config) {
    return "{type: com.docker.sandbox/agent-skills@1, config: " + config + "}";
  };
  auto usb = [](const std::string& config) {
    return "{type: com.docker.sandbox/usb-device@1, config: " + config + "}";
  };
  SurfaceDiff mounts =
      Diff(MixinSurface(mount("/a")), MixinSurface(mount("/a") + "," + mount("/b")));
  ExpectConsistent(mounts);
  EXPECT_EQ(Changes(mounts.widened), Lines{"host-mount |  | new host mount /b"});
  // A mount's mode is not a grant.
  EXPECT_FALSE(Diff(MixinSurface(mount("/a")),
                    MixinSurface("{type: com.docker.sandbox/host-mount@1, config: {path: /a, "
                                 "mode: '0700'}}"))
                   .widens());
  // Moving a path from a volume to a host mount widens.
  SurfaceDiff moved = Diff(MixinSurface("{type: com.docker.sandbox/volume@1, config: {path: /a}}"),
                           MixinSurface(mount("/a")));
  EXPECT_EQ(Changes(moved.widened), Lines{"host-mount |  | new host mount /a"});
  EXPECT_EQ(Changes(moved.narrowed), Lines{"storage |  | removed volume /a"});

  Surface read = MixinSurface(skills("{path: /skills}"));
  Surface write = MixinSurface(skills("{path: /skills, mode: readwrite}"));
  SurfaceDiff raise = Diff(read, write);
  ExpectConsistent(raise);
  EXPECT_EQ(Changes(raise.widened), Lines{"skills.write |  | skills store /skills: now writable"});
  EXPECT_TRUE(raise.narrowed.empty()) << ::testing::PrintToString(raise.narrowings);
  SurfaceDiff lower = Diff(write, read);
  EXPECT_FALSE(lower.widens()) << lower.widenings[0];
  EXPECT_EQ(Changes(lower.narrowed),
            Lines{"skills.write |  | skills store /skills: no longer writable"});
  EXPECT_EQ(Changes(Diff(Surface(), write).widened),
            (Lines{"skills |  | new skills store /skills",
                   "skills.write |  | skills store /skills: now writable"}));
  EXPECT_FALSE(Diff(read, MixinSurface(skills("{path: /skills, mode: readonly}"))).widens());

  SurfaceDiff devices = Diff(MixinSurface(usb("{class: '03'}")),
                             MixinSurface(usb("{vendorId: '1d6b', productId: '0104'}")));
  ExpectConsistent(devices);
  EXPECT_EQ(Changes(devices.widened), Lines{"usb |  | new USB device 1d6b:0104"});
  EXPECT_EQ(Changes(devices.narrowed), Lines{"usb |  | removed USB device class:03"});
}

// A surface stored with only the fields policyd's GrantSurface keeps has no
// typed lists for these types: their services keys judge them, as before.
TEST(SurfaceChangeTest, AStoredSurfaceWithoutTypedListsFallsBackToServices) {
  auto stored = [](Surface s) {
    s.ssh_agent.clear();
    s.host_mount_paths.clear();
    s.skills_paths.clear();
    s.skills_write_paths.clear();
    s.usb.clear();
    s.typed_services.clear();
    return s;
  };
  Surface open = MixinSurface("{type: com.docker.sandbox/ssh-agent@1, config: {phase: runtime}}");
  Surface install =
      MixinSurface("{type: com.docker.sandbox/ssh-agent@1, config: {phase: install}}");
  EXPECT_FALSE(Diff(stored(open), stored(open)).widens());
  EXPECT_FALSE(Diff(stored(open), open).widens());
  SurfaceDiff moved = Diff(stored(open), install);
  ExpectConsistent(moved);
  EXPECT_EQ(Changes(moved.widened), Lines{"services |  | other: changed ssh-agent@1 config"});
  EXPECT_EQ(Changes(Diff(stored(open), stored(install)).widened),
            Lines{"services |  | other: changed ssh-agent@1 config"});
}

}  // namespace
}  // namespace airlock::kit
