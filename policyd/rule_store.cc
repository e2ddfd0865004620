#include "policyd/rule_store.h"

#include <random>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "policyd/presets.h"

namespace airlock::policyd {
namespace {

std::string NewId() {
  static std::mt19937_64 rng(std::random_device{}());
  return absl::StrCat("r-", absl::Hex(rng() & 0xffffffffffULL, absl::kZeroPad10));
}

}  // namespace

absl::Status RuleStore::Init() {
  absl::Status s = db_->Migrate({
      "CREATE TABLE rules (id TEXT PRIMARY KEY, seq INTEGER NOT NULL, action TEXT NOT NULL, "
      "resource TEXT NOT NULL, methods TEXT NOT NULL, paths TEXT NOT NULL, "
      "sandbox TEXT NOT NULL, origin TEXT NOT NULL);"
      "CREATE TABLE settings (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
      // KitGate's tables: per sandbox the granted resolution (its
      // ResolveRequest and ResolveResponse, and both phases' rules as
      // CompiledPolicy, all serialized protos) and the phase in force; and
      // the resolutions held for approval, in the same form.
      "CREATE TABLE kit_grants (sandbox TEXT PRIMARY KEY, request BLOB NOT NULL, "
      "response BLOB NOT NULL, install_rules BLOB NOT NULL, runtime_rules BLOB NOT NULL, "
      "phase TEXT NOT NULL, updated_at INTEGER NOT NULL);"
      "CREATE TABLE kit_holds (id TEXT PRIMARY KEY, sandbox TEXT NOT NULL, "
      "request BLOB NOT NULL, response BLOB NOT NULL, install_rules BLOB NOT NULL, "
      "runtime_rules BLOB NOT NULL, created_at INTEGER NOT NULL)",
  });
  if (!s.ok()) return s;
  if (absl::Status r = Reload(); !r.ok()) return r;
  if (Preset().empty()) return InitPreset("balanced").status();
  return absl::OkStatus();
}

absl::Status RuleStore::Insert(const Rule& r) {
  return db_->Exec(
      "INSERT INTO rules (id, seq, action, resource, methods, paths, sandbox, origin) "
      "VALUES (?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM rules), ?, ?, ?, ?, ?, ?)",
      {r.id, std::string(r.action == Action::kAllow ? "allow" : "deny"), r.resource.text,
       absl::StrJoin(r.methods, ","), absl::StrJoin(r.paths, "\n"), r.sandbox, r.origin});
}

absl::StatusOr<std::vector<Rule>> RuleStore::Validated(const std::vector<RuleSpec>& specs) {
  std::vector<Rule> rules;
  for (const auto& spec : specs) {
    auto r = policy::ValidateRule(spec);
    if (!r.ok()) return r.status();
    r->id = NewId();
    rules.push_back(*r);
  }
  return rules;
}

absl::Status RuleStore::InsertAll(const std::vector<Rule>& rules) {
  for (const auto& r : rules) {
    if (absl::Status s = Insert(r); !s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Rule>> RuleStore::Add(const std::vector<RuleSpec>& specs) {
  auto added = Validated(specs);
  if (!added.ok()) return added.status();
  if (absl::Status s = Transact([&] { return InsertAll(*added); }); !s.ok()) return s;
  return added;
}

absl::StatusOr<int> RuleStore::Remove(const std::string& id, const std::string& resource,
                                      const std::string& sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s;
  if (!id.empty()) {
    s = db_->Exec("DELETE FROM rules WHERE id = ?", {id});
  } else {
    auto parsed = ParseResource(resource);
    if (!parsed.ok()) return parsed.status();
    s = db_->Exec("DELETE FROM rules WHERE resource = ? AND sandbox = ?", {parsed->text, sandbox});
  }
  if (!s.ok()) return s;
  int removed = static_cast<int>(db_->Changes());
  if (removed == 0) {
    return absl::NotFoundError(
        id.empty() ? absl::StrCat("no ", sandbox.empty() ? "global" : "sandbox " + sandbox,
                                  " rule for ", resource, " (see `airlock policy ls`)")
                   : absl::StrCat("no rule with id ", id, " (see `airlock policy ls`)"));
  }
  if (absl::Status r = Reload(); !r.ok()) return r;
  return removed;
}

std::vector<Rule> RuleStore::List(const std::string& sandbox) {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<Rule> out;
  for (const auto& r : rules_) {
    if (r.sandbox.empty() || r.sandbox == sandbox || sandbox == "*") out.push_back(r);
  }
  return out;
}

absl::StatusOr<std::vector<Rule>> RuleStore::InitPreset(const std::string& preset) {
  auto resources = PresetResources(preset);
  if (!resources.ok()) return resources.status();
  std::vector<RuleSpec> specs;
  for (const auto& res : *resources) {
    RuleSpec spec;
    spec.action = Action::kAllow;
    spec.resource = res;
    spec.origin = "preset:" + preset;
    specs.push_back(spec);
  }
  auto rules = Validated(specs);
  if (!rules.ok()) return rules.status();
  absl::Status s = Transact([&]() -> absl::Status {
    absl::Status d = db_->Exec("DELETE FROM rules WHERE origin LIKE 'preset:%' AND sandbox = ''");
    if (d.ok()) d = InsertAll(*rules);
    if (d.ok()) {
      d = db_->Exec("INSERT OR REPLACE INTO settings (key, value) VALUES ('preset', ?)",
                    {preset});
    }
    return d;
  });
  if (!s.ok()) return s;
  return rules;
}

absl::Status RuleStore::Transact(const std::function<absl::Status()>& body,
                                bool rules_changed) {
  std::lock_guard<std::mutex> lock(mu_);
  absl::Status s = InTransaction(db_, body);
  if (!s.ok() || !rules_changed) return s;
  return Reload();
}

absl::Status RuleStore::ReplaceSandboxRules(const std::string& sandbox,
                                            const std::string& origin_prefix,
                                            const std::vector<RuleSpec>& specs) {
  std::vector<RuleSpec> mine = specs;
  for (RuleSpec& spec : mine) spec.sandbox = sandbox;
  auto rules = Validated(mine);
  if (!rules.ok()) return rules.status();
  absl::Status s = db_->Exec("DELETE FROM rules WHERE sandbox = ? AND substr(origin, 1, ?) = ?",
                             {sandbox, static_cast<int64_t>(origin_prefix.size()), origin_prefix});
  return s.ok() ? InsertAll(*rules) : s;
}

std::string RuleStore::Preset() {
  auto rows = db_->Query("SELECT value FROM settings WHERE key = 'preset'");
  return rows.ok() && !rows->empty() ? (*rows)[0][0] : "";
}

std::shared_ptr<const RuleSet> RuleStore::Compiled() {
  std::lock_guard<std::mutex> lock(mu_);
  return compiled_;
}

absl::Status RuleStore::Reload() {
  auto rows = db_->Query(
      "SELECT id, action, resource, methods, paths, sandbox, origin FROM rules ORDER BY seq");
  if (!rows.ok()) return rows.status();
  std::vector<Rule> rules;
  for (const auto& row : *rows) {
    RuleSpec spec;
    spec.action = row[1] == "allow" ? Action::kAllow : Action::kDeny;
    spec.resource = row[2];
    spec.methods = row[3];
    if (!row[4].empty()) spec.paths = absl::StrSplit(row[4], '\n');
    spec.sandbox = row[5];
    spec.origin = row[6];
    auto r = policy::ValidateRule(spec);
    if (!r.ok()) return absl::DataLossError(absl::StrCat("stored rule ", row[0], ": ", r.status().message()));
    r->id = row[0];
    rules.push_back(*r);
  }
  rules_ = rules;
  compiled_ = std::make_shared<const RuleSet>(std::move(rules));
  uint64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::system_clock::now().time_since_epoch())
                        .count();
  revision_ = std::max(revision_ + 1, now_us);
  changed_.notify_all();
  return absl::OkStatus();
}

uint64_t RuleStore::Revision() {
  std::lock_guard<std::mutex> lock(mu_);
  return revision_;
}

uint64_t RuleStore::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  changed_.wait_for(lock, timeout, [&] { return revision_ != seen; });
  return revision_;
}

absl::StatusOr<Request> ParseTarget(const std::string& target, const std::string& method) {
  Request q;
  std::string t = absl::AsciiStrToLower(target);
  std::string hostport = t;
  bool url = false;
  for (const char* scheme : {"https://", "http://"}) {
    if (absl::StartsWith(t, scheme)) {
      url = true;
      std::string rest = t.substr(strlen(scheme));
      size_t slash = rest.find('/');
      hostport = rest.substr(0, slash);
      q.path = slash == std::string::npos ? "/" : std::string(target.substr(strlen(scheme) + slash));
      q.path = q.path.substr(0, q.path.find('?'));
      q.port = absl::StartsWith(t, "https://") ? 443 : 80;
    }
  }
  if (!url) q.port = 443;
  std::string host = hostport;
  if (!hostport.empty() && hostport[0] == '[') {
    size_t close = hostport.find(']');
    if (close == std::string::npos) return absl::InvalidArgumentError("missing ']' in target");
    host = hostport.substr(1, close - 1);
    if (close + 1 < hostport.size()) {
      uint32_t port;
      if (!absl::SimpleAtoi(hostport.substr(close + 2), &port) || port == 0 || port > 65535) {
        return absl::InvalidArgumentError(absl::StrCat("invalid port in target \"", target, "\""));
      }
      q.port = port;
    }
  } else if (std::count(hostport.begin(), hostport.end(), ':') == 1) {
    uint32_t port;
    size_t colon = hostport.find(':');
    if (!absl::SimpleAtoi(hostport.substr(colon + 1), &port) || port == 0 || port > 65535) {
      return absl::InvalidArgumentError(absl::StrCat("invalid port in target \"", target, "\""));
    }
    q.port = port;
    host = hostport.substr(0, colon);
  }
  if (host.empty()) return absl::InvalidArgumentError("empty target");
  if (ParseAddress(host, &q.address)) {
    q.has_address = true;
  } else {
    q.host = host;
  }
  if (url || !method.empty()) {
    q.http = true;
    q.method = method.empty() ? "GET" : absl::AsciiStrToUpper(method);
    if (q.path.empty()) q.path = "/";
  }
  return q;
}

}  // namespace airlock::policyd
