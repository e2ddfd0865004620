// CredentialCache: the credentials secretsd's Resolve answered for a
// sandbox's requests to a host, kept only while secretsd's revision watch
// (SecretsClient) vouches for them, so that a secret set or removed still
// takes effect on the very next request.
//
// An answer is of a revision of one secretsd process (instance). It is
// used only while the watch knows that same revision of that instance and
// its lease runs: the lease is the time secretsd lets pass before a change
// returns to its caller when this proxyd does not acknowledge it
// (secretsd/revision_board.h says why that is enough). Pure: the watch
// and the clock are fed in.
#ifndef AIRLOCK_PROXYD_CREDENTIAL_CACHE_H_
#define AIRLOCK_PROXYD_CREDENTIAL_CACHE_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "proxyd/inject.h"

namespace airlock::proxyd {

class CredentialCache {
 public:
  using Clock = std::chrono::steady_clock;

  explicit CredentialCache(size_t max_entries = 4096,
                           std::function<Clock::time_point()> now = Clock::now)
      : max_entries_(max_entries), now_(std::move(now)) {}

  // Lookup is the answer kept for the request, when the watch vouches for
  // it; nullopt means ask secretsd.
  std::optional<std::vector<Placement>> Lookup(const std::string& sandbox,
                                               const std::string& host, uint16_t port);
  // Generation changes at every Forget and Lost: an answer asked for
  // before either is not stored (a detached sandbox's values must not come
  // back with a call that was in flight).
  uint64_t Generation();
  // Store keeps an answer of `instance`'s `revision`, when that is the
  // revision the watch knows (an answer of an older one is already stale,
  // of a newer one not yet vouched for) and `generation` (taken before
  // asking) is still current. Past max_entries the cache starts over.
  void Store(const std::string& sandbox, const std::string& host, uint16_t port,
             uint64_t instance, uint64_t revision, uint64_t generation,
             std::vector<Placement> placements);

  // Known is what the watch heard: `revision` of `instance` (another
  // instance drops everything kept; an older revision than known leaves
  // the revision as it is). `lease_until`, for the answer to a ping, is
  // how long the watch vouches (an older revision's answer still extends
  // it: the lease is about changes after the ping); a pushed change passes
  // none and extends nothing. What is kept is dropped once the lease
  // lapses, not only left unused.
  void Known(uint64_t instance, uint64_t revision,
             std::optional<Clock::time_point> lease_until);
  // Lost: the watch ended; nothing kept is used until Known again.
  void Lost();
  // Forget drops what was kept for `sandbox` (it detached).
  void Forget(const std::string& sandbox);

  size_t size();

 private:
  using Key = std::tuple<std::string, std::string, uint16_t>;
  struct Entry {
    uint64_t revision;
    std::vector<Placement> placements;
  };
  const size_t max_entries_;
  const std::function<Clock::time_point()> now_;
  std::mutex mu_;
  uint64_t instance_ = 0;  // 0: no watch
  uint64_t revision_ = 0;
  Clock::time_point lease_until_{};
  uint64_t generation_ = 0;
  std::map<Key, Entry> entries_;
};

}  // namespace airlock::proxyd

#endif  // AIRLOCK_PROXYD_CREDENTIAL_CACHE_H_
