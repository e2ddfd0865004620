// Conversions between absl::Status (used by all domain code) and
// grpc::Status (used only at the gRPC surface).
#ifndef AIRLOCK_COMMON_STATUS_H_
#define AIRLOCK_COMMON_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace airlock {

// ToGrpc maps an absl::Status to the grpc::Status with the same code and
// message.
inline grpc::Status ToGrpc(const absl::Status& s) {
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()),
                      std::string(s.message()));
}

// FromGrpc maps a grpc::Status to the absl::Status with the same code and
// message.
inline absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      s.error_message());
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_STATUS_H_
