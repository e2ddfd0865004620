// The one error mapping of apid's peer clients: a peer's gRPC status kept
// as it is (code and message), except that a peer not answering at all says
// which daemon and what to do.
#ifndef AIRLOCK_APID_PEER_STATUS_H_
#define AIRLOCK_APID_PEER_STATUS_H_

#include <grpcpp/support/status.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace airlock::apid {

inline absl::Status PeerStatus(const std::string& daemon, const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE &&
      s.error_message().find("connect") != std::string::npos) {
    return absl::UnavailableError(
        absl::StrCat(daemon, " is not answering; start it (airlock daemon start)"));
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace airlock::apid

#endif  // AIRLOCK_APID_PEER_STATUS_H_
