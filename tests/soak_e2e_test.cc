// Soak: many create/exec/rm cycles (AIRLOCK_SOAK_CYCLES, default 100) of a
// direct-mode sandbox with a published port, against one set of the real
// daemons and real guests. Every daemon's open descriptors, threads and
// resident memory are sampled after a warm-up cycle and at the end (and
// every tenth cycle, for the trend) and printed as a table; descriptors
// must be back at the baseline, threads within gRPC's idle pollers of it,
// and resident memory within a bound and no longer growing in the second
// half; `airlock daemon status --json` must show all six daemons running,
// with the pids they had at the start, after every cycle.
//
// Tagged manual (100 TCG boots take 9 to 15 minutes): run it with
// `bazel test //tests:soak_e2e_test`.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

using Clock = std::chrono::steady_clock;

const std::vector<std::string> kDaemons = {"policyd", "secretsd", "gitd",
                                           "proxyd",  "vmmd",     "apid"};

int SoakCycles() {
  int n = 0;
  const char* s = getenv("AIRLOCK_SOAK_CYCLES");
  return s != nullptr && absl::SimpleAtoi(s, &n) && n > 0 ? n : 100;
}

// How far a daemon may end above its baseline.
//
// Descriptors: not at all. Every cycle's sockets, files and channels are
// the cycle's own; a daemon holds the same long-lived ones (its listener,
// its state file, its peers' channels) before and after. Descriptors and
// threads are sampled when the daemons are idle, as the least of several
// samples a second apart, so one on its way out does not count.
constexpr int kFdSlack = 0;
// Threads: one. gRPC's synchronous server keeps between min_pollers (1)
// and max_pollers (2) idle threads polling its one completion queue
// (grpcpp/server_builder.h SyncServerSettings); which of the two a daemon
// is left with depends on how many calls overlapped last, and a poller
// beyond two exits within cq_timeout_msec (10 s). More than one extra is
// a thread that never ends.
constexpr int kThreadSlack = 1;
// Resident memory: 8 MiB over the run, for what fills once and then stays:
// SQLite's page cache (up to 2 MiB per state file at the default
// cache_size) and its WAL index as the state files churn, gRPC's arenas
// and the heap glibc keeps for reuse after a peak. Measured here over 100
// cycles: at most 2.4 MiB (vmmd), 0.6 MiB for the others.
constexpr int64_t kRssSlackKib = 8 * 1024;
// ...and from the middle of the run to its end, when those have filled, at
// most 20 KiB a cycle (measured: vmmd 5 to 10 KiB, the others at most
// 2 KiB): a leak that keeps going (a console log, a copy of each request,
// a record per sandbox) fails here long before it reaches the total bound.
constexpr int64_t kRssSlopeKibPerCycle = 20;

class SoakE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
    env_["AIRLOCK_LIBEXEC_DIR"] = "";
    run_ = dir_.path() + "/run";
    ws_ = dir_.path() + "/ws";
    ASSERT_EQ(mkdir(ws_.c_str(), 0755), 0);
    std::ofstream(ws_ + "/from-host.txt") << "host data\n";
    ASSERT_EQ(RunCommand({"chown", "-R", "1000:1000", ws_}).exit_code, 0);
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    std::vector<testing::ProcessInfo> left = testing::ProcessesOf(dir_.path());
    EXPECT_TRUE(left.empty()) << left.size() << " processes of this test left running";
    for (const auto& p : left) kill(p.pid, SIGKILL);
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args, "", 300);
  }

  // Pids is what `airlock daemon status --json` says: every daemon's pid,
  // with a failure for one that is not running.
  std::map<std::string, int64_t> Pids(const std::string& where) {
    std::map<std::string, int64_t> out;
    CommandResult st = Airlock({"daemon", "status", "--json"});
    EXPECT_EQ(st.exit_code, 0) << where << ": " << st.out << st.err;
    nlohmann::json all = nlohmann::json::parse(st.out, nullptr, false);
    if (!all.is_array()) {
      ADD_FAILURE() << where << ": daemon status --json: " << st.out;
      return out;
    }
    for (const auto& d : all) {
      EXPECT_EQ(d["state"], "running") << where << ": " << d["name"];
      out[d["name"].get<std::string>()] = d["pid"].get<int64_t>();
    }
    EXPECT_EQ(out.size(), kDaemons.size()) << where << ": " << st.out;
    return out;
  }

  // Sample measures every daemon at rest: descriptors and threads as the
  // least of five samples a second apart, resident memory from the last.
  std::map<std::string, testing::ProcUsage> Sample() {
    std::map<std::string, testing::ProcUsage> out;
    for (int i = 0; i < 5; ++i) {
      if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
      for (const auto& d : kDaemons) {
        testing::ProcUsage u = testing::SampleUsage(testing::DaemonPid(run_, d));
        auto it = out.find(d);
        if (it == out.end()) {
          out[d] = u;
          continue;
        }
        it->second.fds = std::min(it->second.fds, u.fds);
        it->second.threads = std::min(it->second.threads, u.threads);
        it->second.rss_kib = u.rss_kib;
      }
    }
    return out;
  }

  // Cycle creates, uses and removes one sandbox; false when it failed.
  bool Cycle(int n) {
    const std::string name = absl::StrCat("soak-", n);
    const std::string where = absl::StrCat("cycle ", n);
    CommandResult create = Airlock({"create", "--name", name, "-m", "1g", "--publish=8000", "shell", ws_});
    EXPECT_EQ(create.exit_code, 0) << where << ": create: " << create.err;
    EXPECT_EQ(create.out, name + "\n") << where;
    CommandResult exec = Airlock({"exec", name, "--", "sh", "-c",
                                  absl::StrCat("cat from-host.txt; echo cycle ", n)});
    EXPECT_EQ(exec.exit_code, 0) << where << ": exec: " << exec.err;
    EXPECT_EQ(exec.out, absl::StrCat("host data\ncycle ", n, "\n")) << where;
    CommandResult rm = Airlock({"rm", "-f", name});
    EXPECT_EQ(rm.exit_code, 0) << where << ": rm: " << rm.err;
    EXPECT_TRUE(testing::ProcessesOf(run_ + "/vms/" + name + "/").empty())
        << where << ": processes of the removed sandbox";
    return create.exit_code == 0 && exec.exit_code == 0 && rm.exit_code == 0;
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
  std::string run_, ws_;
};

// Row is one line of the table: per daemon its fds, threads and VmRSS.
std::string Row(const std::string& label, const std::map<std::string, testing::ProcUsage>& s) {
  std::string out = label;
  out.resize(12, ' ');
  for (const auto& d : kDaemons) {
    const testing::ProcUsage& u = s.at(d);
    char cell[48];
    snprintf(cell, sizeof(cell), " %4d %3d %8lld", u.fds, u.threads,
             static_cast<long long>(u.rss_kib));
    out += cell;
  }
  return out;
}

TEST_F(SoakE2ETest, CyclesLeaveNoDescriptorsThreadsOrMemoryBehind) {
  const int cycles = SoakCycles();
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // The warm-up: the first boot probes the accelerator, imports the
  // templates and builds the boot disk, and every lazy channel opens.
  ASSERT_TRUE(Cycle(0));
  const std::map<std::string, int64_t> pids = Pids("after the warm-up");
  const std::map<std::string, testing::ProcUsage> baseline = Sample();
  std::vector<std::string> trend = {Row("baseline", baseline)};

  auto begin = Clock::now();
  int done = 0;
  const int middle = cycles >= 20 ? cycles / 2 : 0;
  std::map<std::string, testing::ProcUsage> at_middle;
  for (int n = 1; n <= cycles; ++n) {
    bool ok = Cycle(n);
    EXPECT_EQ(Pids(absl::StrCat("after cycle ", n)), pids) << "a daemon restarted in cycle " << n;
    ++done;
    if (!ok || HasFatalFailure()) break;
    if ((n % 10 == 0 || n == middle) && n < cycles) {
      std::map<std::string, testing::ProcUsage> sample = Sample();
      if (n == middle) at_middle = sample;
      trend.push_back(Row(absl::StrCat("cycle ", n), sample));
    }
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();
  const std::map<std::string, testing::ProcUsage> end = Sample();
  trend.push_back(Row(absl::StrCat("end (", done, ")"), end));

  std::string names = "            ", columns = "            ";
  for (const auto& d : kDaemons) {
    char cell[48];
    snprintf(cell, sizeof(cell), " %-17s", d.c_str());
    names += cell;
    columns += "  fds thr  RSS KiB";
  }
  std::cout << "soak: " << done << " cycles in " << static_cast<int>(elapsed) << " s ("
            << static_cast<int>(elapsed / std::max(done, 1) * 10) / 10.0
            << " s each); per daemon: open fds, threads, VmRSS\n"
            << names << "\n"
            << columns << "\n";
  for (const auto& line : trend) std::cout << line << "\n";
  std::cout << "daemon     fds base->end  threads base->end  RSS KiB base->end (bound)"
               "  KiB/cycle from the middle\n";
  for (const auto& d : kDaemons) {
    const testing::ProcUsage& b = baseline.at(d);
    const testing::ProcUsage& e = end.at(d);
    int64_t bound = b.rss_kib + kRssSlackKib;
    double slope = 0;
    if (!at_middle.empty() && done > middle) {
      slope = static_cast<double>(e.rss_kib - at_middle.at(d).rss_kib) / (done - middle);
    }
    char line[200];
    snprintf(line, sizeof(line), "%-9s %5d -> %-5d %9d -> %-5d %10lld -> %-8lld (%lld)  %6.1f\n",
             d.c_str(), b.fds, e.fds, b.threads, e.threads, static_cast<long long>(b.rss_kib),
             static_cast<long long>(e.rss_kib), static_cast<long long>(bound), slope);
    std::cout << line;
    EXPECT_GT(b.fds, 0) << d;
    EXPECT_LE(e.fds, b.fds + kFdSlack) << d << " holds more descriptors than at the baseline";
    EXPECT_LE(e.threads, b.threads + kThreadSlack) << d << " runs more threads than at the baseline";
    EXPECT_LE(e.rss_kib, bound) << d << "'s resident memory grew past the bound";
    EXPECT_LE(slope, kRssSlopeKibPerCycle) << d << "'s resident memory keeps growing";
  }
  std::cout << std::flush;
  EXPECT_EQ(done, cycles);
}

}  // namespace
}  // namespace airlock
