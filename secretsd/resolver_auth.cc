#include "secretsd/resolver_auth.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/peer_cred.h"

namespace airlock::secretsd {
namespace {

bool ExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

ResolverDecision Refuse(std::string caller, std::string reason) {
  return ResolverDecision{false, std::move(reason), std::move(caller)};
}

ResolverDecision AuthorizeUnix(const CallerIdentity& c, const ResolverPolicy& p) {
  std::string who = absl::StrCat("pid ", c.pid, " uid ", c.uid);
  if (c.uid != p.uid && c.uid != 0) {
    return Refuse(who,
                  absl::StrCat("uid ", c.uid, " is neither secretsd's uid ", p.uid, " nor root"));
  }
  if (p.proxyd_exe.empty()) {
    return Refuse(who, "no proxyd binary is known; start secretsd with --proxyd-exe");
  }
  auto exe = PeerExecutable(c.pid);
  if (!exe.ok()) return Refuse(who, std::string(exe.status().message()));
  who = absl::StrCat(who, " exe ", *exe);
  auto real = CanonicalPath(*exe);
  if (!real.ok()) {
    return Refuse(who, "the caller's executable is gone (replaced since it started?); restart it");
  }
  if (*real != p.proxyd_exe) {
    return Refuse(who, absl::StrCat("its executable is not proxyd (", p.proxyd_exe, ")"));
  }
  // The same path must also be the same file. /proc/<pid>/exe of a process
  // whose binary lives in a mount this namespace cannot see reads as a path
  // inside that mount (a container's own "/usr/local/bin/proxyd"), which
  // realpath then resolves here; only the device and inode tell them apart.
  struct stat running, current;
  std::string proc_exe = absl::StrCat("/proc/", c.pid, "/exe");
  if (stat(proc_exe.c_str(), &running) != 0 || stat(p.proxyd_exe.c_str(), &current) != 0 ||
      running.st_dev != current.st_dev || running.st_ino != current.st_ino) {
    return Refuse(who, absl::StrCat("the caller's executable is not the file now at ", p.proxyd_exe,
                                    "; restart proxyd"));
  }
  return ResolverDecision{true, "proxyd", who};
}

ResolverDecision AuthorizeTls(const CallerIdentity& c, const ResolverPolicy& p) {
  std::string who = absl::StrCat("tls cn=", absl::StrJoin(c.tls_common_names, ","));
  if (p.proxyd_tls_name.empty()) {
    return Refuse(who, "no --proxyd-tls-name is configured");
  }
  for (const auto& cn : c.tls_common_names) {
    if (cn == p.proxyd_tls_name) return ResolverDecision{true, "proxyd", who};
  }
  return Refuse(who,
                absl::StrCat("the client certificate's common name is not ", p.proxyd_tls_name));
}

}  // namespace

ResolverDecision AuthorizeResolver(const CallerIdentity& caller, const ResolverPolicy& policy) {
  switch (caller.transport) {
    case CallerIdentity::Transport::kUnix:
      return AuthorizeUnix(caller, policy);
    case CallerIdentity::Transport::kTls:
      return AuthorizeTls(caller, policy);
    case CallerIdentity::Transport::kUnknown:
      break;
  }
  return Refuse("unknown", "the transport proves no identity for this caller");
}

absl::StatusOr<std::string> CanonicalPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", path, ": ", strerror(errno)));
  }
  return std::string(buf);
}

absl::StatusOr<std::string> FindProxydExecutable(const std::string& configured,
                                                 const std::string& self_exe) {
  if (!configured.empty()) {
    auto real = CanonicalPath(configured);
    if (!real.ok() || !ExecutableFile(*real)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--proxyd-exe=", configured, " is not an executable file"));
    }
    return *real;
  }
  std::string dir = self_exe.substr(0, self_exe.rfind('/'));
  for (const std::string& candidate :
       {absl::StrCat(dir, "/proxyd"), absl::StrCat(dir, "/../proxyd/proxyd")}) {
    auto real = CanonicalPath(candidate);
    if (real.ok() && ExecutableFile(*real)) return *real;
  }
  return std::string();
}

}  // namespace airlock::secretsd
