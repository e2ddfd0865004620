// Resolving users inside the guest from the template's /etc/passwd and
// /etc/group, without NSS (the agent must not load the template's libc
// plugins).
#ifndef AIRLOCK_GUEST_USERS_H_
#define AIRLOCK_GUEST_USERS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::guest {

// GuestUser is what a process needs to run as a user.
struct GuestUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;
  std::string home = "/";
  std::string shell = "/bin/sh";
};

// ResolveUser finds `spec` ("name", "uid" or "uid:gid") in the given passwd
// and group file contents. An empty spec means "agent" when that user
// exists, else root. A numeric uid without a passwd entry is accepted with
// home "/".
absl::StatusOr<GuestUser> ResolveUser(absl::string_view spec, absl::string_view passwd,
                                      absl::string_view group);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_USERS_H_
