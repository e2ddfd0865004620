// `airlock daemon start|stop|status|logs`.
#ifndef AIRLOCK_CLI_DAEMON_COMMAND_H_
#define AIRLOCK_CLI_DAEMON_COMMAND_H_

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddDaemonCommand registers the `daemon` subcommand tree on `app`; the
// chosen command stores its exit code in `*exit_code`.
void AddDaemonCommand(CLI::App& app, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_DAEMON_COMMAND_H_
