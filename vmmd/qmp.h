// A client of QEMU's machine protocol (QMP) on a Unix socket: enough to
// pause a VM, migrate its state out and quit it. One command at a time;
// events QEMU sends meanwhile are skipped.
#ifndef AIRLOCK_VMMD_QMP_H_
#define AIRLOCK_VMMD_QMP_H_

#include <chrono>
#include <string>

#include "absl/status/statusor.h"
#include "common/fd_io.h"
#include "nlohmann/json.hpp"

namespace airlock::vmmd {

class QmpClient {
 public:
  // Connect opens `socket`, reads QEMU's greeting and leaves the
  // capabilities negotiation; it retries until `timeout` while the socket
  // is not there yet (QEMU still starting).
  static absl::StatusOr<QmpClient> Connect(const std::string& socket,
                                           std::chrono::milliseconds timeout);

  // Execute runs `command` with `arguments` (an object, or null for none)
  // and returns its "return" value. QEMU's "error" becomes FAILED_PRECONDITION
  // with its description; a closed socket or `timeout` UNAVAILABLE.
  absl::StatusOr<nlohmann::json> Execute(const std::string& command,
                                         const nlohmann::json& arguments = nullptr,
                                         std::chrono::milliseconds timeout =
                                             std::chrono::seconds(10));

  QmpClient(QmpClient&&) = default;

 private:
  explicit QmpClient(int fd) : fd_(std::make_unique<UniqueFd>(fd)) {}
  // ReadMessage is the next JSON line QEMU sends.
  absl::StatusOr<nlohmann::json> ReadMessage(std::chrono::steady_clock::time_point deadline);

  std::unique_ptr<UniqueFd> fd_;
  std::string buffer_;
};

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_QMP_H_
