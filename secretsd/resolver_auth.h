// Who may receive plaintext: the one security decision of secretsd. Only
// proxyd may call Resolve, and proxyd is recognized by what the transport
// proves — the kernel's peer credentials of a Unix connection plus the
// binary that process runs, or the verified client certificate of an mTLS
// connection — never by anything in the request.
#ifndef AIRLOCK_SECRETSD_RESOLVER_AUTH_H_
#define AIRLOCK_SECRETSD_RESOLVER_AUTH_H_

#include <sys/types.h>

#include <string>
#include <vector>

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

// ResolverPolicy says who proxyd is.
struct ResolverPolicy {
  // secretsd's effective uid; a Unix caller must run as it or as root.
  uid_t uid = 0;
  // Canonical path of the proxyd binary; empty refuses every Unix caller.
  std::string proxyd_exe;
  // Common name of proxyd's client certificate; empty refuses every TLS
  // caller.
  std::string proxyd_tls_name;
};

// ResolverDecision is the verdict and, for the log, why and who.
struct ResolverDecision {
  bool allowed = false;
  // Why it was refused (or "proxyd"); safe to log, never shown to callers.
  std::string reason;
  // The caller as far as known: "pid 12 uid 1000 exe /x" or "tls cn=x".
  std::string caller;
};

// AuthorizeResolver decides whether `caller` is proxyd. A Unix caller is
// when its uid is policy.uid or 0, the canonical path of
// /proc/<pid>/exe is policy.proxyd_exe, and that is still the same file
// (device and inode) as the one at policy.proxyd_exe — a binary replaced
// since the caller started is refused. A TLS caller is when a verified
// common name equals policy.proxyd_tls_name.
//
// This separates proxyd from other programs of the same user; it is not a
// boundary against code that may already ptrace proxyd (same uid without
// Yama restrictions). The guest reaches no socket of secretsd at all.
ResolverDecision AuthorizeResolver(const CallerIdentity& caller, const ResolverPolicy& policy);

// FindProxydExecutable is the canonical path of proxyd: `configured` when
// given (INVALID_ARGUMENT when it is not an executable file), else the
// first executable of <dir of self_exe>/proxyd (installed side by side)
// and <dir of self_exe>/../proxyd/proxyd (Bazel's bazel-bin layout), where
// self_exe is canonical already. "" when neither exists.
absl::StatusOr<std::string> FindProxydExecutable(const std::string& configured,
                                                 const std::string& self_exe);

// CanonicalPath is realpath(3) of `path`; NOT_FOUND when it does not
// resolve.
absl::StatusOr<std::string> CanonicalPath(const std::string& path);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_RESOLVER_AUTH_H_
