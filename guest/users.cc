#include "guest/users.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace airlock::guest {
namespace {

// FindEntry returns the passwd fields of the entry whose name (or uid, when
// by_uid) matches.
bool FindEntry(absl::string_view passwd, absl::string_view key, bool by_uid,
               std::vector<std::string>* fields) {
  for (absl::string_view line : absl::StrSplit(passwd, '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ':');
    if (f.size() < 7) continue;
    if ((by_uid ? f[2] : f[0]) == key) {
      *fields = f;
      return true;
    }
  }
  return false;
}

}  // namespace

absl::StatusOr<GuestUser> ResolveUser(absl::string_view spec, absl::string_view passwd,
                                      absl::string_view group) {
  std::vector<std::string> f;
  std::string user(spec), group_part;
  if (size_t colon = user.find(':'); colon != std::string::npos) {
    group_part = user.substr(colon + 1);
    user = user.substr(0, colon);
  }
  if (user.empty()) {
    user = FindEntry(passwd, "agent", false, &f) ? "agent" : "root";
  }
  GuestUser u;
  uint32_t numeric;
  bool is_number = absl::SimpleAtoi(user, &numeric);
  if (FindEntry(passwd, user, is_number, &f)) {
    u.name = f[0];
    if (!absl::SimpleAtoi(f[2], &u.uid) || !absl::SimpleAtoi(f[3], &u.gid)) {
      return absl::FailedPreconditionError(absl::StrCat("bad /etc/passwd entry for ", user));
    }
    u.home = f[5].empty() ? "/" : f[5];
    u.shell = f[6].empty() ? "/bin/sh" : f[6];
  } else if (is_number) {
    u.name = user;
    u.uid = numeric;
    u.gid = numeric;
  } else {
    return absl::NotFoundError(absl::StrCat("no user \"", user, "\" in the sandbox's /etc/passwd"));
  }
  if (!group_part.empty()) {
    uint32_t g;
    if (!absl::SimpleAtoi(group_part, &g)) {
      return absl::InvalidArgumentError(absl::StrCat("group \"", group_part, "\" must be numeric"));
    }
    u.gid = g;
  }
  u.groups.push_back(u.gid);
  for (absl::string_view line : absl::StrSplit(group, '\n')) {
    std::vector<std::string> g = absl::StrSplit(line, ':');
    if (g.size() < 4) continue;
    for (absl::string_view member : absl::StrSplit(g[3], ',')) {
      gid_t gid;
      if (member == u.name && absl::SimpleAtoi(g[2], &gid) && gid != u.gid) {
        u.groups.push_back(gid);
      }
    }
  }
  return u;
}

}  // namespace airlock::guest
