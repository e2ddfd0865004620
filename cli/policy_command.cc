#include "cli/policy_command.h"

#include <iostream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "absl/strings/str_split.h"
#include "cli/daemons.h"
#include "cli/table.h"
#include "common/client.h"
#include "nlohmann/json.hpp"
#include "protos/policy/v1/policy.grpc.pb.h"
#include "protos/proxy/v1/proxy.grpc.pb.h"

namespace airlock::cli {

namespace pb = airlock::policy::v1;

namespace {

std::unique_ptr<pb::Policy::Stub> ConnectPolicy(int* exit_code) {
  auto channel = ChannelTo("policyd", exit_code);
  return channel ? pb::Policy::NewStub(channel) : nullptr;
}

bool Failed(const grpc::Status& s, int* exit_code) {
  if (s.ok()) return false;
  std::cerr << "airlock: " << s.error_message() << "\n";
  *exit_code = 1;
  return true;
}

std::string Scope(const pb::Rule& r) { return r.sandbox().empty() ? "global" : r.sandbox(); }

nlohmann::ordered_json RuleJson(const pb::Rule& r) {
  return {{"id", r.id()},
          {"action", r.action() == pb::ALLOW ? "allow" : "deny"},
          {"resource", r.resource()},
          {"methods", std::vector<std::string>(r.methods().begin(), r.methods().end())},
          {"paths", std::vector<std::string>(r.paths().begin(), r.paths().end())},
          {"scope", Scope(r)},
          {"origin", r.origin()}};
}

// The "network" word sbx puts after the verb: required, so later kinds can
// be added.
CLI::App* Kind(CLI::App* verb) {
  return verb->add_subcommand("network", "Network rules")->fallthrough();
}

struct RuleFlags {
  std::string sandbox;
  bool global = false;
  std::vector<std::string> resources;
  std::string methods;
  std::vector<std::string> paths;
};

void AddAllowDeny(CLI::App* policy, const char* verb, pb::Action action, int* exit_code) {
  auto* f = new RuleFlags();
  CLI::App* cmd = policy->add_subcommand(
      verb, std::string(action == pb::ALLOW ? "Allow" : "Deny") + " network destinations");
  cmd->require_subcommand(1);
  CLI::App* net = Kind(cmd);
  net->add_option("--sandbox", f->sandbox, "Only for this sandbox (default: global)");
  net->add_flag("-g,--global", f->global, "For every sandbox (the default)");
  net->add_option("resources", f->resources,
                  "example.com, *.example.com, **.example.com, host:port, IP, CIDR, ** "
                  "(several, or comma-separated)")
      ->required();
  net->add_option("--method", f->methods, "HTTP methods: GET,POST or ANY");
  net->add_option("--path", f->paths, "HTTP path glob starting with / (repeatable)")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  net->callback([=] {
    if (f->global && !f->sandbox.empty()) {
      std::cerr << "airlock: give --sandbox or -g, not both\n";
      return void(*exit_code = 2);
    }
    pb::AddRulesRequest req;
    for (const auto& arg : f->resources) {
      for (absl::string_view res : absl::StrSplit(arg, ',', absl::SkipWhitespace())) {
        pb::Rule* r = req.add_rules();
        r->set_action(action);
        r->set_resource(std::string(res));
        r->set_sandbox(f->sandbox);
        for (absl::string_view m : absl::StrSplit(f->methods, ',', absl::SkipEmpty())) {
          r->add_methods(std::string(m));
        }
        for (const auto& p : f->paths) r->add_paths(p);
      }
    }
    auto stub = ConnectPolicy(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::AddRulesResponse resp;
    if (Failed(stub->AddRules(&ctx, req, &resp), exit_code)) {
      *exit_code = 2;
      return;
    }
    for (const auto& r : resp.rules()) std::cout << r.id() << "\n";
  });
}

}  // namespace

void AddPolicyCommand(CLI::App& app, int* exit_code) {
  CLI::App* policy = app.add_subcommand("policy", "Manage network policy (default deny)");
  policy->require_subcommand(1);
  AddAllowDeny(policy, "allow", pb::ALLOW, exit_code);
  AddAllowDeny(policy, "deny", pb::DENY, exit_code);

  // rm
  auto* rm_resource = new std::string();
  auto* rm_id = new std::string();
  auto* rm_sandbox = new std::string();
  CLI::App* rm = policy->add_subcommand("rm", "Remove network rules");
  rm->require_subcommand(1);
  CLI::App* rm_net = Kind(rm);
  rm_net->add_option("--resource", *rm_resource, "Remove the rules for this resource");
  rm_net->add_option("--id", *rm_id, "Remove the rule with this id");
  rm_net->add_option("--sandbox", *rm_sandbox, "Scope of --resource (default: global)");
  rm_net->callback([=] {
    if (rm_resource->empty() == rm_id->empty()) {
      std::cerr << "airlock: give --resource or --id\n";
      return void(*exit_code = 2);
    }
    auto stub = ConnectPolicy(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::RemoveRulesRequest req;
    req.set_id(*rm_id);
    req.set_resource(*rm_resource);
    req.set_sandbox(*rm_sandbox);
    pb::RemoveRulesResponse resp;
    if (Failed(stub->RemoveRules(&ctx, req, &resp), exit_code)) return;
    std::cout << "removed " << resp.removed() << " rule" << (resp.removed() == 1 ? "" : "s")
              << "\n";
  });

  // ls
  auto* ls_sandbox = new std::string();
  CLI::App* ls = policy->add_subcommand("ls", "List rules (global, plus a sandbox's own)");
  ls->add_option("--sandbox", *ls_sandbox, "Also this sandbox's rules");
  auto* ls_json = ls->add_flag("--json", "Print JSON");
  ls->callback([=] {
    auto stub = ConnectPolicy(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::ListRulesRequest req;
    req.set_sandbox(*ls_sandbox);
    pb::ListRulesResponse resp;
    if (Failed(stub->ListRules(&ctx, req, &resp), exit_code)) return;
    if (ls_json->count()) {
      nlohmann::ordered_json out = {{"preset", resp.preset()}, {"rules", nlohmann::ordered_json::array()}};
      for (const auto& r : resp.rules()) out["rules"].push_back(RuleJson(r));
      std::cout << out.dump(2) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : resp.rules()) {
      rows.push_back({r.id(), r.action() == pb::ALLOW ? "allow" : "deny", r.resource(),
                      r.methods().empty() ? "-" : absl::StrJoin(r.methods(), ","),
                      r.paths().empty() ? "-" : absl::StrJoin(r.paths(), ","), Scope(r),
                      r.origin()});
    }
    PrintTable(std::cout, {"ID", "ACTION", "RESOURCE", "METHODS", "PATHS", "SCOPE", "ORIGIN"},
               rows);
  });

  // check
  auto* ck_sandbox = new std::string();
  auto* ck_method = new std::string();
  auto* ck_target = new std::string();
  CLI::App* check = policy->add_subcommand("check", "Say which rule decides a destination and why");
  check->require_subcommand(1);
  CLI::App* ck_net = Kind(check);
  ck_net->add_option("--sandbox", *ck_sandbox, "Decide for this sandbox");
  ck_net->add_option("--method", *ck_method, "HTTP method (makes the check an HTTP request)");
  ck_net->add_option("target", *ck_target, "host, host:port, https://host/path or an IP")
      ->required();
  auto* ck_json = ck_net->add_flag("--json", "Print JSON");
  ck_net->callback([=] {
    auto stub = ConnectPolicy(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::CheckRequest req;
    req.set_sandbox(*ck_sandbox);
    req.set_target(*ck_target);
    req.set_method(*ck_method);
    pb::CheckResponse resp;
    if (Failed(stub->Check(&ctx, req, &resp), exit_code)) {
      *exit_code = 2;
      return;
    }
    bool allowed = resp.action() == pb::ALLOW;
    if (ck_json->count()) {
      nlohmann::ordered_json out = {{"verdict", allowed ? "allow" : "deny"},
                                    {"reason", resp.reason()}};
      if (resp.has_rule()) out["rule"] = RuleJson(resp.rule());
      std::cout << out.dump(2) << "\n";
    } else {
      std::cout << (allowed ? "allow" : "deny") << ": " << resp.reason() << "\n";
    }
    // Exit 0 allowed, 1 denied, as grep does for a match.
    if (!allowed) *exit_code = 1;
  });

  // log
  auto* lg_sandbox = new std::string();
  auto* lg_limit = new uint32_t(100);
  CLI::App* log = policy->add_subcommand(
      "log", "Show proxyd's decisions: time, sandbox, destination, rule, verdict, path");
  log->add_option("--sandbox", *lg_sandbox, "Only this sandbox's decisions");
  log->add_option("--limit", *lg_limit, "How many recent decisions to show first (default 100)")
      ->check(CLI::Range(1u, 1000000u));
  auto* lg_follow = log->add_flag("-f,--follow", "Keep printing new decisions as they happen");
  auto* lg_json = log->add_flag("--json", "Print one JSON object per line");
  log->callback([=] {
    auto channel = ChannelTo("proxyd", exit_code);
    if (!channel) return;
    auto stub = airlock::proxy::v1::Proxy::NewStub(channel);
    grpc::ClientContext ctx;
    airlock::proxy::v1::DecisionLogRequest req;
    req.set_sandbox(*lg_sandbox);
    req.set_limit(*lg_limit);
    req.set_follow(lg_follow->count() > 0);
    auto reader = stub->DecisionLog(&ctx, req);
    airlock::proxy::v1::Decision dec;
    bool header = false;
    while (reader->Read(&dec)) {
      std::string via = dec.via() == airlock::proxy::v1::FORWARD       ? "forward"
                        : dec.via() == airlock::proxy::v1::TRANSPARENT ? "transparent"
                                                                       : "dns";
      std::string verdict = dec.verdict() == airlock::proxy::v1::ALLOW ? "allow" : "deny";
      absl::Time t = absl::FromUnixMillis(dec.time_ms());
      if (lg_json->count()) {
        nlohmann::ordered_json out = {
            {"time", absl::FormatTime(absl::RFC3339_full, t, absl::UTCTimeZone())},
            {"sandbox", dec.sandbox()}, {"host", dec.host()},       {"port", dec.port()},
            {"method", dec.method()},   {"path", dec.path()},       {"verdict", verdict},
            {"rule_id", dec.rule_id()}, {"rule", dec.rule()},       {"via", via},
            {"reason", dec.reason()},   {"credential", dec.credential()}};
        std::cout << out.dump() << std::endl;
        continue;
      }
      if (!header) {
        std::cout << "TIME                      SANDBOX          VERDICT  VIA          "
                     "DESTINATION / REQUEST  (WHY)\n";
        header = true;
      }
      std::string dest = dec.port() == 0 ? dec.host() : absl::StrCat(dec.host(), ":", dec.port());
      if (!dec.method().empty()) absl::StrAppend(&dest, " ", dec.method(), " ", dec.path());
      std::cout << absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", t, absl::UTCTimeZone()) << "  "
                << absl::StrFormat("%-16s %-8s %-12s ", dec.sandbox(), verdict, via) << dest
                << "  (" << (dec.reason().empty() ? dec.rule() : dec.reason())
                << (dec.rule_id().empty() ? "" : ", ") << dec.rule_id() << ")" << std::endl;
    }
    grpc::Status st = reader->Finish();
    if (!st.ok()) Failed(st, exit_code);
  });

  // init
  auto* preset = new std::string();
  CLI::App* init = policy->add_subcommand("init", "Replace the global preset rules");
  init->add_option("preset", *preset, "allow-all, balanced or deny-all")->required();
  init->callback([=] {
    auto stub = ConnectPolicy(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::InitPresetRequest req;
    req.set_preset(*preset);
    pb::InitPresetResponse resp;
    if (Failed(stub->InitPreset(&ctx, req, &resp), exit_code)) {
      *exit_code = 2;
      return;
    }
    std::cout << "preset " << *preset << ": " << resp.rules_size() << " rules\n";
  });
}

}  // namespace airlock::cli
