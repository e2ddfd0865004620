#include "cli/kit_command.h"

#include <limits.h>
#include <stdlib.h>

#include <iostream>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "nlohmann/json.hpp"
#include "common/kit/capabilities.h"
#include "common/kit/descriptor.h"
#include "common/kit/document.h"
#include "common/kit/effective.h"
#include "common/kit/relations.h"
#include "common/kit/resolve.h"
#include "common/kit/surface.h"
#include "common/kit/validate.h"
#include "cli/daemons.h"
#include "common/agents/builtin_agents.h"
#include "common/client.h"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/vmm/v1/vmm.grpc.pb.h"

namespace airlock::cli {

namespace kit = airlock::kit;
using Json = nlohmann::ordered_json;
namespace vmm = airlock::vmm::v1;

namespace {

// RefIs says what a kit REF may be.
std::string RefIs() {
  return absl::StrCat(
      "a kit REF is an OCI image layout directory or a descriptor file, or the name of a "
      "built-in agent (",
      absl::StrJoin(agents::BuiltinAgentNames(), ", "), ")");
}

// ---- Flags the local verbs share ----

struct PipelineFlags {
  std::vector<std::string> kit_args;  // NAME=VALUE
  std::vector<std::string> env;       // NAME=VALUE
  bool json = false;
};

void AddPipelineFlags(CLI::App* cmd, PipelineFlags* f) {
  cmd->add_option("--kit-arg", f->kit_args,
                  "Kit arg NAME=VALUE, given to every kit that declares NAME (repeatable); an "
                  "arg no kit declares is an error")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-e,--env", f->env,
                  "Container variable NAME=VALUE that ${{ kit.env.NAME }} reads (repeatable); "
                  "the host's and the image's environment are not read")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--json", f->json, "Print JSON");
}

// ParsePairs reads NAME=VALUE flags; false (message printed) on bad input.
bool ParsePairs(const char* flag, const std::vector<std::string>& in,
                std::map<std::string, std::string>* out) {
  for (const std::string& kv : in) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "airlock: invalid " << flag << " \"" << kv << "\": expected NAME=VALUE\n";
      return false;
    }
    std::string name = kv.substr(0, eq);
    if (!out->emplace(name, kv.substr(eq + 1)).second) {
      std::cerr << "airlock: " << flag << " " << name << " is given twice\n";
      return false;
    }
  }
  return true;
}

// Parsed is the pipeline input from PipelineFlags.
struct Parsed {
  kit::ArgValues args;
  std::map<std::string, std::string> env;
};

// ParseFlags: false (message printed, usage exit code set) on bad input.
bool ParseFlags(const PipelineFlags& f, Parsed* out, int* exit_code) {
  if (ParsePairs("--kit-arg", f.kit_args, &out->args) && ParsePairs("--env", f.env, &out->env)) {
    return true;
  }
  *exit_code = 2;
  return false;
}

// ---- Loading and resolving ----

// LocalRef is the ref the library reads for a REF given to a local verb:
// the REF as given when a file or directory is there (so output names it
// as the user did), "builtin:NAME" for a built-in agent; NOT_FOUND saying
// what a REF may be when it is neither (the library's own error would only
// say the file cannot be read).
absl::StatusOr<std::string> LocalRef(const std::string& ref) {
  absl::StatusOr<std::string> path = KitRefPath(ref);
  if (!path.ok()) return path.status();
  // A built-in agent; or a file whose name only looks like one, which the
  // library must read as the path it is.
  if (absl::StartsWith(*path, agents::kBuiltinRefPrefix) ||
      absl::StartsWith(ref, agents::kBuiltinRefPrefix)) {
    return *path;
  }
  return ref;
}

absl::StatusOr<std::vector<std::string>> LocalRefs(const std::vector<std::string>& refs) {
  std::vector<std::string> out;
  for (const std::string& ref : refs) {
    absl::StatusOr<std::string> local = LocalRef(ref);
    if (!local.ok()) return local.status();
    out.push_back(*std::move(local));
  }
  return out;
}

// Resolve runs the pipeline over `refs` (ResolveKits), which keeps each
// kit's published form for display.
absl::StatusOr<kit::ResolvedKits> Resolve(const std::vector<std::string>& refs,
                                          const kit::ArgValues& args,
                                          const std::map<std::string, std::string>& env) {
  absl::StatusOr<std::vector<std::string>> local = LocalRefs(refs);
  if (!local.ok()) return local.status();
  return kit::ResolveKits(*local, args, env);
}

// Validate checks `refs` by the rules of their form (ValidateKits).
absl::StatusOr<kit::Validation> Validate(const std::vector<std::string>& refs,
                                         const kit::ArgValues& args,
                                         const std::map<std::string, std::string>& env) {
  absl::StatusOr<std::vector<std::string>> local = LocalRefs(refs);
  if (!local.ok()) return local.status();
  return kit::ValidateKits(*local, args, env);
}

// KindOrigin says where a kit came from, after its kind.
const char* KindOrigin(const kit::PublishedKit& v) {
  if (v.from_oci_layout) return " (OCI image layout)";
  if (absl::StartsWith(v.ref, agents::kBuiltinRefPrefix)) return " (built-in agent)";
  return " (descriptor file)";
}

// ErrorLines splits a pipeline error into one line per problem, each
// keeping its context: "REF: what (2 errors):\n  a: x\n  b: y" becomes
// "REF: what: a: x" and "REF: what: b: y".
std::vector<std::string> ErrorLines(absl::string_view message) {
  std::vector<std::string> lines = absl::StrSplit(message, '\n', absl::SkipWhitespace());
  if (lines.size() <= 1) return {std::string(message)};
  absl::string_view head = absl::StripSuffix(lines[0], ":");
  if (size_t paren = head.rfind(" (");
      paren != absl::string_view::npos && absl::EndsWith(head, " errors)")) {
    head = head.substr(0, paren);
  }
  std::vector<std::string> out;
  for (size_t i = 1; i < lines.size(); ++i) {
    out.push_back(absl::StrCat(head, ": ", absl::StripLeadingAsciiWhitespace(lines[i])));
  }
  return out;
}

std::string SkipText(const kit::KitSkip& s) {
  std::string out = s.skipped.path;
  if (!s.skipped.name.empty()) absl::StrAppend(&out, " ", kit::Quote(s.skipped.name));
  absl::StrAppend(&out, " skipped: ", s.skipped.reason);
  return out;
}

// ---- JSON ----

Json NetworkJson(const kit::NetworkSurface& n) {
  return {{"allow_hosts", n.allow_hosts},
          {"deny_hosts", n.deny_hosts},
          {"http_allow", n.http_allow},
          {"http_deny", n.http_deny}};
}

Json CredentialsJson(const std::map<std::string, kit::CredentialSurface>& creds) {
  Json out = Json::object();
  for (const auto& [service, c] : creds) {
    out[service] = {{"env_name", c.env_name}, {"inject_domains", c.inject_domains}};
  }
  return out;
}

Json SurfaceJson(const kit::Surface& s) {
  return {{"install", NetworkJson(s.install)},
          {"runtime", NetworkJson(s.runtime)},
          {"credentials",
           {{"install", CredentialsJson(s.credentials_install)},
            {"runtime", CredentialsJson(s.credentials_runtime)}}},
          {"ssh_agent", s.ssh_agent},
          {"storage", s.storage_paths},
          {"host_mounts", s.host_mount_paths},
          {"skills", s.skills_paths},
          {"skills_write", s.skills_write_paths},
          {"ports", s.ports},
          {"usb", s.usb},
          {"privileged", s.privileged},
          {"services", s.OtherServices()}};
}

// ChangesJson lists diff entries as {"category", "phase", "detail"}.
Json ChangesJson(const std::vector<kit::SurfaceChange>& changes) {
  Json out = Json::array();
  for (const kit::SurfaceChange& c : changes) {
    out.push_back({{"category", c.category}, {"phase", c.phase}, {"detail", c.detail}});
  }
  return out;
}

Json InspectJson(const kit::ResolvedKits& k) {
  Json kits = Json::array();
  for (const kit::PublishedKit& v : k.kits) {
    kits.push_back({{"ref", v.ref},
                    {"kind", kit::KitKindName(v.published.kind)},
                    {"display_name", v.published.display_name}});
  }
  Json skipped = Json::array();
  for (const kit::KitSkip& s : k.skipped) {
    skipped.push_back({{"ref", s.ref},
                       {"path", s.skipped.path},
                       {"name", s.skipped.name},
                       {"members", s.skipped.members},
                       {"rejected", s.skipped.rejected},
                       {"reason", s.skipped.reason}});
  }
  Json args = Json::object();
  for (const auto& [ref, values] : k.args) args[ref] = values;
  return {{"kits", kits},
          {"order", k.composition.order},
          {"descriptor", Json::parse(kit::ToCanonicalJson(k.composition.merged.document))},
          {"surface", SurfaceJson(k.surface)},
          {"not_enforced", k.not_enforced},
          {"skipped", skipped},
          {"args", args},
          {"env_exports", k.env_exports},
          {"warnings", k.warnings}};
}

// ---- Text ----

// List prints `label:` and the items under it, nothing when empty.
void List(std::ostream& out, const std::string& indent, const std::string& label,
          const std::vector<std::string>& items) {
  if (items.empty()) return;
  out << indent << label << ":\n";
  for (const std::string& i : items) out << indent << "  " << i << "\n";
}

std::string TypeNote(const std::string& type) {
  if (!kit::AcceptedTypes().count(type)) return "  (not provided by this host)";
  if (!kit::IsEnforcedType(type)) return "  (not enforced)";
  return "";
}

std::string EntryLine(const kit::CapabilityEntry& e) {
  std::string line = e.type;
  if (e.optional) absl::StrAppend(&line, "  optional");
  if (!e.name.empty()) absl::StrAppend(&line, "  ", kit::Quote(e.name));
  return line + TypeNote(e.type);
}

std::string ArgLine(const kit::PublishedKit& v, const std::string& name, const kit::Arg& a,
                    const kit::ResolvedKits& r) {
  std::string line = name;
  std::optional<std::string> value;
  if (a.build_phase()) {
    if (auto it = v.build_args.find(name); it != v.build_args.end()) {
      value = it->second;
    } else if (!v.from_oci_layout) {
      value = a.default_value;
    }
  } else if (auto ref = r.args.find(v.ref); ref != r.args.end()) {
    if (auto it = ref->second.find(name); it != ref->second.end()) value = it->second;
  }
  if (value) absl::StrAppend(&line, " = ", kit::Quote(*value));
  std::vector<std::string> facts;
  if (a.build_phase()) {
    facts.push_back(
        absl::StrCat("build arg ", a.build_arg, v.from_oci_layout ? ", fixed when published" : ""));
  }
  if (a.required) facts.push_back("required");
  if (a.default_value) facts.push_back("default " + kit::Quote(*a.default_value));
  if (!a.env.empty()) facts.push_back("env " + a.env);
  if (!a.enum_values.empty()) {
    std::vector<std::string> quoted;
    for (const std::string& e : a.enum_values) quoted.push_back(kit::Quote(e));
    facts.push_back("one of " + absl::StrJoin(quoted, ", "));
  }
  if (a.pattern) facts.push_back("pattern " + *a.pattern);
  if (!facts.empty()) absl::StrAppend(&line, "  (", absl::StrJoin(facts, "; "), ")");
  if (!a.description.empty()) absl::StrAppend(&line, "  ", a.description);
  return line;
}

// EntryDetails prints what an agent or lifecycle entry runs: the default
// command and image, and each hook's command as written.
void EntryDetails(std::ostream& out, const kit::CapabilityEntry& e) {
  if (const auto* a = e.As<kit::AgentConfig>()) {
    out << "      command: " << absl::StrJoin(a->command, " ") << "\n";
    if (!a->image.empty()) out << "      installed into image: " << a->image << "\n";
  }
  if (const auto* l = e.As<kit::LifecycleConfig>()) {
    auto hooks = [&](const char* phase, const std::vector<kit::Hook>& list) {
      for (const kit::Hook& h : list) {
        out << "      " << phase << " hook" << (h.user.empty() ? "" : " as user " + h.user)
            << ":\n";
        std::string text = h.command.size() == 3 && h.command[0] == "sh" && h.command[1] == "-c"
                               ? h.command[2]
                               : absl::StrJoin(h.command, " ");
        for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
          out << "        " << line << "\n";
        }
      }
    };
    hooks("install", l->install);
    hooks("startup", l->startup);
  }
}


void PrintKit(std::ostream& out, const kit::PublishedKit& v, const kit::ResolvedKits& r) {
  const kit::Descriptor& d = v.published;
  out << "Kit " << v.ref << "\n";
  if (!d.display_name.empty()) out << "  name:        " << d.display_name << "\n";
  out << "  kind:        " << kit::KitKindName(d.kind) << KindOrigin(v) << "\n";
  std::vector<std::string> provides, needs, integrates, conflicts;
  for (const kit::Provide& p : d.provides) provides.push_back(p.text);
  for (const kit::Requirement& q : d.requirements) needs.push_back(q.text);
  for (const kit::Requirement& q : d.integrates) integrates.push_back(q.text);
  for (const std::string& c : d.conflicts) conflicts.push_back(kit::ShortName(c));
  if (!provides.empty()) out << "  provides:    " << absl::StrJoin(provides, ", ") << "\n";
  if (!needs.empty()) out << "  requires:    " << absl::StrJoin(needs, ", ") << "\n";
  if (!integrates.empty()) out << "  integrates:  " << absl::StrJoin(integrates, ", ") << "\n";
  if (!conflicts.empty()) out << "  conflicts:   " << absl::StrJoin(conflicts, ", ") << "\n";
  std::vector<std::string> args;
  for (const auto& [name, a] : d.args) args.push_back(ArgLine(v, name, a, r));
  List(out, "  ", "args", args);
  if (!d.capabilities.empty()) out << "  capabilities:\n";
  for (const kit::CapabilityItem& item : d.capabilities) {
    if (const auto* e = std::get_if<kit::CapabilityEntry>(&item)) {
      out << "    " << EntryLine(*e) << "\n";
      EntryDetails(out, *e);
      continue;
    }
    const auto& g = std::get<kit::CapabilityGroup>(item);
    out << "    group " << kit::Quote(g.name) << (g.optional ? "  optional" : "") << "\n";
    for (const kit::CapabilityEntry& m : g.members) out << "      " << EntryLine(m) << "\n";
  }
  std::vector<std::string> skipped;
  for (const kit::KitSkip& s : r.skipped) {
    if (s.ref == v.ref) skipped.push_back(SkipText(s));
  }
  List(out, "  ", "skipped", skipped);
}

std::string CredentialText(const std::string& service, const kit::CredentialSurface& c) {
  std::vector<std::string> facts;
  if (!c.env_name.empty()) facts.push_back("env " + c.env_name);
  if (!c.inject_domains.empty()) {
    facts.push_back("injected for " + absl::StrJoin(c.inject_domains, ", "));
  }
  return facts.empty() ? service : absl::StrCat(service, " (", absl::StrJoin(facts, "; "), ")");
}

void PrintPhase(std::ostream& out, const char* phase, const kit::NetworkSurface& n,
                const std::map<std::string, kit::CredentialSurface>& creds) {
  std::vector<std::string> credentials;
  for (const auto& [service, c] : creds) credentials.push_back(CredentialText(service, c));
  if (n.allow_hosts.empty() && n.deny_hosts.empty() && n.http_allow.empty() &&
      n.http_deny.empty() && credentials.empty()) {
    out << "  " << phase << ": nothing\n";
    return;
  }
  out << "  " << phase << ":\n";
  List(out, "    ", "allow hosts", n.allow_hosts);
  List(out, "    ", "deny hosts", n.deny_hosts);
  List(out, "    ", "HTTP allow", n.http_allow);
  List(out, "    ", "HTTP deny", n.http_deny);
  List(out, "    ", "credentials", credentials);
}

void PrintInspect(std::ostream& out, const kit::ResolvedKits& k) {
  for (const kit::PublishedKit& v : k.kits) {
    PrintKit(out, v, k);
    out << "\n";
  }
  if (k.kits.size() > 1) {
    out << "Composition: " << absl::StrJoin(k.composition.order, ", ") << " (in this order)\n";
    std::vector<std::string> provides;
    for (const kit::Provide& p : k.composition.merged.provides) provides.push_back(p.text);
    if (!provides.empty()) out << "  provides:    " << absl::StrJoin(provides, ", ") << "\n";
    out << "\n";
  }
  const kit::Surface& s = k.surface;
  out << "Grant surface:\n";
  PrintPhase(out, "install", s.install, s.credentials_install);
  PrintPhase(out, "runtime", s.runtime, s.credentials_runtime);
  List(out, "  ", "ssh-agent", s.ssh_agent);
  List(out, "  ", "storage", s.storage_paths);
  List(out, "  ", "host mounts", s.host_mount_paths);
  List(out, "  ", "skills stores", s.skills_paths);
  List(out, "  ", "skills stores writable", s.skills_write_paths);
  List(out, "  ", "ports", s.ports);
  List(out, "  ", "USB devices", s.usb);
  out << "  privileged: " << (s.privileged ? "yes" : "no") << "\n";
  List(out, "  ", "other services", s.OtherServices());
  if (!k.not_enforced.empty()) {
    out << "\nRecorded but not enforced by Airlock:\n";
    for (const std::string& t : k.not_enforced) out << "  " << t << "\n";
  }
  if (!k.env_exports.empty()) {
    out << "\nContainer environment from args:\n";
    for (const auto& [name, value] : k.env_exports) {
      out << "  " << name << "=" << value << "\n";
    }
  }
}

void Fail(const absl::Status& s, int* exit_code) {
  std::cerr << "airlock: " << s.message() << "\n";
  if (absl::StrContains(s.message(), "final container environment has no variable")) {
    std::cerr << "airlock: give the kit's container environment with --env NAME=VALUE\n";
  }
  *exit_code = 1;
}

}  // namespace

void AddKitCommand(CLI::App& app, int* exit_code) {
  CLI::App* kitcmd = app.add_subcommand(
      "kit",
      "Sandbox Kits: check, show and compare them; upgrade a sandbox's kits and approve "
      "what widens its grant (REF: an OCI image layout directory, a descriptor file or a "
      "built-in agent such as claude)");
  kitcmd->require_subcommand(1);

  // validate
  struct ValidateFlags {
    std::vector<std::string> refs;
    PipelineFlags pipeline;
  };
  auto* vf = new ValidateFlags();
  CLI::App* validate = kitcmd->add_subcommand(
      "validate",
      "Check kits by the rules of their form: a descriptor file as authored, an OCI layout as "
      "published; several REFs also as one composition (exit 1 when invalid)");
  validate
      ->add_option("refs", vf->refs,
                   "REF...: OCI image layout directories, descriptor files or built-in agents")
      ->required();
  AddPipelineFlags(validate, &vf->pipeline);
  validate->footer(
      "One REF needs no values: required args, ${{ kit.env.NAME }} and capability types this\n"
      "host does not provide are for sandbox creation (a warning says what it will do); a\n"
      "--kit-arg given is checked against its declaration. Several REFs are composed as a\n"
      "sandbox would, which needs their required args and --env variables.\n"
      "Example: airlock kit validate kit.yaml --kit-arg model=swift-2");
  validate->callback([=] {
    Parsed p;
    if (!ParseFlags(vf->pipeline, &p, exit_code)) return;
    auto v = Validate(vf->refs, p.args, p.env);
    if (!v.ok()) {
      *exit_code = 1;
      if (vf->pipeline.json) {
        Json out = {{"valid", false},
                    {"errors", ErrorLines(v.status().message())},
                    {"warnings", Json::array()}};
        std::cout << out.dump(2) << "\n";
      } else {
        Fail(v.status(), exit_code);
      }
      return;
    }
    if (vf->pipeline.json) {
      Json out = {{"valid", true}, {"errors", Json::array()}, {"warnings", v->warnings}};
      std::cout << out.dump(2) << "\n";
      return;
    }
    for (const kit::ValidatedKit& k : v->kits) {
      std::cout << k.ref << ": valid " << kit::KitKindName(k.descriptor.kind) << " kit\n";
    }
    if (!v->order.empty()) {
      std::cout << "composition: valid (" << absl::StrJoin(v->order, ", ") << ")\n";
    }
    for (const std::string& w : v->warnings) std::cerr << "warning: " << w << "\n";
  });

  // inspect
  struct InspectFlags {
    std::vector<std::string> refs;
    PipelineFlags pipeline;
  };
  auto* inf = new InspectFlags();
  CLI::App* inspect =
      kitcmd->add_subcommand("inspect",
                             "Show kits and what they grant: args, capabilities (and which are not "
                             "enforced), skipped entries, and the grant surface of the whole");
  inspect
      ->add_option("refs", inf->refs,
                   "REF...: OCI image layout directories, descriptor files or built-in agents")
      ->required();
  AddPipelineFlags(inspect, &inf->pipeline);
  inspect->footer(
      "--json prints the effective descriptor (\"descriptor\") and its grant surface "
      "(\"surface\").\nExample: airlock kit inspect quill.yaml forge-oci --kit-arg apiPort=8181");
  inspect->callback([=] {
    Parsed p;
    if (!ParseFlags(inf->pipeline, &p, exit_code)) return;
    auto r = Resolve(inf->refs, p.args, p.env);
    if (!r.ok()) return Fail(r.status(), exit_code);
    if (inf->pipeline.json) {
      std::cout << InspectJson(*r).dump(2) << "\n";
      return;
    }
    PrintInspect(std::cout, *r);
    for (const std::string& w : r->warnings) std::cerr << "warning: " << w << "\n";
  });

  // diff
  struct DiffFlags {
    std::string old_ref, new_ref;
    PipelineFlags pipeline;
    bool exit_code = false;
  };
  auto* df = new DiffFlags();
  CLI::App* diff = kitcmd->add_subcommand(
      "diff",
      "Compare the grant surface of two versions of a kit: what NEW grants beyond OLD "
      "(widenings, which need approval) and what it drops (narrowings)");
  diff->add_option("old", df->old_ref, "OLD: the granted version (layout directory or file)")
      ->required();
  diff->add_option("new", df->new_ref, "NEW: the proposed version (layout directory or file)")
      ->required();
  AddPipelineFlags(diff, &df->pipeline);
  diff->add_flag("--exit-code", df->exit_code,
                 "Exit 1 when NEW widens the grant surface (as git diff --exit-code)");
  diff->footer(
      "An arg goes to whichever side declares it. --json lists each widening and narrowing as\n"
      "{\"category\", \"phase\", \"detail\"}: category names the surface field (e.g.\n"
      "network.runtime.allow, network.runtime.http.deny-removed, credentials.install, ports),\n"
      "phase is install, runtime or \"\", detail is the line the text output prints.\n"
      "Example: airlock kit diff forge-3.2.yaml forge-oci --exit-code");
  diff->callback([=] {
    Parsed p;
    if (!ParseFlags(df->pipeline, &p, exit_code)) return;
    auto local = LocalRefs({df->old_ref, df->new_ref});
    if (!local.ok()) return Fail(local.status(), exit_code);
    auto diffed = kit::DiffKits({(*local)[0]}, {(*local)[1]}, p.args, p.env);
    if (!diffed.ok()) return Fail(diffed.status(), exit_code);
    const kit::SurfaceDiff& d = *diffed;
    if (df->pipeline.json) {
      Json out = {{"widenings", ChangesJson(d.widened)}, {"narrowings", ChangesJson(d.narrowed)}};
      std::cout << out.dump(2) << "\n";
    } else if (d.widenings.empty() && d.narrowings.empty()) {
      std::cout << "no change in the grant surface\n";
    } else {
      if (!d.widenings.empty()) std::cout << "widenings:\n";
      for (const std::string& w : d.widenings) std::cout << "+ " << w << "\n";
      if (!d.narrowings.empty()) std::cout << "narrowings:\n";
      for (const std::string& n : d.narrowings) std::cout << "- " << n << "\n";
    }
    if (df->exit_code && d.widens()) *exit_code = 1;
  });

  // ---- upgrade, holds, approve: a sandbox's kits, through the gate ----
  struct UpgradeFlags {
    std::string name;
    std::vector<std::string> kits;
    std::vector<std::string> kit_args;
    bool json = false;
  };
  auto up = std::make_shared<UpgradeFlags>();
  CLI::App* upgrade = kitcmd->add_subcommand(
      "upgrade", "Move a sandbox to new kit versions or args, held for approval if they widen");
  upgrade->add_option("name", up->name, "Sandbox name")->required();
  upgrade->add_option("--kit", up->kits,
                      "Every kit the sandbox should run (as at create): an OCI image layout "
                      "directory or a descriptor file")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  upgrade->add_option("--kit-arg", up->kit_args, "Kit arg NAME=VALUE (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  upgrade->add_flag("--json", up->json, "Print JSON");
  upgrade->footer(
      "An update within what the sandbox was granted applies at once: network rules and\n"
      "credentials now; volumes, files and startup hooks at its next start. One that widens\n"
      "anything (a new allow, a removed deny, a new credential, port, volume, privileged, a\n"
      "changed config) changes nothing, lists the widenings and exits 3; approve it with\n"
      "`airlock kit approve HOLD_ID`.\n"
      "Example: airlock kit upgrade my-agent --kit ./agent --kit ./gh-2.61");
  upgrade->callback([=] {
    std::map<std::string, std::string> args;
    if (!ParsePairs("--kit-arg", up->kit_args, &args)) return void(*exit_code = 2);
    vmm::UpdateKitsRequest req;
    req.set_name(up->name);
    for (const auto& k : up->kits) {
      auto ref = KitRefPath(k);
      if (!ref.ok()) return Fail(ref.status(), exit_code);
      req.add_kits(*ref);
    }
    for (const auto& [k, v] : args) (*req.mutable_kit_args())[k] = v;
    auto channel = ChannelTo("vmmd", exit_code);
    if (!channel) return;
    auto stub = vmm::Vmm::NewStub(channel);
    grpc::ClientContext ctx;
    vmm::UpdateKitsResponse resp;
    grpc::Status s = stub->UpdateKits(&ctx, req, &resp);
    if (!s.ok()) return Fail(absl::Status(absl::StatusCode::kUnknown, s.error_message()), exit_code);
    if (up->json) {
      std::cout << Json{{"sandbox", up->name},
                        {"held", !resp.hold_id().empty()},
                        {"hold_id", resp.hold_id()},
                        {"widenings", std::vector<std::string>(resp.widenings().begin(),
                                                               resp.widenings().end())},
                        {"narrowings", std::vector<std::string>(resp.narrowings().begin(),
                                                                resp.narrowings().end())}}
                       .dump(2)
                << "\n";
    } else if (!resp.hold_id().empty()) {
      std::cout << "held: the update widens what " << up->name << " was granted:\n";
      for (const auto& w : resp.widenings()) std::cout << "+ " << w << "\n";
      std::cout << "nothing changed; to grant it: airlock kit approve " << resp.hold_id()
                << "\n";
    } else {
      std::cout << up->name << ": kits updated\n";
      for (const auto& n : resp.narrowings()) std::cout << "- " << n << "\n";
    }
    if (!resp.hold_id().empty()) *exit_code = 3;
  });

  auto holds_name = std::make_shared<std::string>();
  auto holds_json = std::make_shared<bool>(false);
  CLI::App* holds = kitcmd->add_subcommand("holds", "List kit updates held for approval");
  holds->add_option("name", *holds_name, "Only this sandbox's");
  holds->add_flag("--json", *holds_json, "Print JSON");
  holds->callback([=] {
    auto channel = ChannelTo("policyd", exit_code);
    if (!channel) return;
    auto stub = airlock::policy::v1::Policy::NewStub(channel);
    grpc::ClientContext ctx;
    airlock::policy::v1::ListHoldsRequest req;
    req.set_sandbox(*holds_name);
    airlock::policy::v1::ListHoldsResponse resp;
    grpc::Status s = stub->ListHolds(&ctx, req, &resp);
    if (!s.ok()) return Fail(absl::Status(absl::StatusCode::kUnknown, s.error_message()), exit_code);
    if (*holds_json) {
      Json arr = Json::array();
      for (const auto& h : resp.holds()) {
        std::vector<std::string> kits;
        for (const auto& k : h.kits()) kits.push_back(k.ref());
        arr.push_back({{"id", h.id()},
                       {"sandbox", h.sandbox()},
                       {"kits", kits},
                       {"widenings", std::vector<std::string>(h.widenings().begin(),
                                                              h.widenings().end())},
                       {"created_at", h.created_at()}});
      }
      std::cout << arr.dump(2) << "\n";
      return;
    }
    if (resp.holds().empty()) std::cout << "no held kit updates\n";
    for (const auto& h : resp.holds()) {
      std::cout << h.id() << "  " << h.sandbox() << "\n";
      for (const auto& w : h.widenings()) std::cout << "  + " << w << "\n";
    }
  });

  auto approve_id = std::make_shared<std::string>();
  auto approve_json = std::make_shared<bool>(false);
  CLI::App* approve = kitcmd->add_subcommand(
      "approve", "Grant a held kit update (its widenings) and apply it to the sandbox");
  approve->add_option("hold_id", *approve_id, "HOLD_ID from `airlock kit upgrade` or `holds`")
      ->required();
  approve->add_flag("--json", *approve_json, "Print JSON");
  approve->callback([=] {
    // vmmd asks policyd to approve and applies exactly what was held.
    auto channel = ChannelTo("vmmd", exit_code);
    if (!channel) return;
    auto stub = vmm::Vmm::NewStub(channel);
    grpc::ClientContext ctx;
    vmm::UpdateKitsRequest req;
    req.set_approve_hold(*approve_id);
    vmm::UpdateKitsResponse resp;
    grpc::Status s = stub->UpdateKits(&ctx, req, &resp);
    if (!s.ok()) {
      if (*approve_json) {
        std::cout << Json{{"approved", false}, {"error", s.error_message()}}.dump(2) << "\n";
      }
      return Fail(absl::Status(absl::StatusCode::kUnknown, s.error_message()), exit_code);
    }
    std::vector<std::string> widenings(resp.widenings().begin(), resp.widenings().end());
    const std::string& name = resp.sandbox().spec().name();
    if (*approve_json) {
      std::cout << Json{{"approved", true}, {"sandbox", name}, {"widenings", widenings}}.dump(2)
                << "\n";
      return;
    }
    std::cout << "approved and applied to " << name << ":\n";
    for (const auto& w : widenings) std::cout << "+ " << w << "\n";
  });
}

absl::StatusOr<std::string> KitRefPath(const std::string& ref) {
  // An existing path always wins over a built-in agent of the same name.
  char real[PATH_MAX];
  if (realpath(ref.c_str(), real) != nullptr) return std::string(real);
  absl::string_view name = ref;
  bool prefixed = absl::ConsumePrefix(&name, agents::kBuiltinRefPrefix);
  if (agents::BuiltinAgentDescriptor(name)) return agents::BuiltinAgentRef(name);
  if (prefixed) {
    return absl::NotFoundError(
        absl::StrCat("kit ", ref, ": no built-in agent \"", name, "\"; ", RefIs()));
  }
  return absl::NotFoundError(absl::StrCat("kit ", ref, ": no such file or directory; ", RefIs()));
}

}  // namespace airlock::cli
