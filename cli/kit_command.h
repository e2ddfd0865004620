// `airlock kit`: Sandbox Kits. validate, inspect and diff work on local
// references (descriptor files, OCI image layout directories and the
// built-in agent kits) through the same pipeline policyd uses
// (common/kit/resolve.h) and need no daemon; the verbs that change a
// running sandbox's Kits talk to the daemons.
#ifndef AIRLOCK_CLI_KIT_COMMAND_H_
#define AIRLOCK_CLI_KIT_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"

namespace airlock::cli {

// AddKitCommand registers the `kit` subcommand tree on `app`.
void AddKitCommand(CLI::App& app, int* exit_code);

// KitRefPath makes a kit REF absolute (daemons read it from their own
// working directory). A REF that names no file or directory but a
// built-in agent, bare ("claude") or as "builtin:claude", becomes
// "builtin:claude"; an existing path always wins. NOT_FOUND saying what a
// REF may be when it is neither.
absl::StatusOr<std::string> KitRefPath(const std::string& ref);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_KIT_COMMAND_H_
