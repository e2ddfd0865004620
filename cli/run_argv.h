// What `airlock run` executes in a sandbox, from its agent's default
// command and the words after "--".
#ifndef AIRLOCK_CLI_RUN_ARGV_H_
#define AIRLOCK_CLI_RUN_ARGV_H_

#include <string>
#include <vector>

#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::cli {

// RunArgv is what `airlock run` executes in `sb`: its agent's default
// command (the kit's, `bash -l` for shell) when `args` is empty, that
// command with `args` appended when the first one starts with '-', and
// `args` alone otherwise.
std::vector<std::string> RunArgv(const airlock::vmm::v1::Sandbox& sb,
                                 const std::vector<std::string>& args);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_RUN_ARGV_H_
