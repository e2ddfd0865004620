// Daemon configuration: command-line flags and an optional config file,
// shared by all six daemons. Flags win over the file; unknown keys in
// either are errors.
#ifndef AIRLOCK_COMMON_CONFIG_H_
#define AIRLOCK_COMMON_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/log.h"

namespace airlock {

// OptionSpec declares one daemon-specific option ("image-dir"). Its value is
// read from --name=VALUE, --name VALUE or "name = VALUE" in the config file.
struct OptionSpec {
  std::string name;
  std::string help;
  std::string default_value;
};

// DaemonConfig is the complete configuration of one daemon process.
struct DaemonConfig {
  // Daemon name: vmmd, proxyd, secretsd, gitd or policyd.
  std::string name;
  // Private directory of sockets and pid files (0700).
  std::string runtime_dir;
  // Directory of the daemon's SQLite state file and other durable files.
  std::string state_dir;
  // Unix socket to serve on; default <runtime_dir>/<name>.sock.
  std::string socket_path;
  // Optional TCP address "host:port"; needs all three TLS files (mTLS).
  std::string tcp_listen;
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  LogLevel log_level = LogLevel::kInfo;
  // Values of the daemon-specific options, defaults filled in.
  std::map<std::string, std::string> options;

  // StateFile is <state_dir>/<name>.db.
  std::string StateFile() const { return state_dir + "/" + name + ".db"; }
};

// ParseConfigFile reads "key = value" lines; '#' starts a comment line and
// blank lines are skipped. Errors name the line.
absl::StatusOr<std::map<std::string, std::string>> ParseConfigFile(
    absl::string_view text);

// ParseDaemonConfig builds the configuration from argv (argv[0] skipped) and,
// when --config FILE is given, from that file. Returns a status with code
// kCancelled and the help or version text as message when --help or
// --version was asked for. Also runs ValidateListenConfig.
absl::StatusOr<DaemonConfig> ParseDaemonConfig(
    absl::string_view name, const std::vector<std::string>& args,
    const std::vector<OptionSpec>& extra_options);

// ValidateListenConfig refuses TCP listening without mTLS: --listen-tcp needs
// --tls-cert, --tls-key and --tls-client-ca, and TLS files without TCP are a
// mistake too.
absl::Status ValidateListenConfig(const DaemonConfig& config);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_CONFIG_H_
