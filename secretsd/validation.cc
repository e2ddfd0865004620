#include "secretsd/validation.h"

#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace airlock::secretsd {
namespace {

constexpr size_t kMaxEnvName = 128;
constexpr size_t kMaxServiceHandle = 64;
constexpr size_t kMinPlaceholder = 8;
constexpr size_t kMaxPlaceholder = 128;

// Variables a guest needs for itself; a placeholder in one would break the
// guest (PATH, HOME) or its egress (the proxy variables).
constexpr const char* kReservedEnv[] = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "PWD",
    "HOSTNAME",
    "LANG",
    "TZ",
    "LD_PRELOAD",
    "LD_LIBRARY_PATH",
    "LD_AUDIT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "FTP_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
};

bool ValidLabel(absl::string_view label) {
  if (label.empty() || label.size() > 63) return false;
  if (label.front() == '-' || label.back() == '-') return false;
  for (char c : label) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-')) return false;
  }
  return true;
}

// Checks a lowercase DNS name without a trailing dot.
bool ValidDnsName(absl::string_view name) {
  if (name.empty() || name.size() > 253) return false;
  for (absl::string_view label : absl::StrSplit(name, '.')) {
    if (!ValidLabel(label)) return false;
  }
  return true;
}

std::string Lower(absl::string_view s) { return absl::AsciiStrToLower(s); }

// Refuses the variables of kReservedEnv; `any_case` also refuses them
// spelled in another case.
absl::Status CheckNotReservedEnv(absl::string_view env, bool any_case) {
  for (const char* reserved : kReservedEnv) {
    if (any_case ? absl::EqualsIgnoreCase(env, reserved) : env == reserved) {
      return absl::InvalidArgumentError(absl::StrCat(
          "env ", QuoteForMessage(env), " is reserved: the guest needs that variable for itself"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string QuoteForMessage(absl::string_view text) {
  constexpr size_t kMax = 64;
  bool cut = text.size() > kMax;
  return absl::StrCat("\"", absl::CHexEscape(text.substr(0, kMax)), cut ? "...\"" : "\"");
}

absl::Status ValidateSandboxName(absl::string_view name) {
  if (name.empty()) return absl::InvalidArgumentError("sandbox is empty");
  // vmmd's rule for sandbox names (vmmd/resources.cc), so every sandbox
  // vmmd accepts can hold secrets.
  bool ok = name.size() <= 63 && absl::ascii_isalnum(name[0]);
  for (char c : name) {
    if (!(absl::ascii_isalnum(c) || c == '-' || c == '.')) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sandbox ", QuoteForMessage(name),
        " is not a valid sandbox name: use up to 63 letters, digits, '-' and '.', starting "
        "with a letter or digit"));
  }
  if (name == "global") {
    return absl::InvalidArgumentError(
        "sandbox \"global\" is reserved: it is the scope of global secrets' ids");
  }
  return absl::OkStatus();
}

absl::Status ValidateEnvName(absl::string_view env) {
  if (env.empty()) return absl::InvalidArgumentError("env is empty");
  bool ok = env.size() <= kMaxEnvName && !absl::ascii_isdigit(env[0]);
  for (char c : env) {
    if (!(absl::ascii_isupper(c) || absl::ascii_isdigit(c) || c == '_')) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("env ", QuoteForMessage(env),
                     " is not a valid variable name: use [A-Z_][A-Z0-9_]*, at most ", kMaxEnvName,
                     " characters"));
  }
  return CheckNotReservedEnv(env, /*any_case=*/false);
}

absl::Status ValidateKitEnvName(absl::string_view env) {
  if (env.empty()) return absl::InvalidArgumentError("env is empty");
  bool ok = env.size() <= kMaxEnvName && !absl::ascii_isdigit(env[0]);
  for (char c : env) {
    if (!(absl::ascii_isalnum(c) || c == '_')) ok = false;
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("env ", QuoteForMessage(env),
                     " is not a valid variable name: use [A-Za-z_][A-Za-z0-9_]*, at most ",
                     kMaxEnvName, " characters"));
  }
  return CheckNotReservedEnv(env, /*any_case=*/true);
}

absl::Status ValidateServiceHandle(absl::string_view service) {
  if (service.empty()) return absl::InvalidArgumentError("service is empty");
  bool ok = service.size() <= kMaxServiceHandle &&
            (absl::ascii_islower(service[0]) || absl::ascii_isdigit(service[0]));
  for (char c : service) {
    if (!(absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-' || c == '.' || c == '_')) {
      ok = false;
    }
  }
  if (!ok) {
    return absl::InvalidArgumentError(
        absl::StrCat("service ", QuoteForMessage(service), " is not a service handle: use up to ",
                     kMaxServiceHandle,
                     " lowercase letters, digits, '-', '.' and '_', starting with a letter or "
                     "digit"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> NormalizeHostName(absl::string_view host) {
  std::string h = Lower(host);
  if (absl::EndsWith(h, ".")) h.pop_back();
  if (!ValidDnsName(h)) {
    return absl::InvalidArgumentError(
        absl::StrCat("domain ", QuoteForMessage(host),
                     " is not a DNS host name (labels of a-z, 0-9 and '-'; no wildcard, no "
                     "port)"));
  }
  return h;
}

absl::StatusOr<std::string> NormalizeHostPattern(absl::string_view host) {
  std::string h = Lower(host);
  if (absl::EndsWith(h, ".")) h.pop_back();
  absl::string_view base = h;
  bool wildcard = absl::ConsumePrefix(&base, "*.");
  bool ok = ValidDnsName(base);
  if (ok && wildcard && base.find('.') == absl::string_view::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("hosts: ", QuoteForMessage(host),
                     " is too broad; a wildcard needs at least two labels after \"*.\""));
  }
  if (!ok) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hosts: ", QuoteForMessage(host),
        " is not a DNS name (labels of a-z, 0-9 and '-'; \"*.\" allowed only as the first "
        "label)"));
  }
  return h;
}

absl::StatusOr<std::string> NormalizeRequestHost(absl::string_view host) {
  std::string h = Lower(host);
  size_t colon = h.rfind(':');
  uint32_t port;
  if (colon != std::string::npos && absl::SimpleAtoi(h.substr(colon + 1), &port)) {
    h.resize(colon);
  }
  if (absl::EndsWith(h, ".")) h.pop_back();
  if (!ValidDnsName(h)) {
    return absl::InvalidArgumentError(
        absl::StrCat("host ", QuoteForMessage(host), " is not a DNS name"));
  }
  return h;
}

bool HostMatches(absl::string_view pattern, absl::string_view host) {
  absl::string_view base = pattern;
  if (!absl::ConsumePrefix(&base, "*.")) return pattern == host;
  if (host.size() <= base.size() + 1) return false;
  absl::string_view label = host.substr(0, host.size() - base.size() - 1);
  return absl::EndsWith(host, base) && host[label.size()] == '.' &&
         label.find('.') == absl::string_view::npos;
}

absl::Status ValidatePlaceholder(absl::string_view placeholder) {
  if (placeholder.size() < kMinPlaceholder || placeholder.size() > kMaxPlaceholder) {
    return absl::InvalidArgumentError(absl::StrCat("placeholder must be ", kMinPlaceholder, " to ",
                                                   kMaxPlaceholder, " characters long"));
  }
  for (char c : placeholder) {
    if (!(absl::ascii_isalnum(c) || c == '.' || c == '_' || c == '-')) {
      return absl::InvalidArgumentError(
          "placeholder may hold only letters, digits, '.', '_' and '-'");
    }
  }
  if (placeholder == "proxy-managed") {
    return absl::InvalidArgumentError(
        "placeholder \"proxy-managed\" is reserved for built-in services");
  }
  return absl::OkStatus();
}

absl::Status ValidateValue(absl::string_view value) {
  if (value.empty()) return absl::InvalidArgumentError("value is empty");
  if (value.size() > kMaxValueBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value is longer than ", kMaxValueBytes, " bytes"));
  }
  if (value.find_first_of(absl::string_view("\0\r\n", 3)) != absl::string_view::npos) {
    return absl::InvalidArgumentError(
        "value contains a NUL, CR or LF byte (strip the trailing newline of a pasted or "
        "piped value)");
  }
  return absl::OkStatus();
}

}  // namespace airlock::secretsd
