// Sandbox commands: create, run, ls, start, stop, rm, exec.
#ifndef AIRLOCK_CLI_SANDBOX_COMMANDS_H_
#define AIRLOCK_CLI_SANDBOX_COMMANDS_H_

#include <string>
#include <vector>

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddSandboxCommands registers the sandbox commands on `app`. `after_dashes`
// holds the words after the first "--" on the command line (the command to
// run); the chosen command stores its exit code in `*exit_code`.
void AddSandboxCommands(CLI::App& app, const std::vector<std::string>* after_dashes,
                        int* exit_code);


}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_SANDBOX_COMMANDS_H_
