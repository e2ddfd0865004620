#include "cli/secret_command.h"

#include <termios.h>
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "cli/daemons.h"
#include "cli/table.h"
#include "common/client.h"
#include "common/subprocess.h"
#include "nlohmann/json.hpp"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::cli {

namespace pb = airlock::secrets::v1;

namespace {

std::unique_ptr<pb::Secrets::Stub> ConnectSecrets(int* exit_code) {
  auto channel = ChannelTo("secretsd", exit_code);
  return channel ? pb::Secrets::NewStub(channel) : nullptr;
}

bool Failed(const grpc::Status& s, int* exit_code) {
  if (s.ok()) return false;
  std::cerr << "airlock: " << s.error_message() << "\n";
  *exit_code = s.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 1;
  return true;
}

// ReadSecret reads one value from stdin: the first line, without echo when
// stdin is a terminal.
std::string ReadSecret(const std::string& prompt) {
  bool tty = isatty(STDIN_FILENO);
  termios old{};
  if (tty) {
    std::cerr << prompt << std::flush;
    tcgetattr(STDIN_FILENO, &old);
    termios quiet = old;
    quiet.c_lflag &= ~ECHO;
    tcsetattr(STDIN_FILENO, TCSANOW, &quiet);
  }
  std::string value;
  std::getline(std::cin, value);
  if (tty) {
    tcsetattr(STDIN_FILENO, TCSANOW, &old);
    std::cerr << "\n";
  }
  return std::string(absl::StripAsciiWhitespace(value));
}

// ValueFrom picks the value: -t, --command (run on the host), or stdin
// (asking with `prompt` on a terminal).
bool ValueFrom(const std::string& token, const std::string& command, std::string* value,
               int* exit_code, const std::string& prompt = "secret value: ") {
  if (!token.empty() && !command.empty()) {
    std::cerr << "airlock: give -t or --command, not both\n";
    *exit_code = 2;
    return false;
  }
  if (!token.empty()) {
    *value = token;
  } else if (!command.empty()) {
    CommandResult r = RunCommand({"sh", "-c", command}, {}, "", 60);
    if (r.exit_code != 0) {
      // Its output may hold a secret: say only that it failed.
      std::cerr << "airlock: `" << command << "` failed with exit code " << r.exit_code << "\n";
      *exit_code = 1;
      return false;
    }
    *value = std::string(absl::StripAsciiWhitespace(r.out));
  } else {
    *value = ReadSecret(prompt);
  }
  if (value->empty()) {
    std::cerr << "airlock: the secret value is empty\n";
    *exit_code = 2;
    return false;
  }
  return true;
}

std::string ScopeText(const pb::SecretInfo& s) {
  return s.scope() == pb::GLOBAL ? "global" : s.sandbox();
}

// ServiceText is the SERVICE cell of `ls`: the service, "custom", or
// "registry HOST".
std::string ServiceText(const pb::SecretInfo& s) {
  if (!s.registry().empty()) return "registry " + s.registry();
  return s.service().empty() ? "custom" : s.service();
}

// RegistryValue makes the USERNAME:PASSWORD value of a registry credential
// from what was read: the password when `username` is given, else the
// whole pair. Never prints the value.
bool RegistryValue(const std::string& username, std::string* value, int* exit_code) {
  if (!username.empty()) {
    if (username.find(':') != std::string::npos) {
      std::cerr << "airlock: -u: a registry user name cannot contain ':'\n";
      *exit_code = 2;
      return false;
    }
    *value = username + ":" + *value;
    return true;
  }
  size_t colon = value->find(':');
  if (colon == std::string::npos || colon == 0) {
    std::cerr << "airlock: without -u, the value must be USERNAME:PASSWORD (or give -u "
                 "USERNAME and the password as the value)\n";
    *exit_code = 2;
    return false;
  }
  return true;
}

}  // namespace

void AddSecretCommand(CLI::App& app, int* exit_code) {
  CLI::App* secret = app.add_subcommand(
      "secret", "Manage credentials: the guest sees a sentinel, proxyd places the real value");
  secret->require_subcommand(1);

  // set
  struct SetFlags {
    bool global = false;
    std::vector<std::string> args;
    std::string token, command, registry, username;
  };
  auto* sf = new SetFlags();
  CLI::App* set = secret->add_subcommand(
      "set",
      "Store a credential: set -g SERVICE, or set SANDBOX SERVICE, for a built-in service; set "
      "--registry HOST [-u USERNAME] for the host's image pulls from a registry (always global, "
      "never seen by a guest)");
  set->add_flag("-g,--global", sf->global, "For sandboxes created from now on");
  set->add_option("args", sf->args,
                  "[SANDBOX] SERVICE (see `airlock secret ls --services`); none with --registry");
  set->add_option("--registry", sf->registry,
                  "Registry host[:port] (ghcr.io, localhost:5000) whose image pulls by vmmd use "
                  "this credential; its id is registry:HOST@global");
  set->add_option("-u,--username", sf->username,
                  "With --registry: the user name, and the value is the password (without -u "
                  "the value is USERNAME:PASSWORD)");
  set->add_option("-t,--token", sf->token, "The value (else --command, else stdin)");
  set->add_option("--command", sf->command,
                  "Host command whose output is the value, e.g. 'gh auth token'");
  set->callback([=] {
    pb::SetRequest req;
    std::string prompt = "secret value: ";
    if (!sf->registry.empty()) {
      if (!sf->args.empty()) {
        std::cerr << "airlock: --registry takes no SANDBOX or SERVICE: a registry credential is "
                     "global and no guest sees it\n";
        return void(*exit_code = 2);
      }
      req.set_scope(pb::GLOBAL);
      req.set_registry(sf->registry);
      prompt = sf->username.empty() ? "USERNAME:PASSWORD for " + sf->registry + ": "
                                    : "password of " + sf->username + " at " + sf->registry + ": ";
    } else if (!sf->username.empty()) {
      std::cerr << "airlock: -u is for registry credentials: give --registry HOST\n";
      return void(*exit_code = 2);
    } else if (sf->global && sf->args.size() == 1) {
      req.set_scope(pb::GLOBAL);
      req.set_service(sf->args[0]);
    } else if (!sf->global && sf->args.size() == 2) {
      req.set_scope(pb::SANDBOX);
      req.set_sandbox(sf->args[0]);
      req.set_service(sf->args[1]);
    } else {
      std::cerr << "airlock: usage: airlock secret set -g SERVICE | airlock secret set SANDBOX "
                   "SERVICE | airlock secret set --registry HOST [-u USERNAME]\n";
      return void(*exit_code = 2);
    }
    std::string value;
    if (!ValueFrom(sf->token, sf->command, &value, exit_code, prompt)) return;
    if (!sf->registry.empty() && !RegistryValue(sf->username, &value, exit_code)) return;
    req.set_value(value);
    auto stub = ConnectSecrets(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::SecretInfo info;
    if (Failed(stub->Set(&ctx, req, &info), exit_code)) return;
    std::cout << info.id() << "\n";
  });

  // set-custom
  struct CustomFlags {
    std::string sandbox, env, placeholder, value;
    std::vector<std::string> hosts;
  };
  auto* cf = new CustomFlags();
  CLI::App* custom = secret->add_subcommand(
      "set-custom", "Store a credential for any hosts: the guest sees a random placeholder");
  custom->add_option("--sandbox", cf->sandbox, "Only this sandbox (default: global)");
  custom->add_option("--host", cf->hosts, "Host the value is placed for (repeatable)")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  custom->add_option("--env", cf->env, "Environment variable the guest sees")->required();
  custom->add_option("--placeholder", cf->placeholder, "What the guest sees (default sbx-cs-…)");
  custom->add_option("--value", cf->value, "The value (else stdin)");
  custom->callback([=] {
    pb::SetRequest req;
    req.set_scope(cf->sandbox.empty() ? pb::GLOBAL : pb::SANDBOX);
    req.set_sandbox(cf->sandbox);
    req.set_env(cf->env);
    for (const auto& h : cf->hosts) req.add_hosts(h);
    req.set_placeholder(cf->placeholder);
    std::string value;
    if (!ValueFrom(cf->value, "", &value, exit_code)) return;
    req.set_value(value);
    auto stub = ConnectSecrets(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::SecretInfo info;
    if (Failed(stub->Set(&ctx, req, &info), exit_code)) return;
    std::cout << info.id() << "\n" << info.env() << "=" << info.sentinel() << "\n";
  });

  // import
  struct ImportFlags {
    std::string service;
    bool all = false, dry_run = false;
  };
  auto* imf = new ImportFlags();
  CLI::App* import = secret->add_subcommand(
      "import", "Store global credentials from this shell's environment (ANTHROPIC_API_KEY, …)");
  import->add_option("service", imf->service, "Only this service");
  import->add_flag("--all", imf->all, "Every service whose variable is set");
  import->add_flag("--dry-run", imf->dry_run, "Say what would be imported; store nothing");
  import->callback([=] {
    if (imf->service.empty() == !imf->all) {
      std::cerr << "airlock: give a SERVICE or --all\n";
      return void(*exit_code = 2);
    }
    auto stub = ConnectSecrets(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::ServicesResponse services;
    if (Failed(stub->Services(&ctx, {}, &services), exit_code)) return;
    bool known = false;
    int imported = 0;
    for (const auto& svc : services.services()) {
      if (!imf->all && svc.name() != imf->service) continue;
      known = true;
      for (const auto& var : svc.env()) {
        const char* v = getenv(var.c_str());
        if (v == nullptr || *v == '\0') continue;
        if (imf->dry_run) {
          std::cout << "would import " << svc.name() << " from $" << var << "\n";
        } else {
          pb::SetRequest req;
          req.set_scope(pb::GLOBAL);
          req.set_service(svc.name());
          req.set_value(v);
          grpc::ClientContext sctx;
          pb::SecretInfo info;
          if (Failed(stub->Set(&sctx, req, &info), exit_code)) return;
          std::cout << "imported " << info.id() << " from $" << var << "\n";
        }
        ++imported;
        break;  // the first variable that is set
      }
    }
    if (!known) {
      std::cerr << "airlock: unknown service \"" << imf->service
                << "\" (see `airlock secret ls --services`)\n";
      return void(*exit_code = 2);
    }
    if (imported == 0) std::cout << "nothing to import: no service variable is set\n";
  });

  // ls
  struct LsFlags {
    std::string sandbox;
    bool json = false, services = false;
  };
  auto* lf = new LsFlags();
  CLI::App* ls = secret->add_subcommand(
      "ls", "List secrets, registry credentials included (never their values)");
  ls->add_option("--sandbox", lf->sandbox, "Only what this sandbox sees");
  ls->add_flag("--json", lf->json, "Print JSON");
  ls->add_flag("--services", lf->services, "List the built-in services instead");
  ls->callback([=] {
    auto stub = ConnectSecrets(exit_code);
    if (!stub) return;
    if (lf->services) {
      grpc::ClientContext ctx;
      pb::ServicesResponse resp;
      if (Failed(stub->Services(&ctx, {}, &resp), exit_code)) return;
      nlohmann::ordered_json out = nlohmann::ordered_json::array();
      std::vector<std::vector<std::string>> rows;
      for (const auto& s : resp.services()) {
        std::vector<std::string> env(s.env().begin(), s.env().end());
        std::vector<std::string> hosts(s.hosts().begin(), s.hosts().end());
        out.push_back({{"name", s.name()}, {"env", env}, {"hosts", hosts}, {"format", s.format()}});
        rows.push_back({s.name(), absl::StrJoin(env, ","), absl::StrJoin(hosts, ","), s.format()});
      }
      if (lf->json) {
        std::cout << out.dump(2) << "\n";
      } else {
        PrintTable(std::cout, {"SERVICE", "ENV", "HOSTS", "FORMAT"}, rows);
      }
      return;
    }
    grpc::ClientContext ctx;
    pb::ListRequest req;
    req.set_sandbox(lf->sandbox);
    pb::ListResponse resp;
    if (Failed(stub->List(&ctx, req, &resp), exit_code)) return;
    nlohmann::ordered_json out = nlohmann::ordered_json::array();
    std::vector<std::vector<std::string>> rows;
    for (const auto& s : resp.secrets()) {
      std::vector<std::string> hosts(s.hosts().begin(), s.hosts().end());
      out.push_back({{"id", s.id()},
                     {"scope", ScopeText(s)},
                     {"service", s.service()},
                     {"env", s.env()},
                     {"hosts", hosts},
                     {"sentinel", s.sentinel()},
                     {"registry", s.registry()},
                     {"created_at", s.created_at()}});
      rows.push_back({s.id(), ScopeText(s), ServiceText(s), s.env(), absl::StrJoin(hosts, ",")});
    }
    if (lf->json) {
      std::cout << out.dump(2) << "\n";
    } else {
      PrintTable(std::cout, {"ID", "SCOPE", "SERVICE", "ENV", "HOSTS"}, rows);
    }
  });

  // rm
  struct RmFlags {
    bool global = false;
    std::vector<std::string> args;
  };
  auto* rf = new RmFlags();
  CLI::App* rm = secret->add_subcommand(
      "rm", "Remove a secret: rm ID, rm -g SERVICE, or rm SANDBOX SERVICE; the next request "
            "no longer carries it");
  rm->add_flag("-g,--global", rf->global, "The global secret of SERVICE");
  rm->add_option("args", rf->args, "ID | SERVICE | SANDBOX SERVICE")->required();
  rm->callback([=] {
    std::string id;
    if (rf->args.size() == 1 && rf->global) {
      id = rf->args[0] + "@global";
    } else if (rf->args.size() == 1 && rf->args[0].find('@') != std::string::npos) {
      id = rf->args[0];
    } else if (rf->args.size() == 2 && !rf->global) {
      id = rf->args[1] + "@" + rf->args[0];
    } else {
      std::cerr << "airlock: usage: airlock secret rm ID | -g SERVICE | SANDBOX SERVICE (ids: "
                   "`airlock secret ls`)\n";
      return void(*exit_code = 2);
    }
    auto stub = ConnectSecrets(exit_code);
    if (!stub) return;
    grpc::ClientContext ctx;
    pb::DeleteRequest req;
    req.set_id(id);
    pb::DeleteResponse resp;
    if (Failed(stub->Delete(&ctx, req, &resp), exit_code)) return;
    std::cout << "removed " << id << "\n";
  });
}

}  // namespace airlock::cli
