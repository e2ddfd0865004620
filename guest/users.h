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

// AgentUserPlan is what makes the "agent" user exist in an image that
// lacks it: uid and gid 1000 (or the first free id from 1000), home
// /home/agent, bash when the image has it, else /bin/sh.
struct AgentUserPlan {
  bool needed = false;
  uint32_t uid = 1000, gid = 1000;
  std::string passwd_line, group_line, shadow_line;
};

// PlanAgentUser decides from the image's passwd and group contents.
AgentUserPlan PlanAgentUser(absl::string_view passwd, absl::string_view group, bool has_bash);

// EnsureAgentUser applies the plan under `root` (appending to etc/passwd,
// etc/group and, when present, etc/shadow) and creates
// /home/agent/workspace owned by the user. Nothing when "agent" exists.
absl::Status EnsureAgentUser(const std::string& root);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_USERS_H_
