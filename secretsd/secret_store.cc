#include "secretsd/secret_store.h"

#include <time.h>

#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "secretsd/key_file.h"
#include "secretsd/registry_placement.h"
#include "secretsd/secret_specs.h"
#include "secretsd/services.h"
#include "secretsd/validation.h"

namespace airlock::secretsd {

// Row is one stored secret as it sits in the database.
struct SecretStore::Row {
  int64_t serial = 0;
  std::string id;
  Scope scope = Scope::kUnspecified;
  std::string sandbox;
  std::string service;
  std::string env;    // custom secrets only
  std::string hosts;  // custom secrets only, '\n'-separated
  std::string sentinel;
  std::string sealed;
  int64_t created_at = 0;
  std::string registry;  // registry secrets only
};

namespace {

// The whole schema, applied by one Migrate call; append steps, never edit.
//   secrets          one row per secret; `serial` is never reused
//                    (AUTOINCREMENT), so a global deleted and set again is
//                    a different secret from a sandbox's point of view.
//   sandboxes        sandboxes registered by their first Sentinels call.
//   sandbox_globals  the global secrets that existed at registration.
//   meta             key_check: a known text sealed with the key, to
//                    refuse a wrong key file at startup.
//   kit_bindings     (step 2) a registered sandbox's Kit bindings, one row
//                    per service; `inject` is '\n'-separated
//                    "<domain> <format>" lines (a domain holds no space, a
//                    format no newline). They go with the registration.
//                    (step 3) `suppress` 1: the binding hides the service
//                    (no env, no inject).
//   secrets.registry (step 4) host[:port] of a registry secret (scope
//                    global; service, env, hosts and sentinel empty); ''
//                    for every other secret, those stored before included.
//   sandboxes.registry_credentials (step 5) 1: the sandbox's Docker Engine
//                    pulls with the registry secrets (Resolve).
const std::vector<std::string>& Schema() {
  static const std::vector<std::string>* steps = new std::vector<std::string>{
      "CREATE TABLE secrets (serial INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
      "scope TEXT NOT NULL, sandbox TEXT NOT NULL, service TEXT NOT NULL, env TEXT NOT NULL, "
      "hosts TEXT NOT NULL, sentinel TEXT NOT NULL, sealed BLOB NOT NULL, "
      "created_at INTEGER NOT NULL);"
      "CREATE TABLE sandboxes (name TEXT PRIMARY KEY, registered_at INTEGER NOT NULL);"
      "CREATE TABLE sandbox_globals (sandbox TEXT NOT NULL REFERENCES sandboxes(name) "
      "ON DELETE CASCADE, serial INTEGER NOT NULL REFERENCES secrets(serial) ON DELETE CASCADE, "
      "PRIMARY KEY (sandbox, serial));"
      "CREATE TABLE meta (key TEXT PRIMARY KEY, value BLOB NOT NULL)",
      "CREATE TABLE kit_bindings (sandbox TEXT NOT NULL REFERENCES sandboxes(name) "
      "ON DELETE CASCADE, service TEXT NOT NULL, env TEXT NOT NULL, inject TEXT NOT NULL, "
      "PRIMARY KEY (sandbox, service))",
      "ALTER TABLE kit_bindings ADD COLUMN suppress INTEGER NOT NULL DEFAULT 0",
      "ALTER TABLE secrets ADD COLUMN registry TEXT NOT NULL DEFAULT ''",
      "ALTER TABLE sandboxes ADD COLUMN registry_credentials INTEGER NOT NULL DEFAULT 0",
  };
  return *steps;
}

constexpr char kKeyCheckAad[] = "airlock.secretsd/key-check";
constexpr char kKeyCheckText[] = "airlock secretsd key check v1";
constexpr char kPlaceholderPrefix[] = "sbx-cs-";
constexpr char kRegistryIdPrefix[] = "registry:";
constexpr size_t kPlaceholderRandomChars = 24;

const char* ScopeText(Scope s) { return s == Scope::kGlobal ? "global" : "sandbox"; }

int64_t Now() { return static_cast<int64_t>(time(nullptr)); }

// The precedence key: a sandbox secret hides a global one with the same.
std::string PrecedenceKey(const std::string& service, const std::string& env) {
  return service.empty() ? absl::StrCat("custom:", env) : service;
}

std::string InjectText(const std::vector<KitInject>& inject) {
  std::vector<std::string> lines;
  for (const auto& i : inject) lines.push_back(absl::StrCat(i.domain, " ", i.format));
  return absl::StrJoin(lines, "\n");
}

}  // namespace

absl::StatusOr<std::unique_ptr<SecretStore>> SecretStore::Open(StateDb* db,
                                                               const std::string& key_file) {
  if (absl::Status s = db->Migrate(Schema()); !s.ok()) return s;
  auto sealed = db->Query(
      "SELECT (SELECT COUNT(*) FROM meta WHERE key = 'key_check') + "
      "(SELECT COUNT(*) FROM secrets)");
  if (!sealed.ok()) return sealed.status();
  bool holds_sealed = (*sealed)[0][0] != "0";

  auto key = LoadKeyFile(key_file);
  if (absl::IsNotFound(key.status())) {
    if (holds_sealed) {
      return absl::FailedPreconditionError(absl::StrCat(
          "key file ", key_file,
          " is missing, but the state file holds data sealed with a key; restore that key "
          "file (or point --key-file at it) instead of starting with a new key"));
    }
    key = CreateKeyFile(key_file);
  }
  if (!key.ok()) return key.status();
  std::unique_ptr<SecretStore> store(new SecretStore(db, std::move(*key)));
  if (absl::Status s = store->CheckKey(); !s.ok()) {
    return absl::FailedPreconditionError(absl::StrCat("key file ", key_file, ": ", s.message()));
  }
  return store;
}

absl::Status SecretStore::CheckKey() {
  auto rows = db_->Query("SELECT value FROM meta WHERE key = 'key_check'");
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    auto check = Seal(key_, kKeyCheckText, kKeyCheckAad);
    if (!check.ok()) return check.status();
    return db_->Exec("INSERT INTO meta (key, value) VALUES ('key_check', ?)", {*check});
  }
  auto text = secretsd::Open(key_, (*rows)[0][0], kKeyCheckAad);
  if (!text.ok() || *text != kKeyCheckText) {
    return absl::FailedPreconditionError(
        "this key does not open the secrets in the state file (it is not the key they were "
        "sealed with); restore the original key file");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<SecretStore::Row>> SecretStore::Rows(
    const std::string& where, const std::vector<SqlValue>& params) {
  auto rows = db_->Query(absl::StrCat("SELECT serial, id, scope, sandbox, service, env, hosts, "
                                      "sentinel, sealed, created_at, registry FROM secrets WHERE ",
                                      where, " ORDER BY id"),
                         params);
  if (!rows.ok()) return rows.status();
  std::vector<Row> out;
  for (auto& r : *rows) {
    Row row;
    if (!absl::SimpleAtoi(r[0], &row.serial) || !absl::SimpleAtoi(r[9], &row.created_at)) {
      return absl::DataLossError(absl::StrCat("stored secret ", r[1], " has a malformed row"));
    }
    row.id = r[1];
    row.scope = r[2] == "global" ? Scope::kGlobal : Scope::kSandbox;
    row.sandbox = r[3];
    row.service = r[4];
    row.env = r[5];
    row.hosts = r[6];
    row.sentinel = r[7];
    row.sealed = std::move(r[8]);
    row.registry = r[10];
    out.push_back(std::move(row));
  }
  return out;
}

SecretInfo SecretStore::ToInfo(const Row& row) {
  SecretInfo info;
  info.id = row.id;
  info.scope = row.scope;
  info.sandbox = row.sandbox;
  info.service = row.service;
  info.sentinel = row.sentinel;
  info.created_at = row.created_at;
  info.registry = row.registry;
  // A registry secret has no env or hosts: only vmmd uses it, for pulls.
  if (!row.registry.empty()) return info;
  if (row.service.empty()) {
    info.env = {row.env};
    if (!row.hosts.empty()) info.hosts = absl::StrSplit(row.hosts, '\n');
  } else if (const ServiceDef* def = FindService(row.service); def != nullptr) {
    // A service's variables and hosts come from the table of this binary,
    // so a service's new host applies to secrets stored before.
    info.env = def->env;
    info.hosts = def->HostNames();
  }
  return info;
}

absl::StatusOr<std::string> SecretStore::NewPlaceholder() {
  static constexpr char kAlphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789";
  constexpr unsigned kAlphabetSize = sizeof(kAlphabet) - 1;
  // Bytes at or above the largest multiple of 36 are dropped, so every
  // character is uniform (about 5.2 bits each, 124 bits in all).
  constexpr unsigned kLimit = 256 - 256 % kAlphabetSize;
  std::string out = kPlaceholderPrefix;
  while (out.size() < sizeof(kPlaceholderPrefix) - 1 + kPlaceholderRandomChars) {
    auto bytes = RandomBytes(32);
    if (!bytes.ok()) return bytes.status();
    for (unsigned char b : *bytes) {
      if (b >= kLimit) continue;
      out.push_back(kAlphabet[b % kAlphabetSize]);
      if (out.size() == sizeof(kPlaceholderPrefix) - 1 + kPlaceholderRandomChars) break;
    }
  }
  return out;
}

absl::StatusOr<SecretInfo> SecretStore::Set(const SecretSpec& spec) {
  const bool registry = !spec.registry.empty();
  std::string registry_host;
  std::vector<std::string> hosts;
  if (registry) {
    auto host = ValidateRegistrySpec(spec);
    if (!host.ok()) return host.status();
    registry_host = std::move(*host);
  } else {
    auto valid = ValidateSpec(spec);
    if (!valid.ok()) return valid.status();
    hosts = std::move(*valid);
  }
  const bool custom = !registry && spec.service.empty();
  const Scope scope = registry ? Scope::kGlobal : spec.scope;
  const std::string sandbox = scope == Scope::kSandbox ? spec.sandbox : "";
  std::string id;
  if (registry) {
    id = absl::StrCat(kRegistryIdPrefix, registry_host, "@global");
  } else {
    id = absl::StrCat(custom ? absl::StrCat("custom:", spec.env) : spec.service, "@",
                      scope == Scope::kGlobal ? "global" : spec.sandbox);
  }
  const std::string env = custom ? spec.env : "";
  const std::string hosts_text = absl::StrJoin(hosts, "\n");

  std::lock_guard<std::mutex> lock(mu_);
  auto existing = Rows("id = ?", {id});
  if (!existing.ok()) return existing.status();
  // A registry secret has no sentinel: nothing of it reaches a guest.
  std::string sentinel = registry ? "" : kProxyManaged;
  if (custom) {
    if (!spec.placeholder.empty()) {
      sentinel = spec.placeholder;
    } else if (!existing->empty()) {
      sentinel = (*existing)[0].sentinel;
    } else {
      auto fresh = NewPlaceholder();
      if (!fresh.ok()) return fresh.status();
      sentinel = *fresh;
    }
    // proxyd swaps a custom secret's placeholder for its value, so one
    // placeholder must stand for one variable.
    auto clash = db_->Query(
        "SELECT id FROM secrets WHERE sentinel = ? AND service = '' AND env != ? LIMIT 1",
        {sentinel, env});
    if (!clash.ok()) return clash.status();
    if (!clash->empty()) {
      return absl::InvalidArgumentError(absl::StrCat("placeholder is already used by secret ",
                                                     (*clash)[0][0], "; choose another"));
    }
  }
  auto sealed = Seal(key_, spec.value, id);
  if (!sealed.ok()) return sealed.status();
  const int64_t now = Now();
  ++revision_;  // before the change (nothing refused it since): see Revision
  absl::Status s;
  if (existing->empty()) {
    s = db_->Exec(
        "INSERT INTO secrets (id, scope, sandbox, service, env, hosts, sentinel, sealed, "
        "created_at, registry) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        {id, std::string(ScopeText(scope)), sandbox, spec.service, env, hosts_text, sentinel,
         *sealed, now, registry_host});
  } else {
    // Same serial: sandboxes that got this global keep getting it (a
    // rotated key reaches them on their next request).
    s = db_->Exec(
        "UPDATE secrets SET hosts = ?, sentinel = ?, sealed = ?, created_at = ? WHERE id = ?",
        {hosts_text, sentinel, *sealed, now, id});
  }
  if (!s.ok()) return s;
  Row row;
  row.id = id;
  row.scope = scope;
  row.sandbox = sandbox;
  row.service = spec.service;
  row.env = env;
  row.hosts = hosts_text;
  row.sentinel = sentinel;
  row.created_at = now;
  row.registry = registry_host;
  return ToInfo(row);
}

absl::StatusOr<bool> SecretStore::Registered(const std::string& sandbox) {
  auto rows = db_->Query("SELECT 1 FROM sandboxes WHERE name = ?", {sandbox});
  if (!rows.ok()) return rows.status();
  return !rows->empty();
}

absl::Status SecretStore::Register(const std::string& sandbox, bool with_globals,
                                   bool registry_credentials) {
  ++revision_;  // before the change (the caller holds mu_): see Revision
  if (absl::Status s = db_->Exec(
          "INSERT INTO sandboxes (name, registered_at, registry_credentials) VALUES (?, ?, ?)",
          {sandbox, Now(), with_globals && registry_credentials ? "1" : "0"});
      !s.ok()) {
    return s;
  }
  if (!with_globals) return absl::OkStatus();
  // Registry secrets are the host's: no sandbox gets them.
  return db_->Exec(
      "INSERT INTO sandbox_globals (sandbox, serial) "
      "SELECT ?, serial FROM secrets WHERE scope = 'global' AND registry = ''",
      {sandbox});
}

absl::StatusOr<std::map<std::string, KitBinding>> SecretStore::Bindings(
    const std::string& sandbox) {
  auto rows = db_->Query(
      "SELECT service, env, inject, suppress FROM kit_bindings WHERE sandbox = ?", {sandbox});
  if (!rows.ok()) return rows.status();
  std::map<std::string, KitBinding> out;
  for (auto& r : *rows) {
    KitBinding b{r[0], r[1], {}, r[3] != "0"};
    if (!r[2].empty()) {
      for (absl::string_view line : absl::StrSplit(r[2], '\n')) {
        std::pair<std::string, std::string> parts = absl::StrSplit(line, absl::MaxSplits(' ', 1));
        if (parts.first.empty() || parts.second.empty()) {
          return absl::DataLossError(absl::StrCat("stored Kit binding of ", r[0], " for sandbox ",
                                                  sandbox, " has a malformed inject entry"));
        }
        b.inject.push_back(KitInject{std::move(parts.first), std::move(parts.second)});
      }
    }
    out.emplace(b.service, std::move(b));
  }
  return out;
}

absl::StatusOr<std::vector<SecretStore::Row>> SecretStore::InEffect(const std::string& sandbox,
                                                                    Unregistered unregistered) {
  auto registered = Registered(sandbox);
  if (!registered.ok()) return registered.status();
  if (!*registered && (unregistered == Unregistered::kRegister ||
                      unregistered == Unregistered::kRegisterBare)) {
    bool with_globals = unregistered == Unregistered::kRegister;
    absl::Status s = InTransaction(db_, [&] { return Register(sandbox, with_globals); });
    if (!s.ok()) return s;
    *registered = true;
  }
  // Registry secrets never apply to a sandbox: no env, no sentinel, and
  // nothing for proxyd to place.
  auto own = Rows("scope = 'sandbox' AND sandbox = ? AND registry = ''", {sandbox});
  if (!own.ok()) return own;
  absl::StatusOr<std::vector<Row>> globals;
  if (*registered) {
    globals = Rows(
        "scope = 'global' AND registry = '' AND serial IN (SELECT serial FROM sandbox_globals "
        "WHERE sandbox = ?)",
        {sandbox});
  } else if (unregistered == Unregistered::kAllGlobals) {
    globals = Rows("scope = 'global' AND registry = ''", {});
  } else {
    globals = std::vector<Row>();
  }
  if (!globals.ok()) return globals;

  std::set<std::string> taken;
  std::vector<Row> out;
  for (auto* list : {&*own, &*globals}) {
    for (auto& row : *list) {
      if (taken.insert(PrecedenceKey(row.service, row.env)).second) out.push_back(std::move(row));
    }
  }
  return out;
}

absl::StatusOr<std::vector<SecretInfo>> SecretStore::List(const std::string& sandbox) {
  if (!sandbox.empty()) {
    if (absl::Status s = ValidateSandboxName(sandbox); !s.ok()) return s;
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = sandbox.empty() ? Rows("1", {}) : InEffect(sandbox, Unregistered::kAllGlobals);
  if (!rows.ok()) return rows.status();
  std::vector<SecretInfo> out;
  for (const auto& r : *rows) {
    out.push_back(ToInfo(r));
  }
  return out;
}

absl::Status SecretStore::Delete(const std::string& id) {
  if (id.empty()) return absl::InvalidArgumentError("id is required");
  std::lock_guard<std::mutex> lock(mu_);
  ++revision_;  // before the change: see Revision
  if (absl::Status s = db_->Exec("DELETE FROM secrets WHERE id = ?", {id}); !s.ok()) return s;
  if (db_->Changes() == 0) {
    return absl::NotFoundError(
        absl::StrCat("no secret with id ", QuoteForMessage(id), " (see `airlock secret ls`)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, std::string>> SecretStore::Sentinels(
    const std::string& sandbox, bool without_globals, bool registry_credentials) {
  if (absl::Status s = ValidateSandboxName(sandbox); !s.ok()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  // Only a registration changes what Resolve answers (Register moves the
  // revision): a sandbox's every exec asks for its environment.
  if (registry_credentials && !without_globals) {
    auto registered = Registered(sandbox);
    if (!registered.ok()) return registered.status();
    if (!*registered) {
      absl::Status s = InTransaction(db_, [&] { return Register(sandbox, true, true); });
      if (!s.ok()) return s;
    }
  }
  auto rows = InEffect(sandbox, without_globals ? Unregistered::kRegisterBare
                                                : Unregistered::kRegister);
  if (!rows.ok()) return rows.status();
  auto bindings = Bindings(sandbox);
  if (!bindings.ok()) return bindings.status();
  std::map<std::string, std::string> env;
  std::map<std::string, std::string> service_sentinel;
  for (const auto& r : *rows) {
    if (r.service.empty()) {
      env.emplace(r.env, r.sentinel);
      continue;
    }
    // Suppressed: the kits use the service in another phase only.
    if (auto b = bindings->find(r.service); b != bindings->end() && b->second.suppress) continue;
    service_sentinel.emplace(r.service, r.sentinel);
    if (const ServiceDef* def = FindService(r.service); def != nullptr) {
      for (const auto& e : def->env) env.emplace(e, r.sentinel);
    }
  }
  // A Kit's variables come after the secrets' own: a Kit adds a name for a
  // secret in effect, it never takes over a variable a secret sets.
  for (const auto& [service, b] : *bindings) {
    auto it = service_sentinel.find(service);
    if (!b.env.empty() && it != service_sentinel.end()) env.emplace(b.env, it->second);
  }
  return env;
}

absl::StatusOr<std::vector<Credential>> SecretStore::Resolve(const std::string& sandbox,
                                                             const std::string& host,
                                                             uint16_t port, uint64_t* revision) {
  if (revision != nullptr) *revision = Revision();
  if (absl::Status s = ValidateSandboxName(sandbox); !s.ok()) return s;
  if (host.empty()) return absl::InvalidArgumentError("host is required");
  auto h = NormalizeRequestHost(host);
  // Host patterns are DNS names, so anything else has no credential.
  if (!h.ok()) return std::vector<Credential>();
  std::lock_guard<std::mutex> lock(mu_);
  if (revision != nullptr) *revision = revision_;
  auto rows = InEffect(sandbox, Unregistered::kNoGlobals);
  if (!rows.ok()) return rows.status();
  auto bindings = Bindings(sandbox);
  if (!bindings.ok()) return bindings.status();
  std::vector<Credential> out;
  for (const auto& r : *rows) {
    std::string format;
    if (r.service.empty()) {
      for (absl::string_view pattern : absl::StrSplit(r.hosts, '\n')) {
        if (HostMatches(pattern, *h)) format = kFormatReplace;
      }
    } else if (const ServiceDef* def = FindService(r.service); def != nullptr) {
      // A service's value goes to its built-in hosts and nowhere else; a
      // Kit binding narrows them (to its domains, with its formats, or to
      // none when it suppresses the service). BindKit refuses other
      // domains; a binding stored before it did gets nothing there.
      const ServiceHost* builtin = nullptr;
      for (const auto& sh : def->hosts) {
        if (builtin == nullptr && HostMatches(sh.host, *h)) builtin = &sh;
      }
      auto bound = bindings->find(r.service);
      const KitBinding* kit = bound == bindings->end() ? nullptr : &bound->second;
      if (builtin == nullptr || (kit != nullptr && kit->suppress)) continue;
      if (kit == nullptr || kit->inject.empty()) {
        format = builtin->format;
      } else {
        for (const auto& i : kit->inject) {
          if (format.empty() && HostMatches(i.domain, *h)) format = i.format;
        }
      }
    }
    if (format.empty()) continue;
    auto value = secretsd::Open(key_, r.sealed, r.id);
    if (!value.ok()) {
      return absl::DataLossError(
          absl::StrCat("secret ", r.id, " cannot be decrypted: ", value.status().message()));
    }
    out.push_back(Credential{r.id, r.sentinel, std::move(*value), format});
  }
  // Registry credentials, for a sandbox whose Docker Engine pulls with them.
  auto docker = db_->Query("SELECT registry_credentials FROM sandboxes WHERE name = ?", {sandbox});
  if (!docker.ok()) return docker.status();
  if (docker->empty() || (*docker)[0][0] != "1") return out;
  auto registries = Rows("registry != ''", {});
  if (!registries.ok()) return registries.status();
  for (const auto& r : *registries) {
    if (!RegistryCredentialApplies(r.registry, *h, port)) continue;
    auto cred = OpenRegistry(r);
    if (!cred.ok()) return cred.status();
    out.push_back(Credential{r.id, "", cred->password, "basic:" + cred->username});
  }
  return out;
}

uint64_t SecretStore::Revision() {
  std::lock_guard<std::mutex> lock(mu_);
  return revision_;
}

absl::StatusOr<RegistryCredential> SecretStore::ResolveRegistry(const std::string& host) {
  if (host.empty()) return absl::InvalidArgumentError("host is required");
  auto h = NormalizeRegistryHost("host", host);
  if (!h.ok()) return h.status();
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = Rows("registry = ?", {*h});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::NotFoundError(absl::StrCat("no registry credential is stored for ", *h));
  }
  return OpenRegistry(rows->front());
}

absl::StatusOr<RegistryCredential> SecretStore::OpenRegistry(const Row& r) {
  auto value = secretsd::Open(key_, r.sealed, r.id);
  if (!value.ok()) {
    return absl::DataLossError(
        absl::StrCat("secret ", r.id, " cannot be decrypted: ", value.status().message()));
  }
  size_t colon = value->find(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::DataLossError(absl::StrCat("secret ", r.id, " is not USERNAME:PASSWORD"));
  }
  return RegistryCredential{value->substr(0, colon), value->substr(colon + 1)};
}

absl::StatusOr<std::vector<std::string>> SecretStore::BindKit(
    const std::string& sandbox, const std::vector<KitBinding>& bindings) {
  auto valid = ValidateBindings(sandbox, bindings);
  if (!valid.ok()) return valid.status();
  std::lock_guard<std::mutex> lock(mu_);
  ++revision_;  // before the change: see Revision
  absl::Status s = InTransaction(db_, [&]() -> absl::Status {
    auto registered = Registered(sandbox);
    if (!registered.ok()) return registered.status();
    if (!*registered) {
      if (absl::Status r = Register(sandbox); !r.ok()) return r;
    }
    if (absl::Status r = db_->Exec("DELETE FROM kit_bindings WHERE sandbox = ?", {sandbox});
        !r.ok()) {
      return r;
    }
    for (const KitBinding& b : *valid) {
      absl::Status r = db_->Exec(
          "INSERT INTO kit_bindings (sandbox, service, env, inject, suppress) "
          "VALUES (?, ?, ?, ?, ?)",
          {sandbox, b.service, b.env, InjectText(b.inject), int64_t{b.suppress ? 1 : 0}});
      if (!r.ok()) return r;
    }
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  auto rows = InEffect(sandbox, Unregistered::kNoGlobals);
  if (!rows.ok()) return rows.status();
  std::set<std::string> in_effect;
  for (const auto& r : *rows) {
    if (!r.service.empty()) in_effect.insert(r.service);
  }
  std::vector<std::string> unbound;
  for (const KitBinding& b : *valid) {
    if (!b.suppress && in_effect.count(b.service) == 0) unbound.push_back(b.service);
  }
  return unbound;
}

absl::StatusOr<int> SecretStore::ForgetSandbox(const std::string& sandbox, bool keep_secrets) {
  if (sandbox.empty()) return absl::InvalidArgumentError("sandbox is required");
  std::lock_guard<std::mutex> lock(mu_);
  ++revision_;  // before the change: see Revision
  int64_t deleted = 0;
  absl::Status s = InTransaction(db_, [&] {
    if (!keep_secrets) {
      absl::Status r =
          db_->Exec("DELETE FROM secrets WHERE scope = 'sandbox' AND sandbox = ?", {sandbox});
      if (!r.ok()) return r;
      deleted = db_->Changes();
    }
    // Its sandbox_globals and kit_bindings rows go with it (ON DELETE
    // CASCADE).
    return db_->Exec("DELETE FROM sandboxes WHERE name = ?", {sandbox});
  });
  if (!s.ok()) return s;
  return static_cast<int>(deleted);
}

}  // namespace airlock::secretsd
