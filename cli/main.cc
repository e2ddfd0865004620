// airlock: the command-line client. It parses commands and talks to the
// daemons over gRPC; the daemons own all the logic. The local `kit` verbs
// (validate, inspect, diff) run the shared kit library (common/kit) in-process.
#include <stdio.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include <grpc/grpc.h>

#include "CLI/CLI.hpp"
#include "cli/api_command.h"
#include "cli/daemon_command.h"
#include "cli/kit_command.h"
#include "cli/policy_command.h"
#include "cli/secret_command.h"
#include "cli/sandbox_commands.h"
#include "cli/template_command.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Airlock: disposable microVM sandboxes for AI coding agents and untrusted code.\n"
               "Each sandbox has its own kernel and gets only the files, network destinations\n"
               "and credentials it was granted."};
  app.name("airlock");
  app.set_version_flag("--version", std::string("airlock ") + airlock::kVersion);
  app.require_subcommand(1);
  int exit_code = 0;
  // Words after the first "--" are the command to run in the sandbox; they
  // never reach the option parser.
  std::vector<std::string> after_dashes;
  int parsed_argc = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--") {
      after_dashes.assign(argv + i + 1, argv + argc);
      parsed_argc = i;
      break;
    }
  }
  airlock::cli::AddSandboxCommands(app, &after_dashes, &exit_code);
  airlock::cli::AddPolicyCommand(app, &exit_code);
  airlock::cli::AddSecretCommand(app, &exit_code);
  airlock::cli::AddKitCommand(app, &exit_code);
  airlock::cli::AddTemplateCommand(app, &exit_code);
  airlock::cli::AddDaemonCommand(app, &exit_code);
  airlock::cli::AddApiCommand(app, &exit_code);
  // A command holds gRPC's library from the moment its arguments parse
  // (never for --help or --version, which end the parse) until the process
  // leaves, and the process leaves without gRPC's shutdown, which would
  // join gRPC's threads on every command's way out (the README has what
  // that cost). Everything a command does has ended by then (its own
  // objects are gone, its children are processes of their own); what is
  // left to do is to flush the output.
  app.parse_complete_callback([] { grpc_init(); });
  try {
    app.parse(parsed_argc, argv);
  } catch (const CLI::ParseError& e) {
    exit_code = app.exit(e);
  }
  std::cout.flush();
  std::cerr.flush();
  fflush(nullptr);
  _exit(exit_code);
}
