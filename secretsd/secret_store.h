// secretsd's durable secrets: values sealed with AES-256-GCM in the
// daemon's SQLite file, the sandboxes' view of them (own plus the globals
// that existed when the sandbox was created), and plaintext resolution
// (for proxyd's requests, and registry credentials for vmmd's pulls).
#ifndef AIRLOCK_SECRETSD_SECRET_STORE_H_
#define AIRLOCK_SECRETSD_SECRET_STORE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/state_db.h"
#include "secretsd/crypto.h"

namespace airlock::secretsd {

enum class Scope { kUnspecified, kGlobal, kSandbox };

// The sentinel of built-in service secrets: proxyd places the value by
// host, so the guest needs no per-secret marker.
inline constexpr char kProxyManaged[] = "proxy-managed";

// SecretSpec is a Set request as a caller writes it, before validation:
// either `service`, or the custom fields `env`, `hosts`, `placeholder`, or
// `registry` (a registry credential: global, value USERNAME:PASSWORD).
struct SecretSpec {
  Scope scope = Scope::kUnspecified;
  std::string sandbox;
  std::string service;
  std::string value;
  std::string env;
  std::vector<std::string> hosts;
  std::string placeholder;
  std::string registry;
};

// SecretInfo is what anyone may see of a secret: never its value.
struct SecretInfo {
  std::string id;
  Scope scope = Scope::kUnspecified;
  std::string sandbox;  // empty for kGlobal
  std::string service;  // empty for a custom or registry secret
  std::vector<std::string> env;
  std::vector<std::string> hosts;
  std::string sentinel;
  int64_t created_at = 0;
  // host[:port] of a registry secret, which has no env, hosts or sentinel;
  // empty for the others.
  std::string registry;
};

// Credential is one secret's plaintext for one host, and how proxyd places
// it (see services.h for the formats).
struct Credential {
  std::string id;
  std::string sentinel;
  std::string value;
  std::string format;
};

// RegistryCredential is a registry secret's plaintext: the stored
// USERNAME:PASSWORD split at its first ':'.
struct RegistryCredential {
  std::string username;
  std::string password;
};

// KitInject is one place a Kit puts a credential: a DNS host name and the
// format proxyd places the value in there (see services.h).
struct KitInject {
  std::string domain;
  std::string format;
};

// KitBinding is a Kit's credential@1 capability bound to one service for
// one sandbox: the variable the guest sees the service's sentinel in
// (empty: none, an inject-only credential) and where its value goes
// (empty: the built-in hosts, if the service has any; otherwise a subset
// of them, each with the Kit's format). A `suppress` binding has neither:
// the kits declare the service only for another phase, so while it stands
// the service's secret is neither in the guest's env nor injected.
struct KitBinding {
  std::string service;
  std::string env;
  std::vector<KitInject> inject;
  bool suppress = false;
};

// SecretStore is thread-safe. Ids are "<service>@global",
// "<service>@<sandbox>", "custom:<ENV>@global", "custom:<ENV>@<sandbox>"
// (no sandbox may be named "global") and "registry:<host[:port]>@global".
//
// Registry secrets are the host's, for vmmd's image pulls: always global,
// in no sandbox's view (List of a sandbox, Sentinels, Resolve, BindKit),
// and only ResolveRegistry returns their values.
//
// Scopes: a sandbox secret applies to its sandbox at once. A global secret
// applies to sandboxes created after it was set: the first Sentinels call
// for a sandbox name registers it ("created now") together with the global
// secrets that exist at that moment, and from then on that sandbox sees
// only those globals (as long as they exist; replacing a global keeps it,
// deleting it ends it, setting it again later is a new secret). A sandbox
// secret wins over a global one for the same service or custom env.
//
// Kit bindings (BindKit) change, for one sandbox, where the secret of a
// service is seen and placed, or hide it; they never make a secret apply
// that would not apply without them, nor send it to a host that is not one
// of its service's built-in hosts.
class SecretStore {
 public:
  // Open applies the schema to `db` and loads the key at `key_file`. A
  // missing key file is created (0600) only while the database holds no
  // sealed data; otherwise its absence is an error, as is a key that does
  // not open what the database already holds.
  static absl::StatusOr<std::unique_ptr<SecretStore>> Open(StateDb* db,
                                                           const std::string& key_file);

  // Set validates `spec` and stores it, replacing the secret with the same
  // id (a custom secret keeps its sentinel unless a placeholder is given).
  // INVALID_ARGUMENT names the offending field, never the value. A
  // registry host is lowercased and must be a DNS name or IPv4 address
  // with an optional ":port" (1-65535, no leading zero); its value must
  // hold a ':' after a non-empty username.
  absl::StatusOr<SecretInfo> Set(const SecretSpec& spec);

  // List returns every secret (empty `sandbox`), or the ones in effect for
  // `sandbox`: its own plus its registered globals, or, for a sandbox not
  // registered yet, plus the globals it would get if created now (registry
  // secrets are in no sandbox's).
  absl::StatusOr<std::vector<SecretInfo>> List(const std::string& sandbox);

  // Delete removes the secret `id`; NOT_FOUND when there is none. The next
  // Resolve no longer returns it.
  absl::Status Delete(const std::string& id);

  // Sentinels registers `sandbox` if it is not registered yet and returns
  // the guest environment for it: every env variable of every secret in
  // effect, mapped to that secret's sentinel, and then the env of each Kit
  // binding whose service has a secret in effect, mapped to that secret's
  // sentinel unless a secret already sets that variable. A service with a
  // suppressing Kit binding gives no variable.
  // `without_globals` registers a new sandbox with no global secret;
  // `registry_credentials` (ignored with it) registers one whose Docker
  // Engine pulls with the registry secrets (see Resolve).
  absl::StatusOr<std::map<std::string, std::string>> Sentinels(const std::string& sandbox,
                                                               bool without_globals = false,
                                                               bool registry_credentials = false);

  // Resolve returns the plaintext credentials in effect for `sandbox` whose
  // hosts match `host` (case, a trailing '.' and a ":port" ignored; a host
  // that is not a DNS name matches nothing). A service's hosts are always
  // its built-in ones: a Kit binding with inject entries narrows them to
  // the entries' domains, with their formats, and a suppressing binding to
  // none. Callers must have established that proxyd asks. A sandbox never
  // registered by Sentinels (or BindKit) gets only its own secrets.
  // A sandbox registered with registry credentials also gets each registry
  // secret that RegistryCredentialApplies to `host` and `port` (0: 443),
  // as "basic:USERNAME" with the password and no sentinel.
  // `revision`, when given, is set to the Revision the answer is of (also
  // when the host has no credential or is refused).
  absl::StatusOr<std::vector<Credential>> Resolve(const std::string& sandbox,
                                                  const std::string& host, uint16_t port = 0,
                                                  uint64_t* revision = nullptr);

  // Revision counts the calls that may change what Resolve answers (Set,
  // Delete, BindKit, ForgetSandbox, and a Sentinels that registers the
  // sandbox), from 0 at Open: a Resolve
  // that reported revision R answers as any Resolve would until Revision
  // moves past R. Each of those calls moves it as it starts (under the
  // lock the change is made under), so an answer is never of a revision
  // whose change was half made.
  uint64_t Revision();

  // ResolveRegistry returns the credential stored for the registry `host`
  // (host[:port], case ignored); NOT_FOUND when there is none,
  // INVALID_ARGUMENT when `host` is not host[:port]. Callers must have
  // established that vmmd asks.
  absl::StatusOr<RegistryCredential> ResolveRegistry(const std::string& host);

  // BindKit replaces the whole set of Kit bindings of `sandbox` with
  // `bindings` (an empty list removes them), in one transaction, registering
  // the sandbox first if it is not registered yet (as Sentinels does). It
  // checks everything before changing anything: INVALID_ARGUMENT names the
  // field ("credentials[1]: inject[0].format ...") for a bad sandbox name,
  // service handle (ValidateServiceHandle), env (ValidateKitEnvName),
  // domain (NormalizeHostName) or format (ParseFormat, common/inject_format.h), a service
  // bound twice, a domain listed twice in one binding, a domain of a
  // built-in service that is not one of its hosts (HostMatches, as Resolve
  // matches), a suppressing binding with env or inject entries, or more
  // than kMaxHostsPerSecret inject entries. A binding of a service that is
  // not built in is kept as it is: no secret of one can be stored. A
  // binding with neither env nor inject entries changes nothing but is
  // checked and reported like the others. Returns the bound services, in
  // `bindings` order, with no secret in effect for the sandbox, leaving out
  // suppressing bindings: a binding of one is kept (it applies once such a
  // secret exists) and it is the caller's call whether that is an error.
  absl::StatusOr<std::vector<std::string>> BindKit(const std::string& sandbox,
                                                   const std::vector<KitBinding>& bindings);

  // ForgetSandbox deletes the sandbox-scoped secrets of `sandbox`, its
  // registration (which globals it got) and its Kit bindings, so a new
  // sandbox of the same name starts afresh. vmmd calls it (the Forget RPC)
  // when it removes a sandbox. With `keep_secrets` it deletes only the
  // registration and the Kit bindings, keeping the sandbox's own secrets:
  // vmmd's cleanup of a create that did not happen, so that the retry
  // registers with the globals that exist then. A name with nothing stored
  // is not an error. Returns how many secrets were deleted.
  absl::StatusOr<int> ForgetSandbox(const std::string& sandbox, bool keep_secrets = false);

 private:
  struct Row;
  // What InEffect does for a sandbox that Sentinels never registered.
  enum class Unregistered {
    kRegister,    // register it now (Sentinels)
    kRegisterBare,  // register it now with no globals (Sentinels without_globals)
    kAllGlobals,  // show the globals it would get if registered now (List)
    kNoGlobals,   // give it no globals: its guest holds no sentinel (Resolve)
  };

  SecretStore(StateDb* db, SecretKey key) : db_(db), key_(std::move(key)) {}
  absl::Status CheckKey();
  // OpenRegistry decrypts a registry secret's row into its USERNAME and
  // PASSWORD (DATA_LOSS when it cannot).
  absl::StatusOr<RegistryCredential> OpenRegistry(const Row& r);
  absl::StatusOr<std::vector<Row>> Rows(const std::string& where,
                                        const std::vector<SqlValue>& params);
  absl::StatusOr<bool> Registered(const std::string& sandbox);
  // Register records `sandbox` as created now, with the globals that exist
  // now; the caller runs it in a transaction, for a sandbox not registered.
  absl::Status Register(const std::string& sandbox, bool with_globals = true,
                        bool registry_credentials = false);
  // Bindings is the Kit bindings of `sandbox`, by service.
  absl::StatusOr<std::map<std::string, KitBinding>> Bindings(const std::string& sandbox);
  // InEffect is the secrets that apply to `sandbox`, a sandbox secret
  // hiding the global one with the same service or custom env; never a
  // registry secret.
  absl::StatusOr<std::vector<Row>> InEffect(const std::string& sandbox, Unregistered unregistered);
  static SecretInfo ToInfo(const Row& row);
  static absl::StatusOr<std::string> NewPlaceholder();

  StateDb* db_;
  SecretKey key_;
  std::mutex mu_;
  uint64_t revision_ = 0;  // guarded by mu_
};

}  // namespace airlock::secretsd

#endif  // AIRLOCK_SECRETSD_SECRET_STORE_H_
