// Running a command in a guest from vmmd itself (clone setup, kit hooks),
// as opposed to a user's exec that vmm_service relays.
#ifndef AIRLOCK_VMMD_GUEST_RUN_H_
#define AIRLOCK_VMMD_GUEST_RUN_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "grpcpp/channel.h"

namespace airlock::vmmd {

// GuestCommand is what to run: argv, as whom (empty: the template's
// default user), with which extra environment ("NAME=value"; the agent's
// baseline is always there), detached or waited for.
struct GuestCommand {
  std::vector<std::string> argv;
  std::string user;
  std::vector<std::string> env;
  bool detach = false;
};

// GuestRun runs `cmd` through the guest agent at `channel` and returns its
// exit code with stdout and stderr together (a detached command: 0 once
// started). Gives up after five minutes.
absl::StatusOr<std::pair<int, std::string>> GuestRun(std::shared_ptr<grpc::Channel> channel,
                                                      const GuestCommand& cmd);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_GUEST_RUN_H_
