// Kit resolution time (prints its own table: median and p90 per
// operation, which Google Benchmark's per-iteration means do not give).
//
// Case 1: a Quill-shaped workload and 10 Forge-shaped mixins (bounded
// network-policy@2 allow/deny entries, a credential, a port or a volume,
// `requires` on the workload, two of them on another mixin), generated
// into a temp directory: ResolveKits over the 11 files (read + parse +
// effective + compose + surface), Diff against an upgraded set (one mixin
// with one deny dropped and one host added), and the same pipeline from
// Kits parsed once up front.
//
// Case 2: one mixin just under the 512 KiB descriptor budget, nearly all
// network-policy@2 entries plus credentials, beside a tiny workload:
// parse, resolve, surface, Diff against a one-entry change, and how fast
// a 513 KiB descriptor is refused.
//
// `bazel run -c opt //bench:kit_bench [-- --budget=SECONDS]`; the budget
// is the sampling time per row (default 2). Nothing is asserted on time;
// a generated descriptor that does not resolve exits non-zero.
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/kit/compose.h"
#include "common/kit/descriptor.h"
#include "common/kit/document.h"
#include "common/kit/effective.h"
#include "common/kit/oci.h"
#include "common/kit/resolve.h"
#include "common/kit/surface.h"

namespace airlock::kit {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double g_budget_s = 2.0;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "kit_bench: %s\n", what.c_str());
  std::exit(1);
}

template <typename T>
T Must(absl::StatusOr<T> v, const std::string& what) {
  if (!v.ok()) Fail(absl::StrCat(what, ": ", v.status().ToString()));
  return *std::move(v);
}

void WriteFile(const fs::path& p, const std::string& text) {
  std::ofstream f(p, std::ios::binary);
  f << text;
  if (!f.good()) Fail(absl::StrCat("cannot write ", p.string()));
}

// ---- timing -------------------------------------------------------------

struct Row {
  std::string name;
  long iterations = 0;
  double median_ms = 0;
  double p90_ms = 0;
  std::string items;
};

// Measure samples `op` for about the budget and returns the per-operation
// median and p90. An operation under ~20 us is timed in batches, each
// sample the batch mean. The warm-up run counts as a sample when it took
// 50 ms or more, so an operation longer than the budget is run once;
// `prior_s` is such a run the caller already timed.
Row Measure(const std::string& name, const std::string& items, const std::function<void()>& op,
            double prior_s = -1) {
  auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  double once = prior_s;
  if (once < 0) {
    Clock::time_point t = Clock::now();
    op();
    once = seconds(Clock::now() - t);
  }
  std::vector<double> per_op;
  if (once >= 0.05) per_op.push_back(once);
  long batch = once >= 20e-6 ? 1 : static_cast<long>(20e-6 / std::max(once, 1e-9)) + 1;
  double elapsed = per_op.empty() ? 0 : once;
  Clock::time_point start = Clock::now();
  while (elapsed < g_budget_s || per_op.empty()) {
    Clock::time_point s = Clock::now();
    for (long i = 0; i < batch; ++i) op();
    per_op.push_back(seconds(Clock::now() - s) / static_cast<double>(batch));
    elapsed = (once >= 0.05 ? once : 0) + seconds(Clock::now() - start);
  }
  std::sort(per_op.begin(), per_op.end());
  auto quantile = [&](double q) {
    size_t i = static_cast<size_t>(q * static_cast<double>(per_op.size() - 1) + 0.5);
    return per_op[std::min(i, per_op.size() - 1)] * 1e3;
  };
  Row r;
  r.name = name;
  r.iterations = static_cast<long>(per_op.size()) * batch;
  r.median_ms = quantile(0.5);
  r.p90_ms = quantile(0.9);
  r.items = items;
  return r;
}

void PrintTable(const std::string& title, const std::vector<Row>& rows) {
  std::printf("\n%s\n", title.c_str());
  std::printf("  %-52s %9s %11s %11s  %s\n", "case", "iters", "median ms", "p90 ms",
              "items (hosts: unbounded allow+deny hosts of the surface; atoms: HTTP atoms)");
  for (const Row& r : rows) {
    std::string iters = r.iterations > 0 ? absl::StrCat(r.iterations) : "-";
    std::printf("  %-52s %9s %11.5g %11.5g  %s\n", r.name.c_str(), iters.c_str(), r.median_ms,
                r.p90_ms, r.items.c_str());
  }
  std::fflush(stdout);
}

size_t Hosts(const NetworkSurface& n) { return n.allow_hosts.size() + n.deny_hosts.size(); }
size_t Atoms(const NetworkSurface& n) { return n.http_allow.size() + n.http_deny.size(); }

std::string SurfaceItems(const Surface& s) {
  return absl::StrCat("hosts=", Hosts(s.install) + Hosts(s.runtime),
                      " atoms=", Atoms(s.install) + Atoms(s.runtime),
                      " creds=", s.credentials_install.size() + s.credentials_runtime.size(),
                      " ports=", s.ports.size(), " vols=", s.storage_paths.size());
}

// ---- the pipeline ResolveKits runs, from Kits already parsed -------------

struct Loaded {
  std::string ref;
  Descriptor authored;
};

std::vector<Loaded> LoadAll(const std::vector<std::string>& refs) {
  std::vector<Loaded> out;
  for (const std::string& ref : refs) {
    LoadedKit k = Must(LoadKitRef(ref), ref);
    out.push_back(Loaded{ref, std::move(k.descriptor)});
  }
  return out;
}

std::vector<KitInput> EffectiveAll(const std::vector<Loaded>& kits) {
  std::vector<KitInput> inputs;
  CreateRequest request;
  request.host_types = AcceptedTypes();
  for (const Loaded& k : kits) {
    Descriptor published = Must(ExpandBuildArgs(k.authored, {}), k.ref);
    EffectiveKit e = Must(MakeEffective(published, request), k.ref);
    inputs.push_back(KitInput{k.ref, std::move(e.descriptor)});
  }
  return inputs;
}

Surface SurfaceFromLoaded(const std::vector<Loaded>& kits) {
  Composition c = Must(Compose(EffectiveAll(kits)), "compose");
  return ProjectSurface(c.merged);
}

ResolvedKits Resolve(const std::vector<std::string>& refs, const std::string& what) {
  return Must(ResolveKits(refs, {}), what);
}

// ---- case 1: a workload and 10 mixins ------------------------------------

// Quill-shaped: build-phase version, create-phase args exported into the
// container (a file reads one back through kit.env: DiffKits takes no
// environment, so nothing here needs one), network-policy@1, a proxy-managed credential with OAuth,
// session verbs, volumes, a port from an arg, lifecycle, agent-context.
constexpr char kWorkload[] = R"(# syntax=docker/sandbox-kit:3
schemaVersion: "3"
kind: workload
displayName: Bench agent
author: Airlock Bench <bench@airlock.invalid>
description: A terminal coding agent shaped like the Quill fixture.
sourceUrl: https://quill.invalid/source
licenses: [Apache-2.0]
args:
  version:
    default: "2.4.1"
    pattern: '[0-9]+\.[0-9]+\.[0-9]+'
    buildArg: QUILL_VERSION
  model:
    default: ""
    pattern: '[A-Za-z0-9._-]*'
    env: QUILL_MODEL
  effort:
    default: ""
    enum: ["", low, high]
    env: QUILL_EFFORT
  apiPort:
    default: "7070"
    pattern: '[0-9]{2,5}'
provides: ["quill@${{ kit.args.version }}"]
capabilities:
  - type: com.docker.sandbox/sbx@1
  - type: com.docker.sandbox/network-policy@1
    name: Quill API
    config:
      install: {allow: [registry.npmjs.org]}
      runtime: {allow: [api.quill.dev:443, auth.quill.dev:443, chat.quill.dev:443]}
  - type: com.docker.sandbox/credential@1
    optional: true
    config:
      service: quill
      phase: runtime
      apiKey:
        name: QUILL_API_KEY
        proxyManaged: true
        inject:
          - {domain: api.quill.dev, header: Authorization, format: "Bearer %s"}
      oauth:
        tokenEndpoint: {host: auth.quill.dev, path: /oauth/token}
        resourceHosts: [chat.quill.dev]
        sentinels: {accessToken: quill-oat-proxy-managed, refreshToken: quill-ort-proxy-managed}
        credentialFile:
          path: ~/.quill/credentials.json
          structure:
            oauth: {accessToken: "{{.AccessToken}}", expiresAt: "{{.ExpiresAt}}", scopes: "{{.Scopes}}"}
  - type: com.docker.sandbox/agent-sessions@1
    config:
      prompt: ["-p", "{{.Prompt}}"]
      resume: ["--resume", "{{.SessionID}}"]
      continue: ["--continue"]
      list: [quill, sessions, --ids]
  - type: com.docker.sandbox/agent-interactive-sessions@1
    config:
      prompt: ["{{.Prompt}}"]
      resume: ["--resume", "{{.SessionID}}"]
      sessionPicker: ["--resume"]
      list: [quill, sessions, --ids]
  - type: com.docker.sandbox/volume@1
    config: {path: /home/agent/.quill/history, size: 2g}
  - type: com.docker.sandbox/volume@1
    config: {path: /home/agent/.quill/sessions, size: 512m, mode: "0700"}
  - type: com.docker.sandbox/port@1
    config: {name: quill-api, container: "${{ kit.args.apiPort }}"}
  - type: com.docker.sandbox/lifecycle@1
    config:
      install:
        - command: |
            mkdir -p /home/agent/.quill && chown agent:agent /home/agent/.quill
          user: "0"
        - command: "printf 'model=%s\\n' '${{ kit.args.model }}' > /home/agent/.quill/config"
          user: agent
          env: [WORKSPACE_DIR]
      startup:
        - command: [sh, -c, "chown -R agent:agent /home/agent/.quill/history 2>/dev/null || true"]
          user: "0"
      files:
        - path: /home/agent/.quill/settings.json
          content: '{"effort": "${{ kit.args.effort }}", "model": "${{ kit.env.QUILL_MODEL }}"}'
          mode: "0644"
          overwrite: false
      interactive: [--tui]
  - type: com.docker.sandbox/agent-context@1
    config:
      filename: AGENTS.md
      directory: /home/agent/.quill
      content: You are running inside an Airlock sandbox.
)";

// MixinYaml is a Forge-shaped mixin: network-policy@2 with an unbounded
// host, bounded allows and denies on its API host, an install-phase
// host, a proxy-managed credential, and a port (even i) or a volume (odd).
// `upgraded` drops the last deny and adds one allowed host.
std::string MixinYaml(int i, bool upgraded) {
  std::string id = absl::StrFormat("%02d", i);
  std::string dom = absl::StrCat("t", id, ".bench.example");
  std::string api = absl::StrCat("api.", dom);
  std::string requires_ = "\"quill >= 2.0, < 3\"";
  if (i == 3) absl::StrAppend(&requires_, ", \"bench-tool-00 >= 1.0\"");
  if (i == 7) absl::StrAppend(&requires_, ", \"bench-tool-03\"");
  std::string y = absl::StrCat(R"(# syntax=docker/sandbox-kit:3
schemaVersion: "3"
kind: mixin
displayName: Bench tool )",
                               id, R"(
description: Command-line client number )",
                               id, R"( for the bench.
licenses: [MIT]
provides: ["bench-tool-)",
                               id, "@1.", i, R"(.0"]
requires: [)",
                               requires_, R"(]
conflicts: [bench-tool-)",
                               id, R"(-legacy]
capabilities:
  - type: com.docker.sandbox/network-policy@2
    config:
      install:
        allow: [dl.)",
                               dom, R"(]
      runtime:
        allow:
          - )",
                               dom, "\n");
  const char* methods[] = {"[GET, HEAD]", "[GET, HEAD, POST, PATCH, PUT, DELETE]", "[POST, PUT]",
                           "[GET]"};
  for (int k = 0; k < 6; ++k) {
    absl::StrAppend(&y, "          - {hosts: [", k == 5 ? absl::StrCat("uploads.", dom) : api,
                    "], methods: ", methods[k % 4], ", paths: [/v", k, "/repos/**, /v", k,
                    "/users/*]}\n");
  }
  if (upgraded) absl::StrAppend(&y, "          - extra.", dom, "\n");
  absl::StrAppend(&y, "        deny:\n");
  int denies = upgraded ? 3 : 4;
  for (int k = 0; k < denies; ++k) {
    absl::StrAppend(&y, "          - {hosts: [", api, "], methods: [DELETE], paths: [/v", k,
                    "/repos/*/admin/**]}\n");
  }
  absl::StrAppend(&y, R"(  - type: com.docker.sandbox/credential@1
    optional: true
    config:
      service: bench-tool-)",
                  id, R"(
      phase: runtime
      apiKey:
        name: TOOL)",
                  id, R"(_TOKEN
        proxyManaged: true
        inject:
          - {domain: )",
                  api, R"(, header: Authorization, format: "Bearer %s"}
          - {domain: )",
                  dom, R"(, scheme: basic, username: x-access-token}
)");
  if (i % 2 == 0) {
    absl::StrAppend(&y, "  - type: com.docker.sandbox/port@1\n    config: {name: tool", id,
                    ", container: ", 8100 + i, "}\n");
  } else {
    absl::StrAppend(&y,
                    "  - type: com.docker.sandbox/volume@1\n    config: {path: /home/agent/.tool",
                    id, ", size: 64m}\n");
  }
  absl::StrAppend(&y, R"(  - type: com.docker.sandbox/agent-context@1
    config:
      directory: /home/agent/.tool)",
                  id, R"(
      filename: TOOL.md
      content: Use the tool for repository work; deleting repositories is refused.
)");
  return y;
}

void CaseTenMixins(const fs::path& dir) {
  std::vector<std::string> refs, upgraded_refs;
  fs::path wl = dir / "quill.yaml";
  WriteFile(wl, kWorkload);
  refs.push_back(wl.string());
  size_t bytes = sizeof(kWorkload) - 1;
  for (int i = 0; i < 10; ++i) {
    fs::path p = dir / absl::StrFormat("tool-%02d.yaml", i);
    std::string text = MixinYaml(i, false);
    bytes += text.size();
    WriteFile(p, text);
    refs.push_back(p.string());
  }
  constexpr int kUpgraded = 5;
  fs::path up = dir / absl::StrFormat("tool-%02d-v2.yaml", kUpgraded);
  WriteFile(up, MixinYaml(kUpgraded, true));
  upgraded_refs = refs;
  upgraded_refs[1 + kUpgraded] = up.string();

  // Resolve both sets once, loudly, and check the graph and the diff.
  ResolvedKits base = Resolve(refs, "case 1 base set");
  ResolvedKits upgraded = Resolve(upgraded_refs, "case 1 upgraded set");
  if (base.composition.order.size() != 11) Fail("case 1: composition does not hold 11 kits");
  auto pos = [&](const std::string& suffix) {
    const auto& o = base.composition.order;
    for (size_t i = 0; i < o.size(); ++i) {
      if (absl::EndsWith(o[i], suffix)) return i;
    }
    Fail(absl::StrCat("case 1: ", suffix, " not in the composition order"));
  };
  if (!(pos("quill.yaml") < pos("tool-00.yaml") && pos("tool-00.yaml") < pos("tool-03.yaml") &&
        pos("tool-03.yaml") < pos("tool-07.yaml"))) {
    Fail("case 1: composition order ignores the requires graph");
  }
  SurfaceDiff d = Diff(base.surface, upgraded.surface);
  if (!d.widens()) Fail("case 1: the upgraded set does not widen");
  std::string items = SurfaceItems(base.surface);
  std::string diff_items =
      absl::StrCat("widenings=", d.widenings.size(), " narrowings=", d.narrowings.size());
  std::printf("case 1: workload + 10 mixins, %zu descriptor bytes in 11 files; order: quill",
              bytes);
  for (size_t i = 1; i < base.composition.order.size(); ++i) {
    std::printf(" %s", fs::path(base.composition.order[i]).stem().c_str());
  }
  std::printf("\n  diff:");
  for (const std::string& w : d.widenings) std::printf(" [+] %s;", w.c_str());
  for (const std::string& n : d.narrowings) std::printf(" [-] %s;", n.c_str());
  std::printf("\n");
  std::fflush(stdout);

  std::vector<Loaded> loaded = LoadAll(refs);
  std::vector<Loaded> loaded_up = LoadAll(upgraded_refs);
  std::vector<KitInput> inputs = EffectiveAll(loaded);
  Composition composed = Must(Compose(inputs), "compose");

  std::vector<Row> rows;
  size_t sink = 0;
  rows.push_back(Measure("resolve: ResolveKits, 11 files (parse..surface)", items, [&] {
    sink += Resolve(refs, "resolve").surface.runtime.http_allow.size();
  }));
  rows.push_back(Measure("diff alone (Diff of two surfaces)", diff_items,
                         [&] { sink += Diff(base.surface, upgraded.surface).widenings.size(); }));
  rows.push_back(Measure("total: resolve old + resolve new + Diff", diff_items, [&] {
    ResolvedKits a = Resolve(refs, "old");
    ResolvedKits b = Resolve(upgraded_refs, "new");
    sink += Diff(a.surface, b.surface).widenings.size();
  }));
  rows.push_back(Measure("total via DiffKits (loads each ref once more)", diff_items, [&] {
    sink += Must(DiffKits(refs, upgraded_refs, {}), "DiffKits").widenings.size();
  }));
  rows.push_back(Measure("load once each: LoadKitRef x11 (read+parse)", "11 kits", [&] {
    for (const std::string& r : refs) sink += Must(LoadKitRef(r), r).descriptor.capabilities.size();
  }));
  rows.push_back(Measure("  resolve from loaded (effective+compose+surf)", items,
                         [&] { sink += SurfaceFromLoaded(loaded).runtime.http_allow.size(); }));
  rows.push_back(Measure("  total from loaded (2 resolves + Diff)", diff_items, [&] {
    Surface a = SurfaceFromLoaded(loaded);
    Surface b = SurfaceFromLoaded(loaded_up);
    sink += Diff(a, b).widenings.size();
  }));
  rows.push_back(Measure("  of which effective x11 (expand+validate)", "11 kits",
                         [&] { sink += EffectiveAll(loaded).size(); }));
  rows.push_back(Measure("  of which Compose (11 effective kits)", "11 kits",
                         [&] { sink += Must(Compose(inputs), "compose").order.size(); }));
  rows.push_back(Measure("  of which ProjectSurface (merged)", items, [&] {
    sink += ProjectSurface(composed.merged).runtime.http_allow.size();
  }));
  if (sink == 0) Fail("nothing measured");
  PrintTable("case 1: resolve + surface + diff, workload + 10 mixins", rows);
}

// ---- case 2: one descriptor near the 512 KiB budget ----------------------

constexpr char kTinyWorkload[] = R"(# syntax=docker/sandbox-kit:3
schemaVersion: "3"
kind: workload
provides: ["tiny@1.0.0"]
capabilities:
  - type: com.docker.sandbox/sbx@1
  - type: com.docker.sandbox/network-policy@1
    config: {runtime: {allow: [api.tiny.example:443]}}
)";

struct Bulk {
  std::string text;
  size_t entries = 0;
  size_t hosts = 0;
  size_t credentials = 0;
};

// BulkEntry is the i-th network entry: varied unbounded hosts (some with
// ports), bounded allows with methods and paths, multi-host entries, and
// pattern or bounded denies. Returns the YAML list line and adds its hosts.
std::string BulkEntry(size_t i, bool* deny, size_t* hosts) {
  // Ten consecutive entries share a service domain, so a bounded deny
  // (i % 10 == 4) sits on the host a bounded allow (i - 2) grants.
  std::string svc = absl::StrCat("svc", (i / 10) % 97, ".bulk", (i / 10) % 13, ".example");
  const char* methods[] = {"[GET]",       "[GET, HEAD]", "[POST, PUT, PATCH]",
                           "[GET, POST]", "[DELETE]",    "[ANY]"};
  const char* paths[] = {"/v1/repos/**", "/v2/items/*",         "/api/users/*/keys",
                         "/upload/**",   "/v3/orgs/*/teams/**", "/health"};
  *deny = i % 5 == 4;
  switch (i % 10) {
    case 0:
      *hosts += 1;
      return absl::StrCat("- h", i, ".", svc);
    case 1:
      *hosts += 1;
      return absl::StrCat("- h", i, ".", svc, ":443");
    case 2:
    case 6:
      *hosts += 1;
      return absl::StrCat("- {hosts: [api", i, ".", svc, "], methods: ", methods[i % 6],
                          ", paths: [", paths[i % 6], ", ", paths[(i + 1) % 6], "]}");
    case 3:
    case 7:
      *hosts += 2;
      return absl::StrCat("- {hosts: [a", i, ".", svc, ", b", i, ".", svc,
                          "], methods: ", methods[(i / 10) % 4], "}");
    case 8:
      *hosts += 1;
      return absl::StrCat("- {hosts: [up", i, ".", svc, "], methods: [ANY], paths: [",
                          paths[(i / 10) % 6], "]}");
    case 4:
      *hosts += 1;
      return absl::StrCat("- {hosts: [api", i - 2, ".", svc, "], methods: [DELETE], paths: [",
                          paths[i % 6], "]}");
    case 5:
      *hosts += 1;
      return absl::StrCat("- \"*.bad", i, ".", svc, "\"");
    default:  // 9
      *hosts += 1;
      return absl::StrCat("- \"**.t", i, ".", svc, "\"");
  }
}

// MakeBulk fills a mixin with network-policy@2 entries (a fifth of them
// in the install phase) and 64 credentials until one more entry would
// pass `limit` bytes. `variant` changes the method of one bounded allow.
Bulk MakeBulk(size_t limit, bool variant) {
  constexpr int kCredentials = 64;
  std::string head = R"(# syntax=docker/sandbox-kit:3
schemaVersion: "3"
kind: mixin
displayName: Bulk policy
description: A mixin near the descriptor budget, nearly all network policy.
provides: ["bulk@1.0.0"]
requires: ["tiny"]
capabilities:
)";
  std::string creds;
  std::vector<std::string> cred_hosts;
  for (int c = 0; c < kCredentials; ++c) {
    std::string host = absl::StrCat("cred", c, ".bulk.example");
    cred_hosts.push_back(host);
    absl::StrAppend(&creds, R"(  - type: com.docker.sandbox/credential@1
    config:
      service: bulk)",
                    c, R"(
      phase: runtime
      apiKey:
        name: BULK)",
                    c, R"(_TOKEN
        proxyManaged: true
        inject:
          - {domain: )",
                    host, R"(, header: Authorization, format: "Bearer %s"}
)");
  }
  std::string runtime_allow, runtime_deny, install_allow, install_deny;
  for (const std::string& h : cred_hosts) absl::StrAppend(&runtime_allow, "          - ", h, "\n");
  std::string np_head = "  - type: com.docker.sandbox/network-policy@2\n    config:\n";
  Bulk b;
  b.hosts = cred_hosts.size();
  b.credentials = kCredentials;
  auto assemble = [&] {
    return absl::StrCat(head, np_head, "      install:\n        allow:\n", install_allow,
                        "        deny:\n", install_deny, "      runtime:\n        allow:\n",
                        runtime_allow, "        deny:\n", runtime_deny, creds);
  };
  size_t fixed = assemble().size();
  size_t used = fixed;
  size_t changed = 0;
  for (size_t i = 0;; ++i) {
    bool deny = false;
    size_t hosts = 0;
    std::string line = absl::StrCat("          ", BulkEntry(i, &deny, &hosts), "\n");
    if (used + line.size() > limit) break;
    bool install = (i / 10) % 5 == 0;
    // The variant's change: entry 2022 (a bounded runtime allow) trades
    // GET for PUT, the same length, so both files hold the same entries.
    if (i == 2022) {
      if (deny || install) Fail("bulk: entry 2022 is not a runtime allow");
      if (variant) {
        size_t at = line.find("methods: [GET]");
        if (at == std::string::npos) Fail("bulk: entry 2022 has no methods: [GET]");
        line.replace(at, 14, "methods: [PUT]");
      }
      changed = 1;
    }
    std::string& list =
        install ? (deny ? install_deny : install_allow) : (deny ? runtime_deny : runtime_allow);
    list += line;
    used += line.size();
    b.entries += 1;
    b.hosts += hosts;
  }
  if (!changed) Fail("bulk: too few entries to hold the changed one");
  b.text = assemble();
  if (b.text.size() != used) Fail("bulk: size bookkeeping is off");
  return b;
}

void CaseBulk(const fs::path& dir) {
  fs::path tiny = dir / "tiny.yaml";
  WriteFile(tiny, kTinyWorkload);
  // Leave 2 KiB: "just under" the budget, and the canonical JSON that
  // expansion checks against the same budget has to fit too.
  Bulk bulk = MakeBulk(kMaxDescriptorBytes - 2048, false);
  Bulk variant = MakeBulk(kMaxDescriptorBytes - 2048, true);
  Bulk over = MakeBulk(513 * 1024, false);
  if (bulk.text.size() > kMaxDescriptorBytes || bulk.text.size() != variant.text.size()) {
    Fail("bulk: generated size is off");
  }
  if (over.text.size() <= kMaxDescriptorBytes) Fail("bulk: the 513 KiB descriptor is not over");
  fs::path big = dir / "bulk.yaml", big2 = dir / "bulk-v2.yaml", huge = dir / "bulk-513k.yaml";
  WriteFile(big, bulk.text);
  WriteFile(big2, variant.text);
  WriteFile(huge, over.text);

  Descriptor parsed = Must(ParseDescriptor(bulk.text), "bulk parse");
  size_t json_bytes = ToCanonicalJson(parsed.document).size();
  std::vector<std::string> refs = {tiny.string(), big.string()};
  std::vector<std::string> refs2 = {tiny.string(), big2.string()};
  ResolvedKits base = Resolve(refs, "case 2 bulk");
  ResolvedKits changed = Resolve(refs2, "case 2 bulk variant");
  // Diff is slow here (seconds); this timed run is the diff row's first sample.
  Clock::time_point diff_start = Clock::now();
  SurfaceDiff d = Diff(base.surface, changed.surface);
  double diff_s = std::chrono::duration<double>(Clock::now() - diff_start).count();
  if (!d.widens()) Fail("case 2: the one-entry change does not widen");
  absl::Status refused = ParseDescriptor(over.text).status();
  if (refused.ok() || !absl::StrContains(refused.message(), "byte budget")) {
    Fail(absl::StrCat("case 2: the 513 KiB descriptor was not refused by size: ",
                      refused.ToString()));
  }
  absl::Status refused_file = LoadKitRef(huge.string()).status();
  if (refused_file.ok()) Fail("case 2: LoadKitRef accepted the 513 KiB descriptor");

  std::printf(
      "\ncase 2: bulk mixin %zu bytes (%.1f KiB; budget %zu), canonical JSON %zu bytes; %zu "
      "network entries, %zu hosts, %zu credentials; 513 KiB one: %zu bytes\n",
      bulk.text.size(), bulk.text.size() / 1024.0, kMaxDescriptorBytes, json_bytes, bulk.entries,
      bulk.hosts, bulk.credentials, over.text.size());
  std::printf("  diff:");
  for (const std::string& w : d.widenings) std::printf(" [+] %s;", w.c_str());
  for (const std::string& n : d.narrowings) std::printf(" [-] %s;", n.c_str());
  std::printf("\n  refusal: %s\n", std::string(refused.message()).c_str());
  std::fflush(stdout);

  std::string items = SurfaceItems(base.surface);
  std::string desc_items = absl::StrCat("entries=", bulk.entries, " hosts=", bulk.hosts);
  std::string diff_items =
      absl::StrCat("widenings=", d.widenings.size(), " narrowings=", d.narrowings.size());
  Composition composed = base.composition;
  std::vector<Row> rows;
  size_t sink = 0;
  rows.push_back(Measure("parse alone (ParseDescriptor, in memory)", desc_items, [&] {
    sink += Must(ParseDescriptor(bulk.text), "parse").capabilities.size();
  }));
  rows.push_back(Measure("resolve: ResolveKits, tiny workload + bulk", items, [&] {
    sink += Resolve(refs, "resolve").surface.runtime.http_allow.size();
  }));
  rows.push_back(Measure("surface alone (ProjectSurface, merged)", items, [&] {
    sink += ProjectSurface(composed.merged).runtime.http_allow.size();
  }));
  rows.push_back(Measure(
      "diff alone (one entry changed)", diff_items,
      [&] { sink += Diff(base.surface, changed.surface).widenings.size(); }, diff_s));
  // Not run again: the sum of the rows above (it would take another ~2 x
  // resolve + diff per sample).
  Row total;
  total.name = "total (derived: 2 x resolve + diff)";
  total.median_ms = 2 * rows[1].median_ms + rows[3].median_ms;
  total.p90_ms = 2 * rows[1].p90_ms + rows[3].p90_ms;
  total.items = diff_items;
  rows.push_back(total);
  std::string over_items = absl::StrCat(over.text.size(), " bytes");
  rows.push_back(Measure("refuse 513 KiB: ParseDescriptor (in memory)", over_items,
                         [&] { sink += ParseDescriptor(over.text).ok() ? 0 : 1; }));
  rows.push_back(Measure("refuse 513 KiB: LoadKitRef (file)", over_items,
                         [&] { sink += LoadKitRef(huge.string()).ok() ? 0 : 1; }));
  rows.push_back(Measure("refuse 513 KiB: ResolveKits, tiny + it", over_items, [&] {
    sink += ResolveKits({tiny.string(), huge.string()}, {}).ok() ? 0 : 1;
  }));
  if (sink == 0) Fail("nothing measured");
  PrintTable("case 2: one descriptor near the 512 KiB budget", rows);
}

int Main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (absl::StartsWith(a, "--budget=")) {
      g_budget_s = std::atof(a.c_str() + 9);
    } else {
      Fail(absl::StrCat("unknown flag ", a, " (only --budget=SECONDS)"));
    }
  }
  const char* tmp = getenv("TMPDIR");
  std::string templ = absl::StrCat(tmp && *tmp ? tmp : "/tmp", "/kit_bench.XXXXXX");
  if (mkdtemp(templ.data()) == nullptr) Fail("mkdtemp failed");
  fs::path dir = templ;
  Clock::time_point start = Clock::now();
  std::printf("kit_bench: %.1f s sampling per row; medians and p90 per operation\n", g_budget_s);
  CaseTenMixins(dir);
  CaseBulk(dir);
  std::printf("\nwall time %.1f s\n", std::chrono::duration<double>(Clock::now() - start).count());
  fs::remove_all(dir);
  return 0;
}

}  // namespace
}  // namespace airlock::kit

int main(int argc, char** argv) { return airlock::kit::Main(argc, argv); }
