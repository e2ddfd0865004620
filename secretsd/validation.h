// What secretsd accepts in a request — sandbox names, environment variable
// names, Kit service handles, host names and patterns, placeholders and
// values — and how a host pattern matches a request's host. Every error
// names the field it is about and never quotes a secret value or a
// placeholder.
#ifndef AIRLOCK_SECRETSD_VALIDATION_H_
#define AIRLOCK_SECRETSD_VALIDATION_H_

#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::secretsd {

inline constexpr size_t kMaxValueBytes = 64 * 1024;
inline constexpr size_t kMaxHostsPerSecret = 32;

// ValidateSandboxName accepts 1 to 63 characters of lowercase letters,
// digits and '-', starting with a letter or digit. "global" is reserved so
// that no sandbox-scoped id ("x@<sandbox>") can equal a global one
// ("x@global").
absl::Status ValidateSandboxName(absl::string_view name);

// ValidateEnvName accepts [A-Z_][A-Z0-9_]* up to 128 characters, except
// variables the guest platform itself needs (PATH, HOME, LD_PRELOAD, the
// *_PROXY family, ...), which a placeholder would break.
absl::Status ValidateEnvName(absl::string_view env);

// ValidateKitEnvName accepts a Kit's variable name: [A-Za-z_][A-Za-z0-9_]*
// up to 128 characters, except the variables ValidateEnvName reserves, in
// any case (curl honours http_proxy as well as HTTP_PROXY).
absl::Status ValidateKitEnvName(absl::string_view env);

// ValidateServiceHandle accepts a Kit's service handle: 1 to 64 characters
// of lowercase letters, digits, '-', '.' and '_', starting with a letter or
// digit.
absl::Status ValidateServiceHandle(absl::string_view service);

// NormalizeHostName is NormalizeHostPattern without wildcards: one DNS
// name, lowercased, one trailing '.' dropped. Its error names the field
// "domain".
absl::StatusOr<std::string> NormalizeHostName(absl::string_view host);

// NormalizeHostPattern lowercases `host`, drops one trailing '.', and
// accepts a DNS name (labels of [a-z0-9-], not starting or ending with
// '-', at most 63 each, 253 in all), optionally with "*." as the first
// label; a wildcard needs at least two labels after it ("*.example.com",
// never "*.com").
absl::StatusOr<std::string> NormalizeHostPattern(absl::string_view host);

// NormalizeRequestHost lowercases the host of an outgoing request, drops a
// ":port" and one trailing '.', and checks it is a DNS name.
absl::StatusOr<std::string> NormalizeRequestHost(absl::string_view host);

// HostMatches is true when `host` equals `pattern`, or `pattern` is
// "*.<base>" and `host` is exactly one label followed by ".<base>". Both
// are normalized already.
bool HostMatches(absl::string_view pattern, absl::string_view host);

// ValidatePlaceholder accepts 8 to 128 characters of [A-Za-z0-9._-] other
// than "proxy-managed".
absl::Status ValidatePlaceholder(absl::string_view placeholder);

// ValidateValue accepts 1 byte to kMaxValueBytes without NUL, CR or LF (a
// value is placed in HTTP headers, where those would split or end it).
absl::Status ValidateValue(absl::string_view value);

// QuoteForMessage is `text` in double quotes for an error message: at most
// 64 characters, control and non-ASCII bytes escaped. Never for values.
std::string QuoteForMessage(absl::string_view text);

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_VALIDATION_H_
