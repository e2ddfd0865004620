// Who may receive plaintext: the one security decision of secretsd. Only
// proxyd may call Resolve and only vmmd may call ResolveRegistry, and each
// is recognized by what the transport proves — the kernel's peer
// credentials of a Unix connection plus the binary that process runs, or
// the verified client certificate of an mTLS connection — never by
// anything in the request.
#ifndef AIRLOCK_SECRETSD_RESOLVER_AUTH_H_
#define AIRLOCK_SECRETSD_RESOLVER_AUTH_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace airlock::secretsd {

// CallerIdentity is what the transport proved about an RPC's caller.
struct CallerIdentity {
  enum class Transport { kUnknown, kUnix, kTls };
  Transport transport = Transport::kUnknown;
  // kUnix: SO_PEERCRED, taken when the caller connected.
  pid_t pid = 0;
  uid_t uid = 0;
  // kTls: common names of the client certificate the server verified
  // against --tls-client-ca.
  std::vector<std::string> tls_common_names;
};

// ResolverPolicy says who proxyd and vmmd are.
struct ResolverPolicy {
  // secretsd's effective uid; a Unix caller must run as it or as root.
  uid_t uid = 0;
  // Canonical path of the proxyd binary; empty refuses every Unix caller
  // of Resolve.
  std::string proxyd_exe;
  // Common name of proxyd's client certificate; empty refuses every TLS
  // caller of Resolve.
  std::string proxyd_tls_name;
  // Canonical path of the vmmd binary; empty refuses every Unix caller of
  // ResolveRegistry.
  std::string vmmd_exe;
  // Common name of vmmd's client certificate; empty refuses every TLS
  // caller of ResolveRegistry.
  std::string vmmd_tls_name;
};

// ExpectedCaller is one daemon as the transport can prove it.
struct ExpectedCaller {
  // Its name ("proxyd"): the reason of an allowed decision, and in refusals
  // with the options that configure it (--<name>-exe, --<name>-tls-name).
  std::string name;
  // Canonical path of its binary; empty refuses every Unix caller.
  std::string exe;
  // Common name of its client certificate; empty refuses every TLS caller.
  std::string tls_name;
};

// ResolverDecision is the verdict and, for the log, why and who.
struct ResolverDecision {
  bool allowed = false;
  // Why it was refused (or the name of the daemon it is, "proxyd"); safe
  // to log, never shown to callers.
  std::string reason;
  // The caller as far as known: "pid 12 uid 1000 exe /x" or "tls cn=x".
  std::string caller;
};

// AuthorizeCaller decides whether `caller` is the daemon `expected`. A
// Unix caller is when its uid is `uid` or 0, the canonical path of
// /proc/<pid>/exe is expected.exe, and that is still the same file (device
// and inode) as the one at expected.exe — a binary replaced since the
// caller started is refused. A TLS caller is when a verified common name
// equals expected.tls_name.
//
// This separates one daemon from other programs of the same user; it is
// not a boundary against code that may already ptrace that daemon (same
// uid without Yama restrictions). The guest reaches no socket of secretsd
// at all.
ResolverDecision AuthorizeCaller(const CallerIdentity& caller, uid_t uid,
                                 const ExpectedCaller& expected);

// AuthorizeResolver decides whether `caller` is proxyd (policy.proxyd_exe,
// policy.proxyd_tls_name), the only caller of Resolve; see AuthorizeCaller.
ResolverDecision AuthorizeResolver(const CallerIdentity& caller, const ResolverPolicy& policy);

// AuthorizeRegistryResolver decides whether `caller` is vmmd
// (policy.vmmd_exe, policy.vmmd_tls_name), the only caller of
// ResolveRegistry; see AuthorizeCaller. proxyd is refused like any other
// program.
ResolverDecision AuthorizeRegistryResolver(const CallerIdentity& caller,
                                           const ResolverPolicy& policy);

// CheckPolicy refuses a policy under which one caller could be both
// daemons: proxyd and vmmd named by the same binary or the same common
// name (INVALID_ARGUMENT naming the options).
absl::Status CheckPolicy(const ResolverPolicy& policy);

// FindDaemonExecutable is the canonical path of the daemon binary `name`
// ("proxyd", "vmmd"): `configured` when given (INVALID_ARGUMENT naming
// --<name>-exe when it is not an executable file), else the first
// executable of <dir of self_exe>/<name> (installed side by side) and
// <dir of self_exe>/../<name>/<name> (Bazel's bazel-bin layout), where
// self_exe is canonical already. "" when neither exists.
absl::StatusOr<std::string> FindDaemonExecutable(const std::string& name,
                                                 const std::string& configured,
                                                 const std::string& self_exe);

// CanonicalPath is realpath(3) of `path`; NOT_FOUND when it does not
// resolve.
absl::StatusOr<std::string> CanonicalPath(const std::string& path);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_RESOLVER_AUTH_H_
