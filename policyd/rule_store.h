// policyd's durable rules, in its SQLite file, and the compiled RuleSet
// rebuilt from them on every change.
#ifndef AIRLOCK_POLICYD_RULE_STORE_H_
#define AIRLOCK_POLICYD_RULE_STORE_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/state_db.h"
#include "common/policy/rules.h"

namespace airlock::policyd {

// The rule types are the shared ones (common/policy), which proxyd
// enforces too.
using policy::Action;
using policy::Decision;
using policy::ParseAddress;
using policy::ParseResource;
using policy::Request;
using policy::Resource;
using policy::Rule;
using policy::RuleSet;
using policy::RuleSpec;

class RuleStore {
 public:
  explicit RuleStore(StateDb* db) : db_(db) {}

  // Init creates the tables and, on a new install, applies "balanced".
  absl::Status Init();

  // Add validates every spec (all or nothing) and stores them.
  absl::StatusOr<std::vector<Rule>> Add(const std::vector<RuleSpec>& specs);
  // Remove deletes by id, or every rule with `resource` in `sandbox`'s
  // scope; NOT_FOUND when nothing matched.
  absl::StatusOr<int> Remove(const std::string& id, const std::string& resource,
                             const std::string& sandbox);
  // List returns the global rules and, with a sandbox, its own.
  std::vector<Rule> List(const std::string& sandbox);
  // InitPreset replaces the global preset rules.
  absl::StatusOr<std::vector<Rule>> InitPreset(const std::string& preset);
  std::string Preset();
  // Transact runs `body` in one transaction of policyd's file under the
  // store's lock, so no other write interleaves (KitGate writes its tables
  // through it). With `rules_changed` the rules are reloaded (and the
  // revision proxyd follows moves) after a commit.
  absl::Status Transact(const std::function<absl::Status()>& body, bool rules_changed = true);
  // ReplaceSandboxRules, inside Transact's body only: drops `sandbox`'s
  // rules whose origin starts with `origin_prefix` and stores `specs`
  // (validated, all or nothing).
  absl::Status ReplaceSandboxRules(const std::string& sandbox, const std::string& origin_prefix,
                                   const std::vector<RuleSpec>& specs);
  // Compiled is the current RuleSet.
  std::shared_ptr<const RuleSet> Compiled();

  // Revision increases on every change of the rules (it starts from the
  // clock at Init, so it also grows across restarts).
  uint64_t Revision();
  // WaitForChange blocks until Revision() != seen or `timeout` passes, and
  // returns the revision.
  uint64_t WaitForChange(uint64_t seen, std::chrono::milliseconds timeout);
 private:
  absl::Status Reload();
  absl::Status Insert(const Rule& r);
  absl::Status InsertAll(const std::vector<Rule>& rules);
  // Validated turns specs into rules with fresh ids; all or nothing.
  static absl::StatusOr<std::vector<Rule>> Validated(const std::vector<RuleSpec>& specs);

  StateDb* db_;
  std::mutex mu_;
  std::vector<Rule> rules_;
  std::shared_ptr<const RuleSet> compiled_;
  uint64_t revision_ = 0;
  std::condition_variable changed_;
};

// ParseTarget reads a check target ("host", "host:port", "https://host/p",
// an IP) into a request; with a URL the request is HTTP(S).
absl::StatusOr<Request> ParseTarget(const std::string& target, const std::string& method);

}  // namespace airlock::policyd

#endif  // AIRLOCK_POLICYD_RULE_STORE_H_
