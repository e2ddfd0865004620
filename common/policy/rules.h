// Network rules and the decision of one connection or request against
// them. Resources: exact domains, "*.example.com" (one label),
// "**.example.com" (any depth), "host:port", IPs, CIDRs and "**". HTTP
// rules add methods and path globs. Deny always beats allow; nothing
// matching means deny.
#ifndef AIRLOCK_COMMON_POLICY_RULES_H_
#define AIRLOCK_COMMON_POLICY_RULES_H_

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::policy {

enum class Action { kAllow, kDeny };

// Resource is a parsed rule resource.
struct Resource {
  enum class Kind { kAny, kDomain, kOneLabel, kAnyDepth, kAddress };
  Kind kind = Kind::kAny;
  // Domain (lower case, no trailing dot) for kDomain; the suffix after
  // "*." / "**." for the wildcard kinds.
  std::string domain;
  // kAddress: 16 bytes (IPv4 mapped into ::ffff:0:0/96) and a prefix length
  // over those 128 bits.
  std::array<uint8_t, 16> address{};
  int prefix = 128;
  // 0 means any port.
  uint16_t port = 0;
  // The canonical text.
  std::string text;
};

// ParseResource reads one resource; errors quote it and say what is wrong.
absl::StatusOr<Resource> ParseResource(absl::string_view text);

// ParseMethods reads "GET,POST" or "ANY" (case-insensitive) into upper-case
// methods; "ANY" and "" mean any method (an empty list).
absl::StatusOr<std::vector<std::string>> ParseMethods(absl::string_view text);

// ValidatePathGlob checks an HTTP path rule: it starts with '/', has no
// query, fragment or ".." segment.
absl::Status ValidatePathGlob(absl::string_view glob);

// PathMatches matches a request path (query already removed) against a
// glob where '*' spans one segment and '**' any number of segments.
bool PathMatches(absl::string_view glob, absl::string_view path);

// Rule is one network rule.
struct Rule {
  std::string id;
  Action action = Action::kDeny;
  Resource resource;
  // Upper-case methods; empty means any.
  std::vector<std::string> methods;
  // Path globs; empty means any path.
  std::vector<std::string> paths;
  // "" for a global rule.
  std::string sandbox;
  std::string origin;
  // A rule with methods or paths matches HTTP requests only.
  bool http_only() const { return !methods.empty() || !paths.empty(); }
  // Text is "allow api.github.com:443 POST /repos/**".
  std::string Text() const;
};

// Request is what is being decided.
struct Request {
  std::string sandbox;
  // Host name (lower case) when known; empty for a bare IP connection.
  std::string host;
  // Destination address when known (16 bytes, IPv4 mapped).
  bool has_address = false;
  std::array<uint8_t, 16> address{};
  // 0 means any port (a DNS question: no port is known yet).
  uint16_t port = 0;
  // HTTP method and path when the request is HTTP (plain or intercepted).
  bool http = false;
  std::string method;
  std::string path;
};

// ParseAddress reads an IPv4 or IPv6 literal into the 16-byte form.
bool ParseAddress(absl::string_view text, std::array<uint8_t, 16>* out);

// Decision is the verdict and why.
struct Decision {
  Action action = Action::kDeny;
  // The deciding rule; null for the default deny.
  const Rule* rule = nullptr;
  std::string reason;
  // For a non-HTTP request: some method/path rule applies to this host and
  // no host-wide deny does, so HTTP requests to it must be intercepted and
  // decided one by one (they may be allowed, or denied, unlike the rest).
  bool inspect = false;
  // Some rule with path globs applies to this host and port (whether or not
  // it matched): a path that servers may read as another path (an empty
  // segment, an encoded '/') could then reach what a glob did not mean.
  bool path_rules = false;
};

// RuleSpec is a rule as a caller writes it, before validation.
struct RuleSpec {
  Action action = Action::kDeny;
  std::string resource;
  std::string methods;  // "GET,POST", "ANY" or ""
  std::vector<std::string> paths;
  std::string sandbox;
  std::string origin = "user";
};

// ValidateRule turns a spec into a rule (without an id), or says what part
// of it is wrong (INVALID_ARGUMENT).
absl::StatusOr<Rule> ValidateRule(const RuleSpec& spec);

// RuleSet indexes rules for decisions that do not scan every rule: exact
// domains and wildcard suffixes by hash, addresses by prefix length.
class RuleSet {
 public:
  explicit RuleSet(std::vector<Rule> rules);

  // Decide applies the global rules and those of `req.sandbox`.
  Decision Decide(const Request& req) const;

  const std::vector<Rule>& rules() const { return rules_; }

 private:
  void Candidates(const Request& req, std::vector<const Rule*>* out) const;

  std::vector<Rule> rules_;
  std::vector<size_t> any_;
  std::unordered_map<std::string, std::vector<size_t>> exact_;
  std::unordered_map<std::string, std::vector<size_t>> one_label_;
  std::unordered_map<std::string, std::vector<size_t>> any_depth_;
  // prefix length -> masked address bytes -> rules.
  std::map<int, std::unordered_map<std::string, std::vector<size_t>>> by_prefix_;
};

}  // namespace airlock::policy

#endif  // AIRLOCK_COMMON_POLICY_RULES_H_
