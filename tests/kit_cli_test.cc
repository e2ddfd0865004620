// `airlock kit validate|inspect|diff` run as the built CLI on the kit
// fixtures (common/kit/testdata), on the built-in agent kits by name, and
// on modified copies in a temp dir:
// valid and malformed descriptors, the text and JSON views, the widening
// diff and --exit-code, and the usage and reference errors. These verbs
// are local: no daemon is started and no VM is booted.
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

constexpr char kDeny[] = "DELETE api.codeforge.example/repos/**";
constexpr char kDenyYaml[] =
    "        deny:\n"
    "          - hosts: [api.codeforge.example]\n"
    "            methods: [DELETE]\n"
    "            paths: [/repos/**]\n";
constexpr char kRefIs[] = "an OCI image layout directory or a descriptor file";

std::string Fixture(const std::string& name) {
  return testing::BinaryPath("common/kit/testdata/" + name);
}

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

bool Contains(const nlohmann::json& list, const std::string& item) {
  for (const auto& i : list) {
    if (i == item) return true;
  }
  return false;
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  size_t at = s.find(from);
  if (at != std::string::npos) s.replace(at, from.size(), to);
  return s;
}

class KitCliTest : public ::testing::Test {
 protected:
  void SetUp() override { env_ = testing::AirlockEnv(dir_.path()); }
  void TearDown() override {
    // Local verbs: nothing was started.
    EXPECT_EQ(ReadFileToString(dir_.path() + "/run/policyd.pid"), "");
    EXPECT_EQ(ReadFileToString(dir_.path() + "/run/vmmd.pid"), "");
  }
  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args, "", 60);
  }
  // Write puts `data` in the temp dir and returns its path.
  std::string Write(const std::string& name, const std::string& data) {
    std::string path = dir_.path() + "/" + name;
    std::ofstream(path, std::ios::binary) << data;
    return path;
  }
  // ForgeWithoutDeny is forge.yaml with its one deny entry removed.
  std::string ForgeWithoutDeny() {
    std::string forge = ReadFileToString(Fixture("forge.yaml"));
    EXPECT_TRUE(Contains(forge, kDenyYaml)) << "forge.yaml changed shape";
    return Write("forge-open.yaml", Replace(forge, kDenyYaml, ""));
  }
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

// ---- validate ----

TEST_F(KitCliTest, ValidateAcceptsAKitAloneAndAComposition) {
  auto mixin = Airlock({"kit", "validate", Fixture("forge.yaml")});
  EXPECT_EQ(mixin.exit_code, 0) << mixin.err;
  EXPECT_EQ(mixin.out, Fixture("forge.yaml") + ": valid mixin kit\n");

  auto layout = Airlock({"kit", "validate", Fixture("forge-oci")});
  EXPECT_EQ(layout.exit_code, 0) << layout.err;
  EXPECT_EQ(layout.out, Fixture("forge-oci") + ": valid mixin kit\n");

  auto both = Airlock({"kit", "validate", Fixture("forge-oci"), Fixture("quill.yaml"), "--env",
                       "WORKSPACE_DIR=/workspace", "--kit-arg", "model=swift-2"});
  EXPECT_EQ(both.exit_code, 0) << both.err;
  EXPECT_TRUE(Contains(both.out, Fixture("quill.yaml") + ": valid workload kit\n")) << both.out;
  EXPECT_TRUE(Contains(both.out, Fixture("forge-oci") + ": valid mixin kit\n")) << both.out;
  // The workload comes first, whatever the order on the command line.
  EXPECT_TRUE(Contains(
      both.out, "composition: valid (" + Fixture("quill.yaml") + ", " + Fixture("forge-oci") + ")"))
      << both.out;

  auto json = Airlock({"kit", "validate", "--json", Fixture("forge.yaml")});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["valid"], true);
  EXPECT_TRUE(j["errors"].empty());
  EXPECT_TRUE(j["warnings"].is_array());

  // A lone mixin's requires are left to a composition, and said so.
  auto adapter = Airlock({"kit", "validate", Fixture("quill-acp.yaml")});
  EXPECT_EQ(adapter.exit_code, 0) << adapter.err;
  EXPECT_TRUE(Contains(adapter.err, "warning: ")) << adapter.err;
  EXPECT_TRUE(Contains(adapter.err, "requires quill >= 2.0, < 3")) << adapter.err;
}

TEST_F(KitCliTest, ValidateRefusesAMalformedDescriptorNamingEachField) {
  std::string forge = ReadFileToString(Fixture("forge.yaml"));
  std::string bad = Write(
      "bad.yaml", Replace(Replace(forge, "kind: mixin\n", "kind: mixin\nbogus: 1\n"),
                          "      runtime:\n", "      runtime:\n        allwo: [b.example]\n"));
  ASSERT_NE(bad, "");

  auto text = Airlock({"kit", "validate", bad});
  EXPECT_EQ(text.exit_code, 1);
  EXPECT_EQ(text.out, "");
  EXPECT_TRUE(Contains(text.err, "bogus: unknown field")) << text.err;
  EXPECT_TRUE(Contains(text.err, "capabilities[0].config.runtime.allwo: unknown field"))
      << text.err;
  EXPECT_TRUE(Contains(text.err, bad)) << text.err;

  auto json = Airlock({"kit", "validate", "--json", bad});
  EXPECT_EQ(json.exit_code, 1);
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["valid"], false);
  ASSERT_EQ(j["errors"].size(), 2u) << json.out;
  for (const auto& e : j["errors"]) {
    std::string line = e;
    EXPECT_EQ(line.rfind(bad + ": ", 0), 0u) << "every error names the file: " << line;
    EXPECT_TRUE(Contains(line, ": unknown field")) << line;
  }

  // A composition failure fails validate too: two kits providing quill.
  auto clash = Airlock({"kit", "validate", Fixture("quill.yaml"), Fixture("quill-mixin.yaml"), "-e",
                        "WORKSPACE_DIR=/w"});
  EXPECT_EQ(clash.exit_code, 1);
  EXPECT_TRUE(Contains(clash.err, "quill")) << clash.err;
}

TEST_F(KitCliTest, AMissingContainerVariableIsNamedWithTheFlagThatGivesIt) {
  // Validating the authored kit needs no value; using it does.
  auto authored = Airlock({"kit", "validate", Fixture("quill.yaml")});
  EXPECT_EQ(authored.exit_code, 0) << authored.err;

  auto missing = Airlock({"kit", "inspect", Fixture("quill.yaml")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(missing.err, "\"WORKSPACE_DIR\"")) << missing.err;
  EXPECT_TRUE(Contains(missing.err, "--env")) << missing.err;

  auto given = Airlock({"kit", "inspect", Fixture("quill.yaml"), "-e", "WORKSPACE_DIR=/w"});
  EXPECT_EQ(given.exit_code, 0) << given.err;
}

// The conformance items of validate: each fixture is valid as authored
// (or, for notes-mixin.yaml, invalid for an authoring rule), whatever
// sandbox creation would still ask of it.
TEST_F(KitCliTest, ValidateChecksAuthoringRulesOnly) {
  // Required args (one per phase), ${{ kit.env.RELAY_HOME }} in a file
  // path, mode: "" and the other empty optional strings.
  std::string relay = Fixture("relay.yaml");
  auto ok = Airlock({"kit", "validate", relay});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_EQ(ok.out, relay + ": valid workload kit\n");
  EXPECT_EQ(ok.err, "");
  // A given value is still held to its declaration.
  auto bad_arg = Airlock({"kit", "validate", relay, "--kit-arg", "channel=Main!"});
  EXPECT_EQ(bad_arg.exit_code, 1);
  EXPECT_TRUE(Contains(bad_arg.err, "kit arg \"channel\": value \"Main!\" does not match"))
      << bad_arg.err;
  // Resolution keeps asking: the args, then the variable, naming the field.
  auto no_args = Airlock({"kit", "inspect", relay});
  EXPECT_EQ(no_args.exit_code, 1);
  EXPECT_TRUE(Contains(no_args.err, "kit arg \"channel\" is required")) << no_args.err;
  auto no_env =
      Airlock({"kit", "inspect", relay, "--kit-arg", "channel=main", "--kit-arg", "token=t0k"});
  EXPECT_EQ(no_env.exit_code, 1);
  EXPECT_TRUE(Contains(no_env.err,
                       "capabilities[3].config.files[0].path: final container environment has "
                       "no variable \"RELAY_HOME\""))
      << no_env.err;
  auto full = Airlock({"kit", "inspect", relay, "--kit-arg", "channel=main", "--kit-arg",
                       "token=t0k", "-e", "RELAY_HOME=/etc/relay"});
  EXPECT_EQ(full.exit_code, 0) << full.err;

  // An unknown required type is accepted, said so, and refused at resolution.
  std::string probe = Fixture("probe.yaml");
  auto unknown = Airlock({"kit", "validate", probe});
  EXPECT_EQ(unknown.exit_code, 0) << unknown.err;
  EXPECT_EQ(unknown.out, probe + ": valid mixin kit\n");
  EXPECT_TRUE(Contains(unknown.err, "warning: " + probe +
                                        ": capabilities[0]: this host does not provide "
                                        "com.example/probe-sensor@1; creating a sandbox refuses"))
      << unknown.err;
  auto unknown_json = Airlock({"kit", "validate", "--json", probe});
  EXPECT_EQ(unknown_json.exit_code, 0) << unknown_json.err;
  auto uj = nlohmann::json::parse(unknown_json.out);
  EXPECT_EQ(uj["valid"], true);
  EXPECT_EQ(uj["warnings"].size(), 2u) << unknown_json.out;
  auto refused = Airlock({"kit", "inspect", probe});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_TRUE(Contains(refused.err,
                       "capabilities[0]: kit requires capability type "
                       "\"com.example/probe-sensor@1\", which this host does not "
                       "provide"))
      << refused.err;

  // kind: set is authoring's own.
  auto set = Airlock({"kit", "validate", Fixture("team-set.yaml")});
  EXPECT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, Fixture("team-set.yaml") + ": valid set kit\n");

  // A legacy agent-context profile on a mixin is refused at its field.
  std::string notes = Fixture("notes-mixin.yaml");
  auto profile = Airlock({"kit", "validate", notes});
  EXPECT_EQ(profile.exit_code, 1);
  EXPECT_EQ(profile.out, "");
  EXPECT_TRUE(Contains(profile.err, notes + ": ")) << profile.err;
  EXPECT_TRUE(Contains(profile.err,
                       "capabilities[1].config.filename: agent-context filename without a "
                       "directory is workload-only"))
      << profile.err;
  auto profile_json = Airlock({"kit", "validate", "--json", notes});
  EXPECT_EQ(profile_json.exit_code, 1);
  auto pj = nlohmann::json::parse(profile_json.out);
  EXPECT_EQ(pj["valid"], false);
  ASSERT_EQ(pj["errors"].size(), 1u) << profile_json.out;
  EXPECT_TRUE(Contains(std::string(pj["errors"][0]), "capabilities[1].config.filename: "));
}

// ---- inspect ----

TEST_F(KitCliTest, InspectShowsKitsArgsCapabilitiesAndTheSurface) {
  std::string shell = ReadFileToString(Fixture("shell.yaml"));
  std::string extra = Write("extra.yaml", shell +
                                              "  - type: com.example/thing@1\n    optional: true\n"
                                              "    name: Thing\n    config: {size: 3}\n");
  auto r = Airlock({"kit", "inspect", Fixture("quill.yaml"), Fixture("forge.yaml"), "--kit-arg",
                    "apiPort=8181", "-e", "WORKSPACE_DIR=/w"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const std::string& want : {
           "Kit " + Fixture("quill.yaml"),
           std::string("  name:        Quill coding agent"),
           std::string("  kind:        workload"),
           std::string("  provides:    quill@2.4.1"),
           std::string("apiPort = \"8181\"  (default \"7070\"; pattern [0-9]{2,5})"),
           std::string("(build arg QUILL_VERSION; default \"2.4.1\""),
           std::string("env QUILL_MODEL"),
           std::string("one of \"\", \"low\", \"high\""),
           std::string("com.docker.sandbox/agent-context@1  (not enforced)"),
           std::string("com.docker.sandbox/credential@1  optional\n"),
           std::string("com.docker.sandbox/network-policy@1  \"Quill API\"\n"),
           "Kit " + Fixture("forge.yaml"),
           std::string("  conflicts:   forge-legacy"),
           std::string("Grant surface:"),
           std::string("    HTTP deny:\n      ") + kDeny,
           std::string("  ports:\n    8181/tcp\n"),
           std::string("codeforge (env FORGE_TOKEN; injected for api.codeforge.example"),
           std::string("  privileged: no"),
       }) {
    EXPECT_TRUE(Contains(r.out, want)) << "want: " << want << "\n" << r.out;
  }
  EXPECT_FALSE(Contains(r.out, "7070/tcp")) << r.out;
  EXPECT_FALSE(Contains(r.out, "network-policy@2  (not enforced)")) << r.out;

  auto skipped = Airlock({"kit", "inspect", extra});
  ASSERT_EQ(skipped.exit_code, 0) << skipped.err;
  EXPECT_TRUE(Contains(skipped.out,
                       "com.example/thing@1  optional  \"Thing\"  (not provided by "
                       "this host)"))
      << skipped.out;
  EXPECT_TRUE(Contains(skipped.out,
                       "  skipped:\n    capabilities[4] \"Thing\" skipped: this host "
                       "does not provide com.example/thing@1"))
      << skipped.out;
}

TEST_F(KitCliTest, InspectJsonIsTheEffectiveDescriptorAndItsSurface) {
  auto r = Airlock({"kit", "inspect", "--json", Fixture("forge-oci"), Fixture("quill.yaml"),
                    "--kit-arg", "apiPort=8181", "-e", "WORKSPACE_DIR=/w"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["descriptor"]["kind"], "workload");
  EXPECT_EQ(j["descriptor"]["displayName"], "Quill coding agent");
  EXPECT_TRUE(j["descriptor"]["capabilities"].is_array());
  EXPECT_EQ(j["order"], (nlohmann::json{Fixture("quill.yaml"), Fixture("forge-oci")}));
  EXPECT_EQ(j["surface"]["ports"], nlohmann::json{"8181/tcp"});
  EXPECT_TRUE(Contains(j["surface"]["runtime"]["http_deny"], kDeny)) << r.out;
  EXPECT_TRUE(Contains(j["surface"]["runtime"]["allow_hosts"], "api.quill.dev:443"));
  EXPECT_EQ(j["surface"]["credentials"]["runtime"]["codeforge"]["env_name"], "FORGE_TOKEN");
  EXPECT_EQ(j["surface"]["privileged"], false);
  EXPECT_TRUE(Contains(j["not_enforced"], "com.docker.sandbox/agent-context@1"));
  EXPECT_FALSE(Contains(j["not_enforced"], "com.docker.sandbox/network-policy@1"));
  EXPECT_EQ(j["args"][Fixture("quill.yaml")]["apiPort"], "8181");
  EXPECT_EQ(j["kits"][0]["ref"], Fixture("forge-oci"));
  EXPECT_EQ(j["kits"][0]["kind"], "mixin");

  // A lone mixin is its own effective descriptor.
  auto lone = Airlock({"kit", "inspect", "--json", Fixture("forge.yaml")});
  ASSERT_EQ(lone.exit_code, 0) << lone.err;
  auto l = nlohmann::json::parse(lone.out);
  EXPECT_EQ(l["descriptor"]["kind"], "mixin");
  EXPECT_TRUE(Contains(l["surface"]["runtime"]["http_deny"], kDeny)) << lone.out;
}

// ---- diff ----

TEST_F(KitCliTest, DiffReportsWideningsAndExitCodeStopsOnThem) {
  std::string open = ForgeWithoutDeny();
  std::string guarded = Fixture("forge.yaml");

  auto widen = Airlock({"kit", "diff", guarded, open});
  EXPECT_EQ(widen.exit_code, 0) << widen.err;
  EXPECT_EQ(widen.out, std::string("widenings:\n+ runtime: removed deny ") + kDeny + "\n");

  auto gate = Airlock({"kit", "diff", "--exit-code", guarded, open});
  EXPECT_EQ(gate.exit_code, 1) << gate.err;
  EXPECT_TRUE(Contains(gate.out, "+ runtime: removed deny")) << gate.out;

  auto narrow = Airlock({"kit", "diff", "--exit-code", open, Fixture("forge-oci")});
  EXPECT_EQ(narrow.exit_code, 0) << narrow.err;
  EXPECT_TRUE(Contains(narrow.out, "narrowings:\n- runtime: new deny ")) << narrow.out;
  EXPECT_FALSE(Contains(narrow.out, "widenings:")) << narrow.out;

  auto json = Airlock({"kit", "diff", "--json", "--exit-code", guarded, open});
  EXPECT_EQ(json.exit_code, 1);
  auto j = nlohmann::json::parse(json.out);
  ASSERT_EQ(j["widenings"].size(), 1u) << json.out;
  EXPECT_EQ(j["widenings"][0]["category"], "network.runtime.http.deny-removed") << json.out;
  EXPECT_EQ(j["widenings"][0]["phase"], "runtime");
  EXPECT_EQ(j["widenings"][0]["detail"], std::string("runtime: removed deny ") + kDeny);
  EXPECT_TRUE(j["narrowings"].empty());

  // The published layout of forge.yaml grants exactly what the file does.
  auto same = Airlock({"kit", "diff", "--exit-code", Fixture("forge-oci"), guarded});
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_EQ(same.out, "no change in the grant surface\n");
}

// gauge-2.yaml widens each category of the surface once over gauge-1.yaml
// and narrows twice; --json names each by category and phase, and its
// details are the text output's lines.
TEST_F(KitCliTest, DiffJsonListsEachChangeByCategory) {
  const std::string v1 = Fixture("gauge-1.yaml"), v2 = Fixture("gauge-2.yaml");
  auto json = Airlock({"kit", "diff", "--json", "--exit-code", v1, v2});
  EXPECT_EQ(json.exit_code, 1) << json.err;
  auto j = nlohmann::json::parse(json.out);
  ASSERT_TRUE(j["widenings"].is_array()) << json.out;
  std::vector<std::string> widened, narrowed;
  for (const auto& w : j["widenings"]) {
    ASSERT_TRUE(w.is_object()) << w.dump();
    ASSERT_EQ(w.size(), 3u) << w.dump();
    widened.push_back(std::string(w["category"]) + " | " + std::string(w["phase"]) + " | " +
                      std::string(w["detail"]));
  }
  for (const auto& n : j["narrowings"]) {
    narrowed.push_back(std::string(n["category"]) + " | " + std::string(n["phase"]) + " | " +
                       std::string(n["detail"]));
  }
  EXPECT_EQ(widened,
            (std::vector<std::string>{
                "network.install.allow | install | install: new allow mirror.gauge.example",
                "network.runtime.allow | runtime | runtime: new allow api.gauge.example",
                "network.runtime.http.allow | runtime | runtime: new allow PUT "
                "upload.gauge.example/**",
                "network.runtime.deny-removed | runtime | runtime: removed deny "
                "telemetry.gauge.example",
                "network.runtime.http.deny-removed | runtime | runtime: removed deny DELETE "
                "api.gauge.example/admin/**",
                "credentials.install | install | new credential gauge-ci (install)",
                "ssh-agent | runtime | ssh-agent (runtime): new grant unrestricted",
                "storage |  | new volume /var/cache/gauge",
                "host-mount |  | new host mount /home/agent/.gauge/cache",
                "skills |  | new skills store /home/agent/.gauge/shared-skills",
                "skills.write |  | skills store /home/agent/.gauge/skills: now writable",
                "ports |  | new port 9101/tcp",
                "usb |  | new USB device class:03",
                "privileged |  | privileged: now requested",
                "services |  | other: new git-identity@1",
            }))
      << json.out;
  EXPECT_EQ(narrowed,
            (std::vector<std::string>{
                "network.runtime.allow | runtime | runtime: removed allow push.gauge.example",
                "network.runtime.http.deny | runtime | runtime: new deny DELETE "
                "upload.gauge.example/**",
            }))
      << json.out;

  // The text output is the same details, one per line.
  auto text = Airlock({"kit", "diff", v1, v2});
  EXPECT_EQ(text.exit_code, 0) << text.err;
  std::string want = "widenings:\n";
  for (const auto& w : j["widenings"]) want += "+ " + std::string(w["detail"]) + "\n";
  want += "narrowings:\n";
  for (const auto& n : j["narrowings"]) want += "- " + std::string(n["detail"]) + "\n";
  EXPECT_EQ(text.out, want);

  // Back again: only narrowings, under the same categories.
  auto back = Airlock({"kit", "diff", "--json", "--exit-code", v2, v1});
  EXPECT_EQ(back.exit_code, 1) << back.out;  // v1 re-bounds push and drops the new deny
  auto b = nlohmann::json::parse(back.out);
  std::vector<std::string> back_widened;
  for (const auto& w : b["widenings"]) back_widened.push_back(w["category"]);
  EXPECT_EQ(back_widened, (std::vector<std::string>{"network.runtime.allow",
                                                    "network.runtime.http.deny-removed"}))
      << back.out;
  std::set<std::string> back_narrowed;
  for (const auto& n : b["narrowings"]) back_narrowed.insert(n["category"]);
  for (const char* category :
       {"network.install.allow", "network.runtime.allow", "network.runtime.http.allow",
        "network.runtime.deny", "network.runtime.http.deny", "credentials.install", "ssh-agent",
        "storage", "host-mount", "skills", "skills.write", "ports", "usb", "privileged",
        "services"}) {
    EXPECT_EQ(back_narrowed.count(category), 1u) << category << "\n" << back.out;
  }
}

TEST_F(KitCliTest, DiffGivesAnArgToTheSideThatDeclaresIt) {
  auto port = Airlock({"kit", "diff", Fixture("quill.yaml"), Fixture("quill.yaml"), "-e",
                       "WORKSPACE_DIR=/w", "--kit-arg", "apiPort=7070"});
  EXPECT_EQ(port.exit_code, 0) << port.err;
  EXPECT_EQ(port.out, "no change in the grant surface\n");

  auto nobody = Airlock(
      {"kit", "diff", Fixture("forge.yaml"), Fixture("forge-oci"), "--kit-arg", "apiPort=7070"});
  EXPECT_EQ(nobody.exit_code, 1);
  EXPECT_TRUE(Contains(nobody.err, "no kit declares the arg apiPort")) << nobody.err;
}

// ---- usage and reference errors ----

TEST_F(KitCliTest, ABadKitArgIsAUsageError) {
  for (std::string verb : {"validate", "inspect"}) {
    for (std::string bad : {"apiPort", "=8181"}) {
      auto r = Airlock({"kit", verb, Fixture("forge.yaml"), "--kit-arg", bad});
      EXPECT_EQ(r.exit_code, 2) << verb << " " << bad;
      EXPECT_TRUE(Contains(r.err, "invalid --kit-arg \"" + bad + "\": expected NAME=VALUE"))
          << r.err;
      EXPECT_EQ(r.out, "");
    }
  }
  auto diff =
      Airlock({"kit", "diff", Fixture("forge.yaml"), Fixture("forge.yaml"), "--kit-arg", "x"});
  EXPECT_EQ(diff.exit_code, 2);
  auto twice = Airlock({"kit", "validate", Fixture("quill.yaml"), "--kit-arg", "model=a",
                        "--kit-arg", "model=b", "-e", "WORKSPACE_DIR=/w"});
  EXPECT_EQ(twice.exit_code, 2);
  EXPECT_TRUE(Contains(twice.err, "--kit-arg model is given twice")) << twice.err;

  // Well formed, but no kit declares it: invalid input, named.
  auto typo = Airlock({"kit", "validate", Fixture("forge.yaml"), "--kit-arg", "modle=x"});
  EXPECT_EQ(typo.exit_code, 1);
  EXPECT_TRUE(Contains(typo.err, "modle")) << typo.err;
}

TEST_F(KitCliTest, AMissingRefSaysWhatARefIs) {
  std::string missing = dir_.path() + "/no-such-kit";
  for (const auto& args : std::vector<std::vector<std::string>>{
           {"kit", "validate", missing},
           {"kit", "validate", Fixture("shell.yaml"), missing},
           {"kit", "inspect", missing},
           {"kit", "diff", Fixture("forge.yaml"), missing},
           {"kit", "diff", missing, Fixture("forge.yaml")},
       }) {
    auto r = Airlock(args);
    EXPECT_EQ(r.exit_code, 1) << args[1];
    EXPECT_TRUE(Contains(r.err, missing + ": no such file or directory")) << r.err;
    EXPECT_TRUE(Contains(r.err, kRefIs)) << r.err;
  }
  auto json = Airlock({"kit", "validate", "--json", missing});
  EXPECT_EQ(json.exit_code, 1);
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["valid"], false);
  ASSERT_EQ(j["errors"].size(), 1u);
  EXPECT_TRUE(Contains(std::string(j["errors"][0]), missing)) << json.out;

  // A directory that is not an OCI layout is named too.
  auto dir = Airlock({"kit", "validate", dir_.path()});
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_TRUE(Contains(dir.err, "not an OCI image layout")) << dir.err;
}

// ---- built-in agents ----

TEST_F(KitCliTest, ABuiltinAgentNameIsARef) {
  auto inspect = Airlock({"kit", "inspect", "claude"});
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  for (const char* want : {
           "Kit builtin:claude\n",
           "  name:        Claude Code\n",
           "  kind:        workload (built-in agent)\n",
           "  provides:    claude@",
           "build arg CLAUDE_VERSION",
           "    dev.airlock/agent@1\n",
           "      registry.npmjs.org:443\n",
           "      api.anthropic.com:443\n",
           "anthropic (env ANTHROPIC_API_KEY; injected for api.anthropic.com)",
       }) {
    EXPECT_TRUE(Contains(inspect.out, want)) << "want: " << want << "\n" << inspect.out;
  }
  EXPECT_FALSE(Contains(inspect.out, "not enforced")) << inspect.out;

  auto json = Airlock({"kit", "inspect", "--json", "claude", "--kit-arg", "version=2.0.0"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto j = nlohmann::json::parse(json.out);
  EXPECT_EQ(j["kits"][0]["ref"], "builtin:claude");
  EXPECT_EQ(j["descriptor"]["provides"], nlohmann::json{"claude@2.0.0"});
  EXPECT_TRUE(j["not_enforced"].empty()) << json.out;

  auto validate = Airlock({"kit", "validate", "codex", "builtin:qwen"});
  EXPECT_EQ(validate.exit_code, 1);  // two workloads do not compose
  EXPECT_TRUE(Contains(validate.err, "builtin:codex and builtin:qwen are both workload kits"))
      << validate.err;
  for (const char* name : {"claude", "codex", "copilot", "gemini", "opencode", "qwen"}) {
    auto one = Airlock({"kit", "validate", name});
    EXPECT_EQ(one.exit_code, 0) << one.err;
    EXPECT_EQ(one.out, std::string("builtin:") + name + ": valid workload kit\n");
    EXPECT_EQ(one.err, "");
  }

  auto diff = Airlock({"kit", "diff", "claude", "builtin:codex"});
  EXPECT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_TRUE(Contains(diff.out, "+ runtime: new allow api.openai.com:443")) << diff.out;

  auto unknown = Airlock({"kit", "inspect", "builtin:nope"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_TRUE(Contains(unknown.err, "kit builtin:nope: no built-in agent \"nope\"")) << unknown.err;
  EXPECT_TRUE(Contains(unknown.err, "claude, codex, copilot, gemini, opencode, qwen"))
      << unknown.err;
}

TEST_F(KitCliTest, AnExistingPathWinsOverABuiltinAgent) {
  std::string forge = ReadFileToString(Fixture("forge.yaml"));
  ASSERT_NE(Write("claude", forge), "");
  auto r = RunCommand({"/bin/sh", "-c",
                       "cd '" + dir_.path() + "' && exec '" + testing::BinaryPath("cli/airlock") +
                           "' kit validate claude"},
                      env_, "", 60);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "claude: valid mixin kit\n");
}

TEST_F(KitCliTest, EveryVerbHasHelp) {
  for (std::string verb : {"validate", "inspect", "diff"}) {
    auto r = Airlock({"kit", verb, "--help"});
    EXPECT_EQ(r.exit_code, 0) << verb;
    EXPECT_TRUE(Contains(r.out, "--kit-arg")) << r.out;
    EXPECT_TRUE(Contains(r.out, "--json")) << r.out;
  }
  auto diff = Airlock({"kit", "diff", "--help"});
  EXPECT_TRUE(Contains(diff.out, "--exit-code")) << diff.out;
  auto kit = Airlock({"kit", "--help"});
  EXPECT_EQ(kit.exit_code, 0);
  for (const char* verb : {"validate", "inspect", "diff"}) {
    EXPECT_TRUE(Contains(kit.out, verb)) << kit.out;
  }
}

}  // namespace
}  // namespace airlock
