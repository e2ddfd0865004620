#include "cli/run_argv.h"

namespace airlock::cli {

std::vector<std::string> RunArgv(const airlock::vmm::v1::Sandbox& sb, const std::vector<std::string>& args) {
  std::vector<std::string> command(sb.kit_plan().command().begin(),
                                   sb.kit_plan().command().end());
  if (command.empty()) command = {"bash", "-l"};
  if (args.empty()) return command;
  // As sbx does: options go to the agent's own command, a command
  // replaces it.
  if (args[0].size() > 1 && args[0][0] == '-') {
    command.insert(command.end(), args.begin(), args.end());
    return command;
  }
  return args;
}

}  // namespace airlock::cli
