#include "guest/users.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/fd_io.h"

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

namespace {

bool IdTaken(absl::string_view table, uint32_t id) {
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    std::vector<absl::string_view> f = absl::StrSplit(line, ':');
    uint32_t v;
    if (f.size() >= 3 && absl::SimpleAtoi(f[2], &v) && v == id) return true;
  }
  return false;
}

bool NameTaken(absl::string_view table, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(table, '\n')) {
    if (line.substr(0, line.find(':')) == name) return true;
  }
  return false;
}

absl::Status Append(const std::string& path, const std::string& line) {
  std::string text = ReadFileToString(path);
  if (!text.empty() && text.back() != '\n') text += "\n";
  text += line + "\n";
  struct stat st;
  mode_t mode = stat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 0644;
  return ReplaceFile(path, text, mode);
}

}  // namespace

AgentUserPlan PlanAgentUser(absl::string_view passwd, absl::string_view group, bool has_bash) {
  AgentUserPlan plan;
  if (NameTaken(passwd, "agent")) return plan;
  plan.needed = true;
  while (IdTaken(passwd, plan.uid)) ++plan.uid;
  plan.gid = plan.uid;
  while (IdTaken(group, plan.gid) && !NameTaken(group, "agent")) ++plan.gid;
  plan.passwd_line = absl::StrCat("agent:x:", plan.uid, ":", plan.gid, ":agent:/home/agent:",
                                  has_bash ? "/bin/bash" : "/bin/sh");
  if (!NameTaken(group, "agent")) plan.group_line = absl::StrCat("agent:x:", plan.gid, ":");
  plan.shadow_line = "agent:*:19000:0:99999:7:::";
  return plan;
}

absl::Status EnsureAgentUser(const std::string& root) {
  std::string passwd = ReadFileToString(root + "/etc/passwd");
  std::string group = ReadFileToString(root + "/etc/group");
  struct stat st;
  bool bash = stat((root + "/bin/bash").c_str(), &st) == 0;
  AgentUserPlan plan = PlanAgentUser(passwd, group, bash);
  if (!plan.needed) return absl::OkStatus();
  mkdir((root + "/etc").c_str(), 0755);
  if (absl::Status s = Append(root + "/etc/passwd", plan.passwd_line); !s.ok()) return s;
  if (!plan.group_line.empty()) {
    if (absl::Status s = Append(root + "/etc/group", plan.group_line); !s.ok()) return s;
  }
  if (stat((root + "/etc/shadow").c_str(), &st) == 0) {
    if (absl::Status s = Append(root + "/etc/shadow", plan.shadow_line); !s.ok()) return s;
  }
  for (const char* d : {"/home", "/home/agent", "/home/agent/workspace"}) {
    std::string p = root + d;
    mkdir(p.c_str(), 0755);
    if (std::string(d) != "/home" && chown(p.c_str(), plan.uid, plan.gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot chown ", p, ": ", strerror(errno)));
    }
  }
  return absl::OkStatus();
}

}  // namespace airlock::guest
