// `airlock api`: the REST API apid serves. `url` prints where clients
// point (management base, token exchange); `token create|ls|rm` manages the
// API tokens a client exchanges for short-lived access tokens.
#ifndef AIRLOCK_CLI_API_COMMAND_H_
#define AIRLOCK_CLI_API_COMMAND_H_

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddApiCommand registers the `api` subcommand tree on `app`.
void AddApiCommand(CLI::App& app, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_API_COMMAND_H_
