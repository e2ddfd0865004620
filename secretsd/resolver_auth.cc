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

ResolverDecision AuthorizeUnix(const CallerIdentity& c, uid_t uid, const ExpectedCaller& e) {
  std::string who = absl::StrCat("pid ", c.pid, " uid ", c.uid);
  if (c.uid != uid && c.uid != 0) {
    return Refuse(who,
                  absl::StrCat("uid ", c.uid, " is neither secretsd's uid ", uid, " nor root"));
  }
  if (e.exe.empty()) {
    return Refuse(who, absl::StrCat("no ", e.name, " binary is known; start secretsd with --",
                                    e.name, "-exe"));
  }
  auto exe = PeerExecutable(c.pid);
  if (!exe.ok()) return Refuse(who, std::string(exe.status().message()));
  who = absl::StrCat(who, " exe ", *exe);
  auto real = CanonicalPath(*exe);
  if (!real.ok()) {
    return Refuse(who, "the caller's executable is gone (replaced since it started?); restart it");
  }
  if (*real != e.exe) {
    return Refuse(who, absl::StrCat("its executable is not ", e.name, " (", e.exe, ")"));
  }
  // The same path must also be the same file. /proc/<pid>/exe of a process
  // whose binary lives in a mount this namespace cannot see reads as a path
  // inside that mount (a container's own "/usr/local/bin/proxyd"), which
  // realpath then resolves here; only the device and inode tell them apart.
  struct stat running, current;
  std::string proc_exe = absl::StrCat("/proc/", c.pid, "/exe");
  if (stat(proc_exe.c_str(), &running) != 0 || stat(e.exe.c_str(), &current) != 0 ||
      running.st_dev != current.st_dev || running.st_ino != current.st_ino) {
    return Refuse(who, absl::StrCat("the caller's executable is not the file now at ", e.exe,
                                    "; restart ", e.name));
  }
  return ResolverDecision{true, e.name, who};
}

ResolverDecision AuthorizeTls(const CallerIdentity& c, const ExpectedCaller& e) {
  std::string who = absl::StrCat("tls cn=", absl::StrJoin(c.tls_common_names, ","));
  if (e.tls_name.empty()) {
    return Refuse(who, absl::StrCat("no --", e.name, "-tls-name is configured"));
  }
  for (const auto& cn : c.tls_common_names) {
    if (cn == e.tls_name) return ResolverDecision{true, e.name, who};
  }
  return Refuse(who, absl::StrCat("the client certificate's common name is not ", e.tls_name));
}

}  // namespace

ResolverDecision AuthorizeCaller(const CallerIdentity& caller, uid_t uid,
                                 const ExpectedCaller& expected) {
  switch (caller.transport) {
    case CallerIdentity::Transport::kUnix:
      return AuthorizeUnix(caller, uid, expected);
    case CallerIdentity::Transport::kTls:
      return AuthorizeTls(caller, expected);
    case CallerIdentity::Transport::kUnknown:
      break;
  }
  return Refuse("unknown", "the transport proves no identity for this caller");
}

ResolverDecision AuthorizeResolver(const CallerIdentity& caller, const ResolverPolicy& policy) {
  return AuthorizeCaller(caller, policy.uid,
                         ExpectedCaller{"proxyd", policy.proxyd_exe, policy.proxyd_tls_name});
}

ResolverDecision AuthorizeRegistryResolver(const CallerIdentity& caller,
                                           const ResolverPolicy& policy) {
  return AuthorizeCaller(caller, policy.uid,
                         ExpectedCaller{"vmmd", policy.vmmd_exe, policy.vmmd_tls_name});
}

absl::Status CheckPolicy(const ResolverPolicy& policy) {
  // One binary or certificate as both daemons would let proxyd, which
  // handles the guest's traffic, read the host's registry credentials.
  if (!policy.proxyd_exe.empty() && policy.proxyd_exe == policy.vmmd_exe) {
    return absl::InvalidArgumentError(absl::StrCat("--proxyd-exe and --vmmd-exe both name ",
                                                   policy.proxyd_exe, "; they must differ"));
  }
  if (!policy.proxyd_tls_name.empty() && policy.proxyd_tls_name == policy.vmmd_tls_name) {
    return absl::InvalidArgumentError(
        absl::StrCat("--proxyd-tls-name and --vmmd-tls-name are both ", policy.proxyd_tls_name,
                     "; they must differ"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> CanonicalPath(const std::string& path) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return absl::NotFoundError(absl::StrCat("cannot resolve ", path, ": ", strerror(errno)));
  }
  return std::string(buf);
}

absl::StatusOr<std::string> FindDaemonExecutable(const std::string& name,
                                                 const std::string& configured,
                                                 const std::string& self_exe) {
  if (!configured.empty()) {
    auto real = CanonicalPath(configured);
    if (!real.ok() || !ExecutableFile(*real)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, "-exe=", configured, " is not an executable file"));
    }
    return *real;
  }
  std::string dir = self_exe.substr(0, self_exe.rfind('/'));
  for (const std::string& candidate :
       {absl::StrCat(dir, "/", name), absl::StrCat(dir, "/../", name, "/", name)}) {
    auto real = CanonicalPath(candidate);
    if (real.ok() && ExecutableFile(*real)) return *real;
  }
  return std::string();
}

}  // namespace airlock::secretsd
