// `airlock template pull|load|save|ls|inspect|rm`: the images sandboxes
// are made from (vmmd's OCI store), and EnsureImage, which create and run
// use for --pull.
#ifndef AIRLOCK_CLI_TEMPLATE_COMMAND_H_
#define AIRLOCK_CLI_TEMPLATE_COMMAND_H_

#include <string>

#include "CLI/CLI.hpp"
#include "protos/vmm/v1/vmm.grpc.pb.h"

namespace airlock::cli {

void AddTemplateCommand(CLI::App& app, int* exit_code);

// EnsureImage applies a --pull policy to `ref` before a create: "always"
// pulls it, "missing" (the default) pulls it when the store lacks it,
// "never" leaves it to vmmd. "" means base. False (after printing why)
// when the image cannot be had.
bool EnsureImage(airlock::vmm::v1::Vmm::Stub& stub, const std::string& ref,
                 const std::string& policy);

}  // namespace airlock::cli

#endif  // AIRLOCK_CLI_TEMPLATE_COMMAND_H_
