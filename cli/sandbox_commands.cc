#include "cli/sandbox_commands.h"

#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <iostream>
#include <map>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/daemons.h"
#include "cli/exec_client.h"
#include "cli/port_spec.h"
#include "cli/run_argv.h"
#include "cli/table.h"
#include "common/client.h"
#include "common/sizes.h"
#include "nlohmann/json.hpp"
#include "protos/git/v1/git.grpc.pb.h"
#include "protos/vmm/v1/vmm.grpc.pb.h"
#include "cli/kit_command.h"
#include "cli/template_command.h"
#include "common/agents/builtin_agents.h"

namespace airlock::cli {

namespace vmm = airlock::vmm::v1;

namespace {

// EnsureProxyd makes sure proxyd runs: a boot attaches the sandbox's
// egress to it (a remote vmmd has its own proxyd). False after printing why.
bool EnsureProxyd() {
  Daemons d;
  absl::Status s = d.PeerOf("vmmd").ok() && d.PeerOf("vmmd")->is_tcp()
                       ? absl::OkStatus()
                       : d.EnsureRunning("proxyd");
  if (!s.ok()) std::cerr << "airlock: cannot start the daemons: " << s.message() << "\n";
  return s.ok();
}

// Stub connects to vmmd, starting the daemons first when they are not
// running; with `may_boot`, proxyd too (else EnsureStarted sees to it when
// a boot comes). Null (after printing why) when that fails.
std::unique_ptr<vmm::Vmm::Stub> Connect(bool may_boot = true) {
  if (may_boot && !EnsureProxyd()) return nullptr;
  Daemons d;
  std::shared_ptr<grpc::Channel> channel;
  if (absl::Status s = d.EnsureRunning("vmmd", &channel); !s.ok()) {
    std::cerr << "airlock: cannot start the daemons: " << s.message() << "\n";
    return nullptr;
  }
  return vmm::Vmm::NewStub(channel);
}

void PrintError(const grpc::Status& s) { std::cerr << "airlock: " << s.error_message() << "\n"; }

std::string StateName(vmm::SandboxState s) {
  std::string n = vmm::SandboxState_Name(s);
  for (char& c : n) c = static_cast<char>(tolower(c));
  return n;
}

// WaitRunning follows the sandbox until it runs (true) or fails (false,
// with the reason printed). Progress goes to stderr on a terminal.
bool WaitRunning(vmm::Vmm::Stub& stub, const std::string& name) {
  bool progress = isatty(STDERR_FILENO);
  grpc::ClientContext ctx;
  vmm::WatchRequest req;
  req.set_name(name);
  auto reader = stub.Watch(&ctx, req);
  vmm::WatchEvent ev;
  std::string last;
  bool running = false;
  while (reader->Read(&ev)) {
    vmm::SandboxState st = ev.sandbox().state();
    std::string line = ev.progress().empty() ? StateName(st) : ev.progress();
    if (progress && line != last && st != vmm::RUNNING) {
      std::cerr << "\r\033[K" << name << ": " << line << std::flush;
      last = line;
    }
    if (st == vmm::RUNNING) {
      running = true;
      break;
    }
    if (st == vmm::FAILED || st == vmm::STOPPED) {
      if (progress) std::cerr << "\r\033[K";
      std::cerr << "airlock: sandbox " << name << " did not start: "
                << (ev.sandbox().failure().empty() ? StateName(st) : ev.sandbox().failure())
                << "\n";
      break;
    }
  }
  if (progress && running) std::cerr << "\r\033[K";
  bool decided = running || ev.sandbox().state() == vmm::FAILED ||
                 ev.sandbox().state() == vmm::STOPPED;
  ctx.TryCancel();
  grpc::Status s = reader->Finish();
  if (!decided) {
    std::cerr << "airlock: lost contact with vmmd while waiting for " << name << ": "
              << (s.ok() ? "the watch ended" : s.error_message()) << "\n";
  }
  return running;
}

// EnsureStarted starts a stopped sandbox and waits until it runs.
bool EnsureStarted(vmm::Vmm::Stub& stub, const std::string& name, int* code) {
  grpc::ClientContext ctx;
  vmm::GetRequest get;
  get.set_name(name);
  vmm::Sandbox sb;
  grpc::Status s = stub.Get(&ctx, get, &sb);
  if (!s.ok()) {
    PrintError(s);
    *code = kExitCannotRun;
    return false;
  }
  if (sb.state() == vmm::RUNNING) return true;
  if (!EnsureProxyd()) {
    *code = kExitCannotRun;
    return false;
  }
  if (sb.state() == vmm::STOPPED || sb.state() == vmm::FAILED) {
    grpc::ClientContext sctx;
    vmm::StartRequest start;
    start.set_name(name);
    s = stub.Start(&sctx, start, &sb);
    if (!s.ok()) {
      PrintError(s);
      *code = kExitCannotRun;
      return false;
    }
  }
  if (!WaitRunning(stub, name)) {
    *code = kExitCannotRun;
    return false;
  }
  return true;
}

nlohmann::ordered_json PortsJson(const google::protobuf::RepeatedPtrField<vmm::PortMapping>& ports) {
  nlohmann::ordered_json arr = nlohmann::ordered_json::array();
  for (const auto& p : ports) {
    arr.push_back({{"host_ip", p.host_ip()},
                   {"host_port", p.host_port()},
                   {"sandbox_port", p.sandbox_port()},
                   {"protocol", p.protocol()}});
  }
  return arr;
}

// PrintPorts writes "published 127.0.0.1:40001->80/tcp" lines for the
// sandbox's ports.
void PrintPorts(vmm::Vmm::Stub& stub, const std::string& name, std::ostream& out) {
  grpc::ClientContext ctx;
  vmm::ListPortsRequest req;
  req.set_sandbox(name);
  vmm::ListPortsResponse resp;
  if (!stub.ListPorts(&ctx, req, &resp).ok()) return;
  for (const auto& p : resp.ports()) out << "published " << FormatPortMapping(p) << "\n";
}

bool HasDockerEngine(const vmm::Sandbox& sb) { return sb.spec().docker() == vmm::DOCKER_ON; }

nlohmann::ordered_json SandboxJson(const vmm::Sandbox& sb) {
  return {{"name", sb.spec().name()},
          {"agent", sb.spec().agent()},
          {"state", StateName(sb.state())},
          {"failure", sb.failure()},
          {"cpus", sb.cpus()},
          {"memory_mib", sb.memory_mib()},
          {"accelerator", sb.accelerator()},
          {"started_from", sb.started_from()},
          {"pool_slot", sb.pool_slot()},
          {"kernel", sb.kernel()},
          {"template", sb.spec().template_()},
          {"image", {{"name", sb.image().name()}, {"id", sb.image().id()},
                     {"digest", sb.image().digest()}}},
          {"created_at", sb.created_at()},
          {"pid", sb.vmm_pid()},
          {"console_log", sb.console_log()},
          {"ports", PortsJson(sb.ports())},
          {"kits", std::vector<std::string>(sb.spec().kits().begin(), sb.spec().kits().end())},
          {"kit_installed", sb.kit_installed()},
          {"docker", HasDockerEngine(sb)},
          {"docker_disk_mib", sb.spec().docker_disk_mib()},
          {"display_name", sb.spec().display_name()},
          {"labels", std::map<std::string, std::string>(sb.spec().labels().begin(),
                                                        sb.spec().labels().end())},
          {"timeout_seconds", sb.spec().timeout_seconds()},
          {"expires_at", sb.expires_at()},
          {"jail_uid", sb.jail_uid()},
          {"host_memory_bytes", sb.host_memory_bytes()},
          {"host_memory_limit_bytes", sb.host_memory_limit_bytes()},
          {"kit_skipped",
           std::vector<std::string>(sb.kit_skipped().begin(), sb.kit_skipped().end())}};
}

// PrintKitNotes tells the user, on stderr, what the kits asked for that
// the sandbox does not get: optional entries left out, types not enforced.
void PrintKitNotes(const vmm::Sandbox& sb) {
  for (const auto& note : sb.kit_skipped()) std::cerr << "kit: " << note << "\n";
}

// CreateFlags are the options shared by create and run.
struct CreateFlags {
  std::string name;
  uint32_t cpus = 0;
  std::string memory;
  std::string size;
  std::string template_name;
  std::string agent;
  std::vector<std::string> paths;
  std::vector<std::string> env;
  std::vector<std::string> publish;
  bool clone = false;
  std::string branch;
  std::vector<std::string> kits;
  std::vector<std::string> kit_args;
  bool allow_privileged = false;
  bool rm = false;
  std::string pull = "missing";
  bool docker = false;
  bool no_docker = false;
  std::string docker_disk;
};

void AddCreateFlags(CLI::App* cmd, CreateFlags* f) {
  cmd->add_option("--name", f->name, "Sandbox name (default: AGENT-<random>)");
  cmd->add_option("--cpus", f->cpus, "Virtual CPUs (default: host CPUs, at most 4)");
  cmd->add_option("-m,--memory", f->memory,
                  "Guest memory, e.g. 2048, 512m, 4g (default: half the host, 512 MiB..32 GiB)");
  cmd->add_option("--size", f->size, "Named size: micro, small, medium, large or xl");
  cmd->add_option("-t,--template", f->template_name,
                  "Image to make the disk from: a stored name (go-agent:v1), an id, or a "
                  "registry reference (golang:1.25, ghcr.io/o/r:tag) (default: base)");
  cmd->add_option("--pull", f->pull,
                  "Pull the image first: always, missing (when the store lacks it) or never")
      ->default_val("missing");
  // Each of the repeatable options takes exactly one value per use: without
  // allow_extra_args(false) CLI11 lets a vector option take the words after
  // it that the positionals do not need (`-p 8000 shell DIR` read "shell"
  // as a second port).
  cmd->add_option("-e,--env", f->env, "Environment variable KEY=VALUE for every process")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("-p,--publish", f->publish,
                  "Publish a port: [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/tcp] (host IP defaults to "
                  "127.0.0.1, an omitted host port is chosen free)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_flag("--clone", f->clone,
                "Clone mode: share PATH's Git repo read-only and work in a private clone; "
                "the agent's commits come back as the remote sandbox-NAME");
  cmd->add_option("--branch", f->branch, "Clone mode: branch to check out (default: current)");
  cmd->add_option("--kit", f->kits,
                  "Run a kit: an OCI image layout directory or a descriptor file; repeat for "
                  "mixins (exactly one workload)")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--kit-arg", f->kit_args, "Kit argument NAME=VALUE")
      ->expected(1)
      ->allow_extra_args(false)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* docker = cmd->add_flag(
      "--docker", f->docker,
      "A private Docker Engine in the sandbox (default for the built-in agents): dockerd "
      "started at boot, /var/lib/docker on a disk of its own, traffic through the policy");
  cmd->add_flag("--no-docker", f->no_docker, "No Docker Engine, even for a built-in agent")
      ->excludes(docker);
  cmd->add_option("--docker-disk", f->docker_disk,
                  "Size of the Docker Engine's disk, fixed at create: 512m to 16t (default 10g)");
  cmd->add_flag("--allow-privileged", f->allow_privileged,
                "Consent to a kit's privileged@1 (processes then default to root)");
  cmd->add_option("agent", f->agent,
                  absl::StrCat("Agent to run: shell or a built-in agent kit (",
                               absl::StrJoin(airlock::agents::BuiltinAgentNames(), ", "),
                               "; `airlock kit inspect NAME` shows what it asks for)"))
      ->required();
  cmd->add_option("paths", f->paths,
                  "Host paths to share at the same path in the guest; PATH:ro for read-only");
}

// BuildCreate turns flags into a CreateRequest; false (message printed) on
// bad input.
bool BuildCreate(const CreateFlags& f, const std::vector<std::string>& args, bool start,
                 vmm::CreateRequest* req) {
  vmm::SandboxSpec* spec = req->mutable_spec();
  spec->set_name(f.name);
  spec->set_agent(f.agent);
  spec->set_cpus(f.cpus);
  spec->set_size(f.size);
  spec->set_template_(f.template_name);
  spec->set_clone(f.clone);
  spec->set_branch(f.branch);
  for (const auto& a : args) spec->add_args(a);
  for (const auto& e : f.env) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "airlock: invalid --env \"" << e << "\": expected KEY=VALUE\n";
      return false;
    }
    (*spec->mutable_env())[e.substr(0, eq)] = e.substr(eq + 1);
  }
  if (!f.kit_args.empty() && f.kits.empty() && (f.agent.empty() || f.agent == "shell")) {
    std::cerr << "airlock: --kit-arg needs a --kit or a built-in agent (e.g. `airlock run "
                 "claude --kit-arg version=X`)\n";
    return false;
  }
  for (const auto& a : f.kit_args) {
    size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "airlock: invalid --kit-arg \"" << a << "\": expected NAME=VALUE\n";
      return false;
    }
    (*spec->mutable_kit_args())[a.substr(0, eq)] = a.substr(eq + 1);
  }
  for (const auto& k : f.kits) {
    // policyd reads the ref, from its own working directory.
    auto ref = KitRefPath(k);
    if (!ref.ok()) {
      std::cerr << "airlock: " << ref.status().message() << "\n";
      return false;
    }
    spec->add_kits(*ref);
  }
  spec->set_allow_privileged(f.allow_privileged);
  if (f.docker) spec->set_docker(vmm::DOCKER_ON);
  if (f.no_docker) spec->set_docker(vmm::DOCKER_OFF);
  if (!f.docker_disk.empty()) {
    auto mib = airlock::ParseDiskSize(f.docker_disk);
    if (!mib.ok() || *mib == 0) {
      std::cerr << "airlock: invalid --docker-disk: "
                << (mib.ok() ? "a disk of 0 bytes; give 512m to 16t" : mib.status().message())
                << "\n";
      return false;
    }
    spec->set_docker_disk_mib(*mib);
  }
  if (!f.memory.empty()) {
    // The same parser vmmd uses, so the CLI and the API agree on sizes.
    auto mib = airlock::ParseMemory(f.memory);
    if (!mib.ok()) {
      std::cerr << "airlock: invalid --memory: " << mib.status().message() << "\n";
      return false;
    }
    spec->set_memory_mib(*mib);
  }
  for (const auto& p : f.publish) {
    auto m = ParsePortSpec(p);
    if (!m.ok()) {
      std::cerr << "airlock: " << m.status().message() << "\n";
      return false;
    }
    *spec->add_ports() = *m;
  }
  for (std::string p : f.paths) {
    auto* m = spec->add_mounts();
    if (p.size() > 3 && p.compare(p.size() - 3, 3, ":ro") == 0) {
      m->set_read_only(true);
      p.resize(p.size() - 3);
    } else if (p.size() > 3 && p.compare(p.size() - 3, 3, ":rw") == 0) {
      p.resize(p.size() - 3);
    }
    // Paths are the caller's: make them absolute here, vmmd checks them.
    char real[PATH_MAX];
    if (realpath(p.c_str(), real) == nullptr) {
      std::cerr << "airlock: shared path " << p << " does not exist\n";
      return false;
    }
    m->set_host_path(real);
  }
  req->set_start(start);
  return true;
}

}  // namespace

void AddSandboxCommands(CLI::App& app, const std::vector<std::string>* after_dashes,
                        int* exit_code) {
  // --- create ---
  auto* create_flags = new CreateFlags();
  CLI::App* create = app.add_subcommand("create", "Create a sandbox and boot it");
  AddCreateFlags(create, create_flags);
  create->callback([=] {
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    vmm::CreateRequest req;
    if (!BuildCreate(*create_flags, *after_dashes, true, &req)) return void(*exit_code = 2);
    if (!EnsureImage(*stub, create_flags->template_name, create_flags->pull)) {
      return void(*exit_code = 1);
    }
    grpc::ClientContext ctx;
    vmm::CreateResponse resp;
    grpc::Status s = stub->Create(&ctx, req, &resp);
    if (!s.ok()) {
      PrintError(s);
      return void(*exit_code = 1);
    }
    PrintKitNotes(resp.sandbox());
    if (!WaitRunning(*stub, resp.sandbox().spec().name())) return void(*exit_code = 1);
    std::cout << resp.sandbox().spec().name() << "\n";
    PrintPorts(*stub, resp.sandbox().spec().name(), std::cerr);
  });

  // --- run ---
  auto* run_flags = new CreateFlags();
  CLI::App* run = app.add_subcommand(
      "run", "Run an agent in a sandbox (created and booted when needed); after -- the command");
  AddCreateFlags(run, run_flags);
  run->add_flag("--rm", run_flags->rm, "Remove the sandbox when the command exits");
  run->footer(
      "Examples:\n"
      "  airlock run shell -- uname -a          run a command instead of the agent\n"
      "  airlock run claude .                   Claude Code on the current directory\n"
      "  airlock run --rm claude -- --version   arguments starting with - go to the agent\n"
      "An agent's first run of a version installs it (from the npm registry, through\n"
      "proxyd) and keeps it as the image agents/NAME:VERSION; later runs start from it.");
  run->callback([=] {
    auto stub = Connect();
    if (!stub) return void(*exit_code = kExitCannotRun);
    std::string name = run_flags->name;
    bool exists = false;
    vmm::Sandbox sb;
    if (!name.empty()) {
      grpc::ClientContext ctx;
      vmm::GetRequest get;
      get.set_name(name);
      exists = stub->Get(&ctx, get, &sb).ok();
    }
    if (!exists) {
      vmm::CreateRequest req;
      if (!BuildCreate(*run_flags, *after_dashes, true, &req)) return void(*exit_code = 2);
      if (!EnsureImage(*stub, run_flags->template_name, run_flags->pull)) {
        return void(*exit_code = kExitCannotRun);
      }
      grpc::ClientContext ctx;
      vmm::CreateResponse resp;
      grpc::Status s = stub->Create(&ctx, req, &resp);
      if (!s.ok()) {
        PrintError(s);
        return void(*exit_code = kExitCannotRun);
      }
      sb = resp.sandbox();
      name = sb.spec().name();
      PrintKitNotes(sb);
    }
    auto remove = [&] {
      grpc::ClientContext ctx;
      vmm::RemoveRequest rm;
      rm.set_name(name);
      rm.set_force(true);
      vmm::RemoveResponse resp;
      grpc::Status s = stub->Remove(&ctx, rm, &resp);
      if (!s.ok()) PrintError(s);
    };
    if (!EnsureStarted(*stub, name, exit_code)) {
      // --rm removes a sandbox this run created even when it never started.
      if (run_flags->rm && !exists) remove();
      return;
    }
    PrintPorts(*stub, name, std::cerr);
    ExecOptions o;
    o.sandbox = name;
    bool interactive_terminal = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);
    o.argv = RunArgv(sb, *after_dashes);
    o.tty = interactive_terminal;
    o.interactive = after_dashes->empty() || !isatty(STDIN_FILENO) || interactive_terminal;
    *exit_code = RunExec(*stub, o);
    if (run_flags->rm) remove();
  });

  // --- ls ---
  CLI::App* ls = app.add_subcommand("ls", "List sandboxes");
  ls->alias("ps");
  auto* ls_json = ls->add_flag("--json", "Print JSON");
  auto* ls_quiet = ls->add_flag("-q,--quiet", "Print names only");
  ls->callback([=] {
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    grpc::ClientContext ctx;
    vmm::ListResponse resp;
    grpc::Status s = stub->List(&ctx, {}, &resp);
    if (!s.ok()) {
      PrintError(s);
      return void(*exit_code = 1);
    }
    if (ls_json->count()) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& sb : resp.sandboxes()) arr.push_back(SandboxJson(sb));
      std::cout << arr.dump(2) << "\n";
      return;
    }
    if (ls_quiet->count()) {
      for (const auto& sb : resp.sandboxes()) std::cout << sb.spec().name() << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& sb : resp.sandboxes()) {
      rows.push_back({sb.spec().name(), sb.spec().agent(), StateName(sb.state()),
                      std::to_string(sb.cpus()), absl::StrCat(sb.memory_mib(), " MiB"),
                      sb.accelerator().empty() ? "-" : sb.accelerator(), Age(sb.created_at())});
    }
    PrintTable(std::cout, {"NAME", "AGENT", "STATE", "CPUS", "MEMORY", "ACCEL", "CREATED"}, rows);
  });

  // --- start / stop ---
  auto* start_names = new std::vector<std::string>();
  CLI::App* start = app.add_subcommand("start", "Boot stopped sandboxes");
  start->add_option("names", *start_names, "Sandbox names")->required();
  start->callback([=] {
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    for (const auto& name : *start_names) {
      int code = 0;
      if (EnsureStarted(*stub, name, &code)) {
        std::cout << name << "\n";
      } else {
        *exit_code = 1;
      }
    }
  });

  auto* stop_names = new std::vector<std::string>();
  auto* stop_timeout = new uint32_t(10);
  CLI::App* stop = app.add_subcommand("stop", "Shut sandboxes down cleanly; their disks are kept");
  stop->add_option("names", *stop_names, "Sandbox names")->required();
  stop->add_option("-t,--time", *stop_timeout, "Seconds to wait before killing the VM")
      ->capture_default_str();
  stop->callback([=] {
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    for (const auto& name : *stop_names) {
      grpc::ClientContext ctx;
      vmm::StopRequest req;
      req.set_name(name);
      req.set_timeout_seconds(*stop_timeout);
      vmm::Sandbox sb;
      grpc::Status s = stub->Stop(&ctx, req, &sb);
      if (!s.ok()) {
        PrintError(s);
        *exit_code = 1;
      } else {
        std::cout << name << "\n";
      }
    }
  });

  // --- rm ---
  auto* rm_names = new std::vector<std::string>();
  CLI::App* rm = app.add_subcommand("rm", "Remove sandboxes and everything they keep on the host");
  rm->add_option("names", *rm_names, "Sandbox names");
  auto* rm_force = rm->add_flag("-f,--force", "Stop running sandboxes first");
  auto* rm_all = rm->add_flag("--all", "Remove every sandbox");
  rm->callback([=] {
    if (rm_names->empty() && !rm_all->count()) {
      std::cerr << "airlock: rm needs sandbox names or --all\n";
      return void(*exit_code = 2);
    }
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    std::vector<std::string> names = *rm_names;
    if (rm_all->count()) {
      grpc::ClientContext ctx;
      vmm::ListResponse resp;
      if (grpc::Status s = stub->List(&ctx, {}, &resp); !s.ok()) {
        PrintError(s);
        return void(*exit_code = 1);
      }
      for (const auto& sb : resp.sandboxes()) names.push_back(sb.spec().name());
    }
    for (const auto& name : names) {
      grpc::ClientContext ctx;
      vmm::RemoveRequest req;
      req.set_name(name);
      req.set_force(rm_force->count() > 0);
      vmm::RemoveResponse resp;
      grpc::Status s = stub->Remove(&ctx, req, &resp);
      if (!s.ok()) {
        PrintError(s);
        *exit_code = 1;
      } else {
        std::cout << name << "\n";
      }
    }
  });

  // --- ports ---
  auto* ports_name = new std::string();
  auto* ports_publish = new std::vector<std::string>();
  auto* ports_unpublish = new std::vector<std::string>();
  CLI::App* ports = app.add_subcommand("ports", "List, publish or unpublish a sandbox's ports");
  ports->add_option("name", *ports_name, "Sandbox name")->required();
  ports->add_option("--publish", *ports_publish,
                    "Publish [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/tcp]; prints the host port")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  ports->add_option("--unpublish", *ports_unpublish,
                    "Stop publishing [[HOST_IP:]HOST_PORT:]SANDBOX_PORT")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  auto* ports_json = ports->add_flag("--json", "Print JSON");
  ports->callback([=] {
    std::vector<vmm::PortMapping> add, remove;
    for (const auto& p : *ports_publish) {
      auto m = ParsePortSpec(p);
      if (!m.ok()) {
        std::cerr << "airlock: " << m.status().message() << "\n";
        return void(*exit_code = 2);
      }
      add.push_back(*m);
    }
    for (const auto& p : *ports_unpublish) {
      auto m = ParsePortSpec(p);
      if (!m.ok()) {
        std::cerr << "airlock: " << m.status().message() << "\n";
        return void(*exit_code = 2);
      }
      remove.push_back(*m);
    }
    auto stub = Connect();
    if (!stub) return void(*exit_code = 1);
    if (!add.empty() && !EnsureStarted(*stub, *ports_name, exit_code)) {
      *exit_code = 1;
      return;
    }
    for (const auto& m : add) {
      grpc::ClientContext ctx;
      vmm::PublishPortRequest req;
      req.set_sandbox(*ports_name);
      *req.mutable_port() = m;
      vmm::PortMapping bound;
      grpc::Status s = stub->PublishPort(&ctx, req, &bound);
      if (!s.ok()) {
        PrintError(s);
        return void(*exit_code = 1);
      }
      if (!ports_json->count()) std::cout << FormatPortMapping(bound) << "\n";
    }
    for (const auto& m : remove) {
      grpc::ClientContext ctx;
      vmm::UnpublishPortRequest req;
      req.set_sandbox(*ports_name);
      *req.mutable_port() = m;
      vmm::Empty empty;
      grpc::Status s = stub->UnpublishPort(&ctx, req, &empty);
      if (!s.ok()) {
        PrintError(s);
        return void(*exit_code = 1);
      }
    }
    if (!add.empty() || !remove.empty()) {
      if (!ports_json->count()) return;
    }
    grpc::ClientContext ctx;
    vmm::ListPortsRequest req;
    req.set_sandbox(*ports_name);
    vmm::ListPortsResponse resp;
    grpc::Status s = stub->ListPorts(&ctx, req, &resp);
    if (!s.ok()) {
      PrintError(s);
      return void(*exit_code = 1);
    }
    if (ports_json->count()) {
      std::cout << PortsJson(resp.ports()).dump(2) << "\n";
      return;
    }
    std::vector<std::vector<std::string>> rows;
    for (const auto& p : resp.ports()) {
      rows.push_back({p.host_ip(), std::to_string(p.host_port()), std::to_string(p.sandbox_port()),
                      p.protocol()});
    }
    PrintTable(std::cout, {"HOST IP", "HOST PORT", "SANDBOX PORT", "PROTOCOL"}, rows);
  });

  // --- review ---
  auto* review_name = new std::string();
  CLI::App* review = app.add_subcommand(
      "review", "List risky changes in a sandbox's shared paths since it was created "
                "(hooks, CI workflows, build scripts, agent configs, new executables); "
                "exits 1 when anything is found");
  review->add_option("name", *review_name, "Sandbox name")->required();
  auto* review_json = review->add_flag("--json", "Print JSON");
  review->callback([=] {
    Daemons d;
    if (absl::Status s = d.EnsureRunning("gitd"); !s.ok()) {
      std::cerr << "airlock: cannot start the daemons: " << s.message() << "\n";
      return void(*exit_code = 2);
    }
    auto gitd = airlock::git::v1::Git::NewStub(d.Dial("gitd"));
    grpc::ClientContext ctx;
    airlock::git::v1::ReviewRequest req;
    req.set_sandbox(*review_name);
    airlock::git::v1::ReviewResponse resp;
    grpc::Status s = gitd->Review(&ctx, req, &resp);
    if (!s.ok()) {
      PrintError(s);
      return void(*exit_code = 2);
    }
    if (review_json->count()) {
      nlohmann::ordered_json arr = nlohmann::ordered_json::array();
      for (const auto& f : resp.findings()) {
        arr.push_back({{"path", f.path()}, {"kind", f.kind()}, {"change", f.change()},
                       {"detail", f.detail()}});
      }
      std::cout << arr.dump(2) << "\n";
    } else if (resp.findings().empty()) {
      std::cout << "no risky changes\n";
    } else {
      std::vector<std::vector<std::string>> rows;
      for (const auto& f : resp.findings()) {
        rows.push_back({f.kind(), f.change(), f.path(), f.detail()});
      }
      PrintTable(std::cout, {"KIND", "CHANGE", "PATH", "DETAIL"}, rows);
    }
    if (!resp.findings().empty()) *exit_code = 1;
  });

  // --- exec ---
  auto* eo = new ExecOptions();
  CLI::App* exec = app.add_subcommand(
      "exec", "Run a command in a sandbox (booting it first when stopped); the command follows --");
  exec->add_flag("-i,--interactive", eo->interactive, "Keep stdin open and forward it");
  exec->add_flag("-t,--tty", eo->tty, "Allocate a pseudo-terminal");
  exec->add_flag("-d,--detach", eo->detach, "Run in the background and print its pid");
  exec->add_option("-u,--user", eo->user, "User name or uid[:gid] (default: agent)");
  exec->add_option("-w,--workdir", eo->workdir, "Working directory inside the sandbox");
  exec->add_option("-e,--env", eo->env, "Environment variable KEY=VALUE")
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  exec->add_option("name", eo->sandbox, "Sandbox name")->required();
  exec->footer("Example: airlock exec -it mybox -- bash");
  exec->callback([=] {
    if (after_dashes->empty()) {
      std::cerr << "airlock: exec needs a command after --, e.g. airlock exec " << eo->sandbox
                << " -- ls\n";
      return void(*exit_code = 2);
    }
    for (const auto& e : eo->env) {
      if (e.find('=') == std::string::npos || e[0] == '=') {
        std::cerr << "airlock: invalid --env \"" << e << "\": expected KEY=VALUE\n";
        return void(*exit_code = 2);
      }
    }
    // A running sandbox's exec needs vmmd alone.
    auto stub = Connect(/*may_boot=*/false);
    if (!stub) return void(*exit_code = kExitCannotRun);
    ExecOptions o = *eo;
    o.argv = *after_dashes;
    if (!o.interactive && !o.tty) {
      // Nothing of the user's is read before vmmd answers, so the exec is
      // tried at once, without a round trip to ask whether the sandbox
      // runs. vmmd refuses one for a sandbox that is not there or not
      // running (NOT_FOUND, FAILED_PRECONDITION) before the guest is
      // asked: nothing ran, and the sandbox is started (or the error
      // said) as before.
      auto first = TryExec(*stub, o);
      if (const int* code = std::get_if<int>(&first)) return void(*exit_code = *code);
      const grpc::Status& refused = std::get<ExecRefusal>(first).status;
      if (refused.error_code() != grpc::StatusCode::FAILED_PRECONDITION &&
          refused.error_code() != grpc::StatusCode::NOT_FOUND) {
        return void(*exit_code = ExecFailed(eo->sandbox, refused.error_message()));
      }
    }
    if (!EnsureStarted(*stub, eo->sandbox, exit_code)) return;
    *exit_code = RunExec(*stub, o);
  });
}

}  // namespace airlock::cli
