// Policy decision time against 10, 1k and 100k rules (Google Benchmark).
// The rule mix: exact domains, one-label and any-depth wildcards, CIDRs,
// and HTTP method/path rules; the lookups hit and miss.
#include <random>

#include "absl/strings/str_cat.h"
#include "benchmark/benchmark.h"
#include "common/policy/rules.h"

namespace airlock::policy {
namespace {

RuleSet MakeRules(int n) {
  std::vector<Rule> rules;
  for (int i = 0; i < n; ++i) {
    Rule r;
    r.action = i % 7 == 0 ? Action::kDeny : Action::kAllow;
    std::string res;
    switch (i % 5) {
      case 0: res = absl::StrCat("host", i, ".example.com"); break;
      case 1: res = absl::StrCat("*.svc", i, ".example.net"); break;
      case 2: res = absl::StrCat("**.zone", i, ".example.org"); break;
      case 3: res = absl::StrCat("10.", (i / 256) % 256, ".", i % 256, ".0/24"); break;
      case 4:
        res = absl::StrCat("api", i, ".example.io");
        r.methods = {"GET", "POST"};
        r.paths = {"/repos/**"};
        break;
    }
    r.resource = *ParseResource(res);
    rules.push_back(std::move(r));
  }
  return RuleSet(std::move(rules));
}

void BM_Decide(benchmark::State& state) {
  int n = static_cast<int>(state.range(0));
  RuleSet rs = MakeRules(n);
  std::vector<Request> reqs;
  std::mt19937 rng(42);
  for (int i = 0; i < 1024; ++i) {
    int k = static_cast<int>(rng() % (2 * n));  // half the lookups miss
    Request q;
    q.port = 443;
    switch (i % 4) {
      case 0: q.host = absl::StrCat("host", k, ".example.com"); break;
      case 1: q.host = absl::StrCat("a.b.zone", k, ".example.org"); break;
      case 2:
        q.has_address = ParseAddress(absl::StrCat("10.", (k / 256) % 256, ".", k % 256, ".7"),
                                     &q.address);
        break;
      case 3:
        q.host = absl::StrCat("api", k, ".example.io");
        q.http = true;
        q.method = "POST";
        q.path = "/repos/a/b/issues";
        break;
    }
    reqs.push_back(q);
  }
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(rs.Decide(reqs[i++ & 1023]));
  }
  state.SetLabel(absl::StrCat(n, " rules"));
}

BENCHMARK(BM_Decide)->Arg(10)->Arg(1000)->Arg(100000);

}  // namespace
}  // namespace airlock::policy
