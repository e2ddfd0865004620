// Capability entries: the typed, versioned requests a Kit makes of the
// host. This file holds the entry and group model, the typed configs of
// the types Airlock enforces (network-policy@1/@2, credential@1,
// lifecycle@1, volume@1, port@1, resources@1, privileged@1, and Airlock's
// own dev.airlock/agent@1), and the per-entry and per-block rules of the
// spec's validateCapabilityBlock.
#ifndef AIRLOCK_COMMON_KIT_CAPABILITIES_H_
#define AIRLOCK_COMMON_KIT_CAPABILITIES_H_

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/kit/document.h"
#include "common/kit/problems.h"

namespace airlock::kit {

// Well-known capability types (the spec's own namespace).
inline constexpr absl::string_view kNetworkPolicyV1 = "com.docker.sandbox/network-policy@1";
inline constexpr absl::string_view kNetworkPolicyV2 = "com.docker.sandbox/network-policy@2";
inline constexpr absl::string_view kCredential = "com.docker.sandbox/credential@1";
inline constexpr absl::string_view kLifecycle = "com.docker.sandbox/lifecycle@1";
inline constexpr absl::string_view kVolume = "com.docker.sandbox/volume@1";
inline constexpr absl::string_view kHostMount = "com.docker.sandbox/host-mount@1";
inline constexpr absl::string_view kPort = "com.docker.sandbox/port@1";
inline constexpr absl::string_view kResources = "com.docker.sandbox/resources@1";
inline constexpr absl::string_view kPrivileged = "com.docker.sandbox/privileged@1";
inline constexpr absl::string_view kSbx = "com.docker.sandbox/sbx@1";
inline constexpr absl::string_view kLongRunning = "com.docker.sandbox/long-running@1";
inline constexpr absl::string_view kGitIdentity = "com.docker.sandbox/git-identity@1";
inline constexpr absl::string_view kKitRegistry = "com.docker.sandbox/kit-registry@1";
inline constexpr absl::string_view kAgentSessions = "com.docker.sandbox/agent-sessions@1";
inline constexpr absl::string_view kAgentInteractiveSessions =
    "com.docker.sandbox/agent-interactive-sessions@1";
inline constexpr absl::string_view kAgentContext = "com.docker.sandbox/agent-context@1";
inline constexpr absl::string_view kAgentSkills = "com.docker.sandbox/agent-skills@1";
inline constexpr absl::string_view kAgentSkill = "com.docker.sandbox/agent-skill@1";
inline constexpr absl::string_view kAcp = "com.docker.sandbox/acp@1";
inline constexpr absl::string_view kSshAgent = "com.docker.sandbox/ssh-agent@1";
inline constexpr absl::string_view kUsbDevice = "com.docker.sandbox/usb-device@1";

// Airlock's own types (outside the spec's namespace). agent@1 names the
// agent a workload runs: its default argv and the image it is installed
// into. Workload-only, at most one per Kit; it grants nothing.
inline constexpr absl::string_view kAirlockAgent = "dev.airlock/agent@1";

// IsCapabilityType checks `<namespace>/<name>@<version>`: a dotted
// lowercase namespace, a hyphenated lowercase name, an integer version
// >= 1 without leading zero. No comma can appear, which keeps the
// capabilities annotation splittable.
bool IsCapabilityType(absl::string_view type);

// IsWellKnownType reports a type this spec revision defines, or one of
// Airlock's own (kAirlockAgent); its config is decoded strictly. Any other
// type's config rides opaquely.
bool IsWellKnownType(absl::string_view type);

// WellKnownTypes lists every type IsWellKnownType reports.
const std::vector<absl::string_view>& WellKnownTypes();

// IsSingletonType reports a type a declaration block may state once.
bool IsSingletonType(absl::string_view type);

// IsConfigLessType reports a type for which stating `config` at all (even
// `{}` or null) is an error.
bool IsConfigLessType(absl::string_view type);

// TypedCapabilityTypes lists the types this library gives a typed config.
const std::vector<std::string>& TypedCapabilityTypes();

enum class Phase { kInstall, kRuntime };
const char* PhaseName(Phase phase);

// NetworkEntry is one allow or deny entry. @1 entries and @2 bare strings
// are one host with no methods and no paths: unbounded. Stating methods
// (and optionally paths) bounds the entry to matching HTTP requests.
struct NetworkEntry {
  std::vector<std::string> hosts;
  std::vector<std::string> methods;  // canonical upper case or {"ANY"}
  std::vector<std::string> paths;    // each starts with '/'
  bool bounded() const { return !methods.empty() || !paths.empty(); }
};

struct NetworkRules {
  std::vector<NetworkEntry> allow;
  std::vector<NetworkEntry> deny;
};

// NetworkPolicyConfig is network-policy@1 or @2; an absent phase grants
// nothing.
struct NetworkPolicyConfig {
  int version = 1;
  std::optional<NetworkRules> install;
  std::optional<NetworkRules> runtime;
  const std::optional<NetworkRules>& rules(Phase phase) const {
    return phase == Phase::kInstall ? install : runtime;
  }
};

struct InjectRule {
  std::string domain;
  std::string header;
  std::string format;
  std::string scheme;
  std::string username;
};

struct ApiKey {
  std::string name;  // in-container variable; empty with inject rules = inject-only
  bool proxy_managed = false;
  std::vector<InjectRule> inject;
};

struct OAuth {
  struct TokenEndpoint {
    std::string host;
    std::string path;
  };
  struct Sentinels {
    std::string access_token;
    std::string refresh_token;
  };
  struct CredentialFile {
    std::string path;
    std::string format = "json";
    Value structure;  // declarative; leaves may hold {{.AccessToken}} etc.
  };
  struct ResponseFields {
    std::string access_token;
    std::string refresh_token;
    std::string expires_in;
  };
  std::optional<TokenEndpoint> token_endpoint;
  std::vector<std::string> resource_hosts;
  std::optional<Sentinels> sentinels;
  std::optional<CredentialFile> credential_file;
  std::optional<ResponseFields> response_fields;
  bool passthrough = false;
};

// CredentialConfig is credential@1: a service the host store answers and
// how the boundary presents it, scoped to phases.
struct CredentialConfig {
  std::string service;
  std::vector<Phase> phases;
  std::optional<ApiKey> api_key;
  std::optional<OAuth> oauth;
};

struct Hook {
  std::vector<std::string> command;  // a string command becomes {"sh", "-c", s}
  std::string user;
  std::vector<std::string> env;
  std::string description;
  bool background = false;  // startup hooks only
};

struct LifecycleFile {
  std::string path;
  std::string content;
  std::string mode;
  bool overwrite = true;
  std::string description;
};

// LifecycleConfig is lifecycle@1. `interactive` distinguishes absent from
// an explicit empty tail, which is meaningful.
struct LifecycleConfig {
  std::vector<Hook> install;
  std::vector<Hook> startup;
  std::vector<LifecycleFile> files;
  std::optional<std::vector<std::string>> interactive;
};

struct VolumeConfig {
  std::string path;
  std::string size;
  bool tmpfs = false;
  std::string mode;
};

struct PortConfig {
  std::string name;
  int container = 0;
  std::string transport = "tcp";
  // Key is "<container>/<transport>", the surface string and merge key.
  std::string Key() const;
};

struct ResourcesConfig {
  std::optional<double> cpu;
  std::string memory;
  std::string gpu;
};

// AgentConfig is dev.airlock/agent@1: the agent a workload runs.
struct AgentConfig {
  // The agent's default argv: at least one argument, none empty.
  std::vector<std::string> command;
  // The stored image the agent is installed into; "" when not stated.
  std::string image;
};

// TypedConfig holds the decoded config of a typed capability type.
// privileged@1 is config-less and needs no alternative.
using TypedConfig =
    std::variant<std::monostate, NetworkPolicyConfig, CredentialConfig, LifecycleConfig,
                 VolumeConfig, PortConfig, ResourcesConfig, AgentConfig>;

// CapabilitySource is diagnostic provenance, never a trust input.
struct CapabilitySource {
  std::string kit;
  std::string path;
};

// CapabilityEntry is one ordinary capability request.
struct CapabilityEntry {
  std::string type;
  std::string name;  // display only: never identity, merge key or permission
  bool optional = false;
  std::string description;
  // `config: {}` and `config: null` both count as stated.
  bool config_stated = false;
  Value config;
  std::optional<CapabilitySource> source;
  // The config still holds ${{ kit.args }} or ${{ kit.env }} references;
  // `typed` is then unset and typed checks wait for the effective form.
  bool parameterized = false;
  TypedConfig typed;

  template <typename T>
  const T* As() const {
    return std::get_if<T>(&typed);
  }
};

// CapabilityGroup is selected atomically: all members or none.
struct CapabilityGroup {
  std::string name;
  std::string description;
  bool optional = false;
  std::vector<CapabilityEntry> members;
  std::optional<CapabilitySource> source;
};

using CapabilityItem = std::variant<CapabilityEntry, CapabilityGroup>;

// CapabilityRules says how strictly a capability list is judged.
struct CapabilityRules {
  // sbx@1, long-running@1, dev.airlock/agent@1 and the legacy
  // agent-context profile (a filename without a directory) are
  // workload-only.
  bool mixin = false;
  // Cross-entry checks (inject within allow) run only on a whole, literal
  // block: not in declarations-only mode, and never while groups remain.
  bool cross_entry = true;
};

// DecodeCapabilities reads the `capabilities` list at `path` into `out`,
// recording every problem: item shape, group grammar, type grammar, the
// typed config of each typed type, known fields of the other well-known
// types, and the per-block rules (singletons, exact duplicates,
// config-less types, credential (service, phase), volume and host-mount
// paths, ports, network-policy versions, what is workload-only, and
// inject domains within the same phase's allow list). An empty string in
// an optional field with a grammar (a volume's size or mode, a file's
// mode, resources memory) reads as omitted, as the spec's decoder does.
void DecodeCapabilities(const Value& list, const FieldPath& path, const CapabilityRules& rules,
                        Problems* problems, std::vector<CapabilityItem>* out);

// InjectDomainAllowed reports whether `domain` is among the allowed hosts
// of `rules` (bounded entries count): equal after cutting any ":port", or
// a bare "*" / "**" allow. Narrower globs are deliberately not expanded.
bool InjectDomainAllowed(absl::string_view domain, const NetworkRules& rules);

// ConfigKey is the identity of a request's config for duplicate checks and
// merging: canonical JSON, with an absent, null or empty config as "".
std::string ConfigKey(const CapabilityEntry& entry);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_CAPABILITIES_H_
