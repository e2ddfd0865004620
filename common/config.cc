#include "common/config.h"

#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/strings/ascii.h"
#include "common/paths.h"
#include "common/version.h"

namespace airlock {
namespace {

struct RuntimeOption {
  const char* name;
  const char* help;
};

// Options every daemon has. Their values land in the DaemonConfig fields.
constexpr RuntimeOption kRuntimeOptions[] = {
    {"config", "read options from FILE (lines \"key = value\"); flags win"},
    {"runtime-dir", "private dir of sockets and pid files (default: $AIRLOCK_RUNTIME_DIR, /run/airlock as root, else $XDG_RUNTIME_DIR/airlock)"},
    {"state-dir", "dir of the SQLite state file (default: $AIRLOCK_STATE_DIR, /var/lib/airlock as root, else ~/.local/state/airlock)"},
    {"socket", "Unix socket to serve on (default: <runtime-dir>/<daemon>.sock)"},
    {"listen-tcp", "also listen on HOST:PORT over TCP; requires mTLS (--tls-cert, --tls-key, --tls-client-ca)"},
    {"tls-cert", "PEM server certificate for --listen-tcp"},
    {"tls-key", "PEM private key for --listen-tcp"},
    {"tls-client-ca", "PEM CA that client certificates must chain to"},
    {"log-level", "debug, info, warning or error (default info)"},
};

bool IsRuntimeOption(absl::string_view key) {
  for (const auto& o : kRuntimeOptions) {
    if (key == o.name) return true;
  }
  return false;
}

std::string HelpText(absl::string_view name,
                     const std::vector<OptionSpec>& extra) {
  std::string out = absl::StrCat("Usage: ", name, " [OPTIONS]\n\nAirlock ", name,
                                 " daemon ", kVersion, ".\n\nOptions:\n");
  auto line = [&out](absl::string_view opt, absl::string_view help) {
    std::string flag = absl::StrCat("  --", opt, "=VALUE");
    if (flag.size() < 28) flag.resize(28, ' ');
    absl::StrAppend(&out, flag, " ", help, "\n");
  };
  for (const auto& o : kRuntimeOptions) line(o.name, o.help);
  for (const auto& o : extra) {
    line(o.name, o.default_value.empty()
                     ? o.help
                     : absl::StrCat(o.help, " (default ", o.default_value, ")"));
  }
  absl::StrAppend(&out, "  --help                      show this help\n",
                  "  --version                   show the version\n");
  return out;
}

}  // namespace

absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(
    absl::string_view text) {
  std::map<std::string, std::string> out;
  int lineno = 0;
  std::istringstream in{std::string(text)};
  std::string raw;
  while (std::getline(in, raw)) {
    ++lineno;
    absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    size_t eq = line.find('=');
    if (eq == absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "config line ", lineno, ": expected \"key = value\", got \"", line, "\""));
    }
    std::string key(absl::StripAsciiWhitespace(line.substr(0, eq)));
    std::string value(absl::StripAsciiWhitespace(line.substr(eq + 1)));
    if (key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("config line ", lineno, ": empty key before '='"));
    }
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (out.count(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("config line ", lineno, ": \"", key, "\" is set twice"));
    }
    out[key] = value;
  }
  return out;
}

absl::Status ValidateListenConfig(const DaemonConfig& c) {
  int tls_files = !c.tls_cert.empty() + !c.tls_key.empty() + !c.tls_client_ca.empty();
  if (!c.tcp_listen.empty() && tls_files != 3) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen-tcp=", c.tcp_listen,
        " refused: TCP is served only with mutual TLS; give --tls-cert, "
        "--tls-key and --tls-client-ca (plaintext TCP is never served)"));
  }
  if (c.tcp_listen.empty() && tls_files != 0) {
    return absl::InvalidArgumentError(
        "--tls-cert/--tls-key/--tls-client-ca only apply with --listen-tcp");
  }
  if (!c.tcp_listen.empty() && c.tcp_listen.rfind(':') == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--listen-tcp=", c.tcp_listen, ": expected HOST:PORT"));
  }
  return absl::OkStatus();
}

absl::StatusOr<DaemonConfig> ParseDaemonConfig(
    absl::string_view name, const std::vector<std::string>& args,
    const std::vector<OptionSpec>& extra_options) {
  auto known = [&](absl::string_view key) {
    if (IsRuntimeOption(key)) return true;
    for (const auto& o : extra_options) {
      if (o.name == key) return true;
    }
    return false;
  };
  std::map<std::string, std::string> flags;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--help" || arg == "-h") {
      return absl::CancelledError(HelpText(name, extra_options));
    }
    if (arg == "--version") {
      return absl::CancelledError(absl::StrCat(name, " ", kVersion, "\n"));
    }
    if (!absl::ConsumePrefix(&arg, "--")) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unexpected argument \"", arg, "\"; options look like --key=value (see --help)"));
    }
    std::string key, value;
    size_t eq = arg.find('=');
    if (eq != absl::string_view::npos) {
      key = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else {
      key = std::string(arg);
      if (!known(key)) {
        return absl::InvalidArgumentError(
            absl::StrCat("unknown option --", key, " (see ", name, " --help)"));
      }
      if (i + 1 >= args.size()) {
        return absl::InvalidArgumentError(absl::StrCat("--", key, " needs a value"));
      }
      value = args[++i];
    }
    if (!known(key)) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option --", key, " (see ", name, " --help)"));
    }
    flags[key] = value;
  }

  std::map<std::string, std::string> merged;
  if (auto it = flags.find("config"); it != flags.end()) {
    std::ifstream f(it->second);
    if (!f) {
      return absl::NotFoundError(absl::StrCat("cannot read config file ", it->second));
    }
    std::stringstream buf;
    buf << f.rdbuf();
    auto file = ParseConfigFile(buf.str());
    if (!file.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(it->second, ": ", file.status().message()));
    }
    for (const auto& [k, v] : *file) {
      if (!known(k) || k == "config") {
        return absl::InvalidArgumentError(
            absl::StrCat(it->second, ": unknown key \"", k, "\" (see ", name, " --help)"));
      }
      merged[k] = v;
    }
  }
  for (const auto& [k, v] : flags) merged[k] = v;

  DaemonConfig c;
  c.name = std::string(name);
  auto take = [&merged](const char* key, const std::string& def) {
    auto it = merged.find(key);
    return it == merged.end() ? def : it->second;
  };
  c.runtime_dir = take("runtime-dir", DefaultRuntimeDir());
  c.state_dir = take("state-dir", DefaultStateDir());
  c.socket_path = take("socket", absl::StrCat(c.runtime_dir, "/", name, ".sock"));
  c.tcp_listen = take("listen-tcp", "");
  c.tls_cert = take("tls-cert", "");
  c.tls_key = take("tls-key", "");
  c.tls_client_ca = take("tls-client-ca", "");
  std::string level = take("log-level", "info");
  if (!ParseLogLevel(level, &c.log_level)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--log-level=", level, ": expected debug, info, warning or error"));
  }
  for (const auto& o : extra_options) c.options[o.name] = take(o.name.c_str(), o.default_value);
  if (absl::Status s = ValidateListenConfig(c); !s.ok()) return s;
  return c;
}

}  // namespace airlock
