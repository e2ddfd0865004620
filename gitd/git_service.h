// gitd's gRPC surface (airlock.git.v1.Git). Baseline and Review are built;
// the clone-mode calls answer UNIMPLEMENTED until clone mode lands.
#ifndef AIRLOCK_GITD_GIT_SERVICE_H_
#define AIRLOCK_GITD_GIT_SERVICE_H_

#include "common/state_db.h"
#include "protos/git/v1/git.grpc.pb.h"

namespace airlock::gitd {

class GitService final : public airlock::git::v1::Git::Service {
 public:
  explicit GitService(StateDb* db) : db_(db) {}

  // Init creates gitd's tables.
  absl::Status Init();

  grpc::Status Baseline(grpc::ServerContext*, const airlock::git::v1::BaselineRequest*,
                        airlock::git::v1::BaselineResponse*) override;
  grpc::Status Review(grpc::ServerContext*, const airlock::git::v1::ReviewRequest*,
                      airlock::git::v1::ReviewResponse*) override;

 private:
  StateDb* db_;
};

}  // namespace airlock::gitd

#endif  // AIRLOCK_GITD_GIT_SERVICE_H_
