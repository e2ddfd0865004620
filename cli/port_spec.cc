#include "cli/port_spec.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace airlock::cli {
namespace {

bool ParsePort(absl::string_view text, bool allow_empty, uint32_t* port) {
  if (text.empty()) {
    *port = 0;
    return allow_empty;
  }
  return absl::SimpleAtoi(text, port) && *port >= 1 && *port <= 65535;
}

}  // namespace

absl::StatusOr<airlock::vmm::v1::PortMapping> ParsePortSpec(absl::string_view spec) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "invalid port \"", spec, "\": ", why,
        " (expected [[HOST_IP:]HOST_PORT:]SANDBOX_PORT[/tcp], e.g. 8080:80)"));
  };
  airlock::vmm::v1::PortMapping m;
  absl::string_view rest = spec;
  if (size_t slash = rest.find('/'); slash != absl::string_view::npos) {
    m.set_protocol(std::string(rest.substr(slash + 1)));
    rest = rest.substr(0, slash);
    if (m.protocol() != "tcp") return bad("only tcp is supported");
  } else {
    m.set_protocol("tcp");
  }
  std::vector<std::string> parts;
  if (!rest.empty() && rest[0] == '[') {
    size_t close = rest.find("]:");
    if (close == absl::string_view::npos) return bad("an IPv6 address needs \"[ADDR]:\"");
    m.set_host_ip(std::string(rest.substr(1, close - 1)));
    parts = absl::StrSplit(rest.substr(close + 2), ':');
    if (parts.size() != 2) return bad("expected [ADDR]:HOST_PORT:SANDBOX_PORT");
  } else {
    parts = absl::StrSplit(rest, ':');
    if (parts.size() == 3) {
      m.set_host_ip(parts[0]);
      parts.erase(parts.begin());
    } else if (parts.size() > 3) {
      return bad("too many ':'");
    }
  }
  uint32_t sandbox_port, host_port = 0;
  if (!ParsePort(parts.back(), false, &sandbox_port)) return bad("the sandbox port must be 1..65535");
  if (parts.size() == 2 && !ParsePort(parts[0], true, &host_port)) {
    return bad("the host port must be 1..65535");
  }
  if (m.host_ip().empty()) m.set_host_ip("127.0.0.1");
  m.set_sandbox_port(sandbox_port);
  m.set_host_port(host_port);
  return m;
}

std::string FormatPortMapping(const airlock::vmm::v1::PortMapping& m) {
  bool v6 = m.host_ip().find(':') != std::string::npos;
  return absl::StrCat(v6 ? "[" : "", m.host_ip(), v6 ? "]" : "", ":", m.host_port(), "->",
                      m.sandbox_port(), "/", m.protocol().empty() ? "tcp" : m.protocol());
}

}  // namespace airlock::cli
