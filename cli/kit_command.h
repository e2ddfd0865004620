// `airlock kit`: Sandbox Kits. validate, inspect and diff work on local
// references (descriptor files and OCI image layout directories) through
// the same pipeline policyd uses (policyd/kit/resolve.h) and need no
// daemon; the verbs that change a running sandbox's Kits talk to the
// daemons.
#ifndef AIRLOCK_CLI_KIT_COMMAND_H_
#define AIRLOCK_CLI_KIT_COMMAND_H_

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddKitCommand registers the `kit` subcommand tree on `app`.
void AddKitCommand(CLI::App& app, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_KIT_COMMAND_H_
