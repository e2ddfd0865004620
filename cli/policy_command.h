// `airlock policy allow|deny|rm|ls|check|init|log`.
#ifndef AIRLOCK_CLI_POLICY_COMMAND_H_
#define AIRLOCK_CLI_POLICY_COMMAND_H_

#include "CLI/CLI.hpp"

namespace airlock::cli {

// AddPolicyCommand registers the `policy` subcommand tree on `app`.
void AddPolicyCommand(CLI::App& app, int* exit_code);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_POLICY_COMMAND_H_
