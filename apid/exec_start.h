// What vmmd runs for a data-plane exec or createProcess: both bodies carry
// cmd, env, workingDir and user, checked and mapped here once.
#ifndef AIRLOCK_APID_EXEC_START_H_
#define AIRLOCK_APID_EXEC_START_H_

#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "apid/api_error.h"
#include "protos/vmm/v1/vmm.pb.h"

namespace airlock::apid {

// ExecStartFor fills `start` for sandbox `uid` from `body`; invalidArgument
// for an empty cmd or an env name that is empty or holds '='.
template <class Body>
std::optional<ApiError> ExecStartFor(const std::string& uid, const Body& body,
                                     airlock::vmm::v1::ExecStart* start) {
  if (body.cmd().empty() || body.cmd(0).empty()) {
    return ApiError::InvalidArgument("cmd needs at least the program to run");
  }
  start->set_sandbox(uid);
  for (const auto& a : body.cmd()) start->add_argv(a);
  for (const auto& [k, v] : body.env()) {
    if (k.empty() || k.find('=') != std::string::npos) {
      return ApiError::InvalidArgument(absl::StrCat("env name \"", k, "\" is not valid"));
    }
    start->add_env(absl::StrCat(k, "=", v));
  }
  start->set_workdir(body.working_dir());
  start->set_user(body.user());
  return std::nullopt;
}

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_EXEC_START_H_
