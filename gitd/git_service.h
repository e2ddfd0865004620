// gitd's gRPC surface (airlock.git.v1.Git): clone-mode workspaces (the
// host repo's facts and its "sandbox-<name>" remote) and the review
// baseline of shared paths.
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

  grpc::Status PrepareClone(grpc::ServerContext*, const airlock::git::v1::PrepareCloneRequest*,
                            airlock::git::v1::PrepareCloneResponse*) override;
  grpc::Status Publish(grpc::ServerContext*, const airlock::git::v1::PublishRequest*,
                       airlock::git::v1::PublishResponse*) override;
  grpc::Status Unpublish(grpc::ServerContext*, const airlock::git::v1::UnpublishRequest*,
                         airlock::git::v1::UnpublishResponse*) override;
  grpc::Status Baseline(grpc::ServerContext*, const airlock::git::v1::BaselineRequest*,
                        airlock::git::v1::BaselineResponse*) override;
  grpc::Status Review(grpc::ServerContext*, const airlock::git::v1::ReviewRequest*,
                      airlock::git::v1::ReviewResponse*) override;

 private:
  StateDb* db_;
};

}  // namespace airlock::gitd

#endif  // AIRLOCK_GITD_GIT_SERVICE_H_
