// airlock: the command-line client. It parses commands and talks to the
// daemons over gRPC; the daemons own all the logic.
#include <iostream>

#include "CLI/CLI.hpp"
#include "cli/daemon_command.h"
#include "common/version.h"

int main(int argc, char** argv) {
  CLI::App app{"Airlock: disposable microVM sandboxes for AI coding agents and untrusted code.\n"
               "Each sandbox has its own kernel and gets only the files, network destinations\n"
               "and credentials it was granted."};
  app.name("airlock");
  app.set_version_flag("--version", std::string("airlock ") + airlock::kVersion);
  app.require_subcommand(1);
  int exit_code = 0;
  airlock::cli::AddDaemonCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
