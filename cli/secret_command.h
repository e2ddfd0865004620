// `airlock secret`: set, set-custom, import, ls and rm. Values go to
// secretsd and are never printed back; the CLI reads them from a flag, a
// host command or stdin (without echo on a terminal).
#ifndef AIRLOCK_CLI_SECRET_COMMAND_H_
#define AIRLOCK_CLI_SECRET_COMMAND_H_

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddSecretCommand registers the `secret` subcommand tree on `app`.
void AddSecretCommand(CLI::App& app, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_SECRET_COMMAND_H_
