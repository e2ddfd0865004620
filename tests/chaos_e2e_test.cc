// Chaos end to end: the real CLI, the real daemons and real guests, while a
// driver thread SIGKILLs one of vmmd, proxyd, secretsd, gitd or policyd at
// a random moment of a create, exec, stop, start or rm of a sandbox (a
// direct-mode workspace, clone mode on a Git repo, or a kit). After every
// kill the daemons are started again (`airlock daemon start`) and nothing
// acknowledged may be lost and nothing may be left behind: every sandbox
// whose create was accepted is listed (running, stopped, or failed with a
// reason); a running guest still reaches an allowed host through proxyd;
// no QEMU, virtiofsd or KVM probe runs without its running sandbox and
// vmmd publishes no port of a sandbox that is gone; a removed
// sandbox leaves no socket dir, jail, disk, port, kit rule or
// `sandbox-NAME` remote. A command the kill broke must fail with the CLI's
// exit code for that command and an error naming what broke.
//
// Seeded: the seed is printed first, AIRLOCK_CHAOS_SEED=N replays the same
// lifecycles, victims and relative moments. AIRLOCK_CHAOS_SECONDS (default
// 120, what the normal run affords; 300 or more for a longer hunt) is when
// no new lifecycle starts. It stops after the first lifecycle
// with a failure unless AIRLOCK_CHAOS_KEEP_GOING=1.
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/proc_probe.h"

namespace airlock {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The daemons a kill hits. apid is left alone: it keeps no sandbox state.
const std::vector<std::string> kVictims = {"vmmd", "proxyd", "secretsd", "gitd", "policyd"};
const std::set<std::string> kDaemons = {"vmmd",    "proxyd", "secretsd",
                                        "gitd",    "policyd", "apid"};

enum class Mode { kDirect, kClone, kKit };
enum class Op { kCreate, kExec, kStop, kStart, kRm };
constexpr Op kOps[] = {Op::kCreate, Op::kExec, Op::kStop, Op::kStart, Op::kRm};

const char* ModeName(Mode m) {
  switch (m) {
    case Mode::kDirect: return "direct";
    case Mode::kClone: return "clone";
    case Mode::kKit: return "kit";
  }
  return "";
}

const char* OpName(Op op) {
  switch (op) {
    case Op::kCreate: return "create";
    case Op::kExec: return "exec";
    case Op::kStop: return "stop";
    case Op::kStart: return "start";
    case Op::kRm: return "rm";
  }
  return "";
}

// FailureExit is the CLI's exit code when `op` cannot be done.
int FailureExit(Op op) { return op == Op::kExec ? 125 : 1; }

// The kit: a workload with a runtime rule, an install and a startup hook, a
// file and a published port.
constexpr char kKit[] = R"(# syntax=docker/sandbox-kit:3
schemaVersion: "3"
kind: workload
displayName: Chaos workload
version: "1.0.0"
provides: [chaos-agent]
capabilities:
  - type: com.docker.sandbox/network-policy@2
    config:
      runtime:
        allow: [allowed.example.test]
  - type: com.docker.sandbox/lifecycle@1
    config:
      install:
        - command: "date +%s%N >> /var/tmp/chaos-install-runs"
      startup:
        - command: [sh, -c, "date +%s%N >> /var/tmp/chaos-startup-runs"]
      files:
        - path: /home/agent/.chaos/config.txt
          content: "chaos=1\n"
  - type: com.docker.sandbox/port@1
    config: {name: web, container: 8123}
  - type: com.docker.sandbox/resources@1
    config: {cpu: 1, memory: 1g}
)";

uint64_t ChaosSeed() {
  uint64_t seed = 0;
  const char* s = getenv("AIRLOCK_CHAOS_SEED");
  if (s != nullptr && absl::SimpleAtoi(s, &seed)) return seed;
  return static_cast<uint64_t>(time(nullptr)) ^ (static_cast<uint64_t>(getpid()) << 32);
}

int ChaosSeconds() {
  int n = 0;
  const char* s = getenv("AIRLOCK_CHAOS_SECONDS");
  return s != nullptr && absl::SimpleAtoi(s, &n) && n >= 0 ? n : 120;
}

// A Kill is one planned SIGKILL: of `daemon`, `fraction` of the way into
// the operation's usual duration.
struct Kill {
  std::string daemon;
  double fraction = 0;
};

// QemuSandbox is the sandbox a QEMU runs ("-name airlock-NAME"); "" for
// the KVM probe, which has no name.
std::string QemuSandbox(const testing::ProcessInfo& p) {
  for (size_t i = 0; i + 1 < p.argv.size(); ++i) {
    if (p.argv[i] == "-name" && absl::StartsWith(p.argv[i + 1], "airlock-")) {
      return p.argv[i + 1].substr(8);
    }
  }
  return "";
}

// VirtiofsdSandbox is the sandbox of a virtiofsd:
// --socket-path=<runtime>/vms/NAME/fsN.sock.
std::string VirtiofsdSandbox(const testing::ProcessInfo& p) {
  for (const auto& a : p.argv) {
    if (!absl::StartsWith(a, "--socket-path=")) continue;
    size_t at = a.find("/vms/");
    if (at == std::string::npos) return "";
    std::string rest = a.substr(at + 5);
    return rest.substr(0, rest.find('/'));
  }
  return "";
}

// FirstLines is the first `n` lines of `text`, for the log.
std::string FirstLines(const std::string& text, size_t n = 3) {
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  if (lines.size() > n) lines.resize(n);
  return absl::StrJoin(lines, " | ");
}

class ChaosE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
    env_["AIRLOCK_LIBEXEC_DIR"] = "";
    run_ = dir_.path() + "/run";
    state_ = dir_.path() + "/state";
    ws_ = dir_.path() + "/ws";
    repo_ = dir_.path() + "/repo";
    kit_ = dir_.path() + "/chaos-kit.yaml";
    ASSERT_EQ(mkdir(ws_.c_str(), 0755), 0);
    std::ofstream(ws_ + "/from-host.txt") << "host data\n";
    // The guest's agent user is uid 1000.
    ASSERT_EQ(RunCommand({"chown", "-R", "1000:1000", ws_}).exit_code, 0);
    ASSERT_EQ(RunCommand({"git", "init", "-q", "-b", "main", repo_}).exit_code, 0);
    auto commit = Git("echo v1 > app.txt && git add . && "
                      "git -c user.name=h -c user.email=h@h commit -qm host-commit");
    ASSERT_EQ(commit.exit_code, 0) << commit.err;
    std::ofstream(kit_) << kKit;
    // An HTTP upstream on the host that the guests reach as
    // allowed.example.test through proxyd.
    upstream_ = testing::StartFixtureServer(
        dir_.path(), "upstream", {"python3", testing::BinaryPath("tests/fixtures/upstream.py")});
    ASSERT_GT(upstream_.port, 0);
    ASSERT_EQ(mkdir(state_.c_str(), 0700), 0);
    std::ofstream(state_ + "/proxyd.conf") << "resolve = allowed.example.test=127.0.0.1\n";
    // A guest that hangs in its boot (seldom, under TCG) fails in 90 s, not
    // the default 180, so that one does not eat the run's time.
    std::ofstream(state_ + "/vmmd.conf") << "boot-timeout = 90\n";
    CommandResult allow = Airlock({"policy", "allow", "network", "allowed.example.test"});
    ASSERT_EQ(allow.exit_code, 0) << allow.err;
  }

  void TearDown() override {
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    if (upstream_.pid > 0) {
      kill(upstream_.pid, SIGKILL);
      AwaitExit(upstream_.pid, std::chrono::seconds(5));
    }
    std::vector<testing::ProcessInfo> left = testing::ProcessesOf(dir_.path());
    std::string names;
    for (const auto& p : left) names += absl::StrCat("\n  ", p.pid, " ", p.CommandLine());
    EXPECT_TRUE(left.empty()) << "processes of this test left running:" << names;
    for (const auto& p : left) kill(p.pid, SIGKILL);
  }

  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args, "", 240);
  }

  CommandResult Git(const std::string& cmd) {
    return RunCommand({"sh", "-c", "cd '" + repo_ + "' && " + cmd},
                      {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir_.path()}});
  }

  std::set<std::string> HostRemotes() {
    std::vector<std::string> lines = absl::StrSplit(Git("git remote").out, '\n', absl::SkipEmpty());
    return std::set<std::string>(lines.begin(), lines.end());
  }

  // Sandboxes is `airlock ls --json` by name. It remembers every host port
  // a sandbox is seen publishing, for the checks after its removal.
  std::map<std::string, nlohmann::json> Sandboxes() {
    std::map<std::string, nlohmann::json> out;
    CommandResult r = Airlock({"ls", "--json"});
    if (r.exit_code != 0) {
      ADD_FAILURE() << "airlock ls --json: exit " << r.exit_code << ": " << r.err;
      return out;
    }
    nlohmann::json all = nlohmann::json::parse(r.out, nullptr, false);
    if (!all.is_array()) {
      ADD_FAILURE() << "ls --json printed no JSON array: " << r.out;
      return out;
    }
    for (const auto& sb : all) {
      std::string name = sb["name"];
      for (const auto& p : sb["ports"]) ports_[name].insert(p["host_port"].get<int>());
      out[name] = sb;
    }
    return out;
  }

  std::string State(const std::string& name) {
    auto all = Sandboxes();
    auto it = all.find(name);
    return it == all.end() ? "absent" : it->second["state"].get<std::string>();
  }

  // RestartDaemons starts what is not running; then all six must answer.
  void RestartDaemons(const std::string& where) {
    CommandResult start = Airlock({"daemon", "start"});
    EXPECT_EQ(start.exit_code, 0) << where << ": airlock daemon start: " << start.err;
    CommandResult st = Airlock({"daemon", "status", "--json"});
    EXPECT_EQ(st.exit_code, 0) << where << ": " << st.out << st.err;
    nlohmann::json all = nlohmann::json::parse(st.out, nullptr, false);
    ASSERT_TRUE(all.is_array()) << st.out;
    EXPECT_EQ(all.size(), 6u);
    for (const auto& d : all) {
      EXPECT_EQ(d["state"], "running") << where << ": " << d["name"] << " after the restart";
    }
  }

  // Settle waits until no sandbox is creating, starting or stopping.
  bool Settle() {
    auto deadline = Clock::now() + std::chrono::seconds(240);
    while (Clock::now() < deadline) {
      bool moving = false;
      for (const auto& [name, sb] : Sandboxes()) {
        std::string s = sb["state"];
        moving = moving || s == "creating" || s == "starting" || s == "stopping";
      }
      if (!moving) return true;
      std::this_thread::sleep_for(milliseconds(250));
    }
    return false;
  }

  // CheckInvariants: nothing accepted is lost, nothing runs or listens for
  // a sandbox that is not running, and a running clone-mode sandbox's
  // commits are reachable from the host.
  void CheckInvariants(const std::string& where) {
    auto sandboxes = Sandboxes();
    for (const auto& name : accepted_) {
      auto it = sandboxes.find(name);
      if (it == sandboxes.end()) {
        ADD_FAILURE() << where << ": sandbox " << name << " was accepted and is lost";
        continue;
      }
      std::string state = it->second["state"];
      EXPECT_TRUE(state == "running" || state == "stopped" || state == "failed")
          << where << ": " << name << " is " << state;
      if (state == "failed") {
        EXPECT_FALSE(it->second["failure"].get<std::string>().empty())
            << where << ": " << name << " failed without a reason";
      }
    }
    std::map<std::string, int> qemus, fsds;
    std::vector<testing::ProcessInfo> procs = testing::ProcessesOf(dir_.path());
    std::set<pid_t> fsd_pids;
    for (const auto& p : procs) {
      if (p.Program() == "virtiofsd") fsd_pids.insert(p.pid);
    }
    for (const auto& p : procs) {
      if (p.pid == upstream_.pid) continue;
      std::string prog = p.Program(), owner;
      if (prog == "qemu-system-x86_64") {
        owner = QemuSandbox(p);
        if (owner == "_snapshot") {
          // The VM vmmd saves a snapshot from: one at a time, a child of a
          // live vmmd (it dies with it).
          pid_t vmmd = testing::DaemonPid(run_, "vmmd");
          bool child = false;
          for (pid_t at = p.ppid; at > 1 && !child;) {
            child = at == vmmd;
            auto parent = std::find_if(procs.begin(), procs.end(),
                                       [&](const testing::ProcessInfo& q) { return q.pid == at; });
            at = parent == procs.end() ? 0 : parent->ppid;
          }
          EXPECT_TRUE(vmmd != 0 && child)
              << where << ": a snapshot's VM runs without its vmmd: pid " << p.pid;
          EXPECT_LE(++qemus[owner], 1) << where << ": more than one snapshot VM";
          continue;
        }
        if (owner.empty()) {
          ADD_FAILURE() << where << ": a QEMU of no sandbox (a KVM probe) runs: pid " << p.pid
                        << " " << p.CommandLine();
          continue;
        }
        if (absl::StartsWith(owner, "_warm-")) {
          // A warm VM (vmmd/warm_pool.h): a sandbox's once claimed (the
          // record names its slot); else the pool's, which only the vmmd
          // running now may have started (a killed one's are ended when
          // it starts again), one ready and one more at most while the
          // pool turns over.
          for (const auto& [name, sb] : sandboxes) {
            if (sb.value("pool_slot", "") == owner) owner = name;
          }
        }
        if (absl::StartsWith(owner, "_warm-")) {
          pid_t vmmd = testing::DaemonPid(run_, "vmmd");
          EXPECT_TRUE(vmmd != 0 && testing::StartTicks(p.pid) >= testing::StartTicks(vmmd))
              << where << ": warm VM " << owner << " (pid " << p.pid
              << ") outlived the vmmd that made it";
          EXPECT_LE(++qemus["_warm"], 2) << where << ": more warm VMs than the pool holds";
          continue;
        }
        ++qemus[owner];
      } else if (prog == "virtiofsd") {
        owner = VirtiofsdSandbox(p);
        // virtiofsd's own sandboxing child is the same server.
        if (!fsd_pids.count(p.ppid)) ++fsds[owner];
      } else if (kDaemons.count(prog) || prog == "airlock") {
        continue;
      } else {
        ADD_FAILURE() << where << ": unexpected process " << p.pid << ": " << p.CommandLine();
        continue;
      }
      auto it = sandboxes.find(owner);
      std::string state = it == sandboxes.end() ? "gone" : it->second["state"].get<std::string>();
      EXPECT_EQ(state, "running") << where << ": " << prog << " (pid " << p.pid
                                  << ") of sandbox " << owner << ", which is " << state;
    }
    std::set<int> published;
    for (const auto& [name, sb] : sandboxes) {
      published.insert(ports_[name].begin(), ports_[name].end());
      if (sb["state"] != "running") continue;
      EXPECT_EQ(qemus[name], 1) << where << ": running sandbox " << name << " has "
                                << qemus[name] << " QEMU processes";
      if (modes_[name] != Mode::kKit) {
        EXPECT_EQ(fsds[name], 1) << where << ": running sandbox " << name << " has "
                                 << fsds[name] << " virtiofsd servers for its one share";
      }
      if (modes_[name] == Mode::kClone) {
        bool remote = false;
        for (int i = 0; i < 20 && !remote; ++i) {
          remote = HostRemotes().count("sandbox-" + name) > 0;
          if (!remote) std::this_thread::sleep_for(milliseconds(250));
        }
        EXPECT_TRUE(remote) << where << ": running clone-mode sandbox " << name
                            << " has no sandbox-" << name << " remote on the host repo";
      }
    }
    for (int port : testing::ListeningTcpPorts(testing::DaemonPid(run_, "vmmd"))) {
      EXPECT_TRUE(published.count(port))
          << where << ": vmmd listens on port " << port << ", which no listed sandbox published";
    }
  }

  // CheckRemoved: a sandbox whose rm returned 0 left nothing.
  void CheckRemoved(const std::string& name, const std::string& where) {
    EXPECT_EQ(Sandboxes().count(name), 0u) << where << ": " << name << " is still listed";
    for (const auto& p : testing::ProcessesOf(dir_.path())) {
      EXPECT_FALSE(QemuSandbox(p) == name || VirtiofsdSandbox(p) == name)
          << where << ": pid " << p.pid << " of the removed " << name << ": " << p.CommandLine();
    }
    struct stat st;
    for (const std::string& path :
         {run_ + "/vms/" + name, run_ + "/jail/" + name, state_ + "/sandboxes/" + name}) {
      EXPECT_NE(lstat(path.c_str(), &st), 0) << where << ": " << path << " is left";
    }
    std::set<int> listening = testing::ListeningTcpPorts(testing::DaemonPid(run_, "vmmd"));
    for (int port : ports_[name]) {
      EXPECT_EQ(listening.count(port), 0u)
          << where << ": port " << port << " of the removed " << name << " is still published";
    }
    if (modes_[name] == Mode::kClone) {
      EXPECT_EQ(HostRemotes().count("sandbox-" + name), 0u)
          << where << ": the host repo keeps the remote sandbox-" << name;
    }
    if (modes_[name] == Mode::kKit) {
      EXPECT_EQ(KitRules(name), 0) << where << ": policyd keeps the kit rules of " << name;
    }
  }

  // KitRules counts the rules policyd holds for sandbox `name`.
  int KitRules(const std::string& name) {
    CommandResult r = Airlock({"policy", "ls", "--sandbox", name, "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    if (!j.is_object()) {
      ADD_FAILURE() << "policy ls --json: " << r.out;
      return -1;
    }
    int n = 0;
    for (const auto& rule : j["rules"]) n += rule["scope"] == name;
    return n;
  }

  // Run runs `args`. With a kill, a driver thread SIGKILLs that daemon
  // (whichever process is it then) kill->fraction of `op`'s usual duration
  // after the command started, or as soon as it ended if sooner.
  CommandResult Run(Op op, const std::vector<std::string>& args, const std::optional<Kill>& kill,
                    std::string* where) {
    auto start = Clock::now();
    auto took = [&] { return std::chrono::duration<double, std::milli>(Clock::now() - start).count(); };
    if (!kill) {
      CommandResult r = Airlock(args);
      double ms = took();
      if (r.exit_code == 0) typical_ms_[op] = 0.7 * typical_ms_[op] + 0.3 * ms;
      Log(absl::StrCat(*where, ": exit ", r.exit_code, " in ", static_cast<int>(ms), " ms"));
      return r;
    }
    auto delay = milliseconds(static_cast<int64_t>(kill->fraction * typical_ms_[op]));
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, mid = false;
    pid_t killed = 0;
    std::thread driver([&] {
      std::unique_lock<std::mutex> lock(mu);
      cv.wait_for(lock, delay, [&] { return done; });
      mid = !done;
      killed = testing::DaemonPid(run_, kill->daemon);
      if (killed > 0) ::kill(killed, SIGKILL);
    });
    CommandResult r = Airlock(args);
    {
      std::lock_guard<std::mutex> lock(mu);
      done = true;
    }
    cv.notify_all();
    driver.join();
    EXPECT_GT(killed, 0) << kill->daemon << " was not running when its kill came";
    if (killed > 0) AwaitExit(killed, std::chrono::seconds(5));
    ++kills_[kill->daemon][op];
    if (mid) ++mid_op_[kill->daemon][op];
    absl::StrAppend(where, " with ", kill->daemon, " killed ", delay.count(), " ms in",
                    mid ? "" : " (after it ended)");
    Log(absl::StrCat(*where, ": exit ", r.exit_code, " in ", static_cast<int>(took()), " ms"));
    return r;
  }

  // AfterKill restarts the daemons, waits for the sandboxes to settle and
  // checks the invariants.
  void AfterKill(const Kill& kill, const std::string& where) {
    if (kill.daemon == "vmmd") {
      // A KVM probe (when one ran) dies with vmmd.
      bool probe = true;
      for (int i = 0; i < 150 && probe; ++i) {
        probe = false;
        for (const auto& p : testing::ProcessesOf(state_ + "/kvm-probe")) {
          probe = probe || p.Program() == "qemu-system-x86_64";
        }
        if (probe) std::this_thread::sleep_for(milliseconds(20));
      }
      EXPECT_FALSE(probe) << where << ": the KVM probe outlived vmmd";
      // So does the VM of a snapshot being made.
      bool snapshot_vm = true;
      for (int i = 0; i < 150 && snapshot_vm; ++i) {
        snapshot_vm = false;
        for (const auto& p : testing::ProcessesOf(state_ + "/snapshots/")) {
          snapshot_vm = snapshot_vm || p.Program() == "qemu-system-x86_64";
        }
        if (snapshot_vm) std::this_thread::sleep_for(milliseconds(20));
      }
      EXPECT_FALSE(snapshot_vm) << where << ": a snapshot's VM outlived vmmd";
    }
    RestartDaemons(where);
    EXPECT_TRUE(Settle()) << where << ": sandboxes still changing 240 s after the restart";
    CheckInvariants(where);
    Log(absl::StrCat(where, ": restarted, settled, checked"));
  }

  // Judge checks what a command did: with no kill it succeeds exactly;
  // a command a kill broke fails with the CLI's exit code for it and an
  // error line that names the daemon or the lost connection to it.
  void Judge(Op op, const std::optional<Kill>& kill, const CommandResult& r,
             const std::string& expected_out, const std::string& where) {
    if (r.exit_code == 0) {
      EXPECT_EQ(r.out, expected_out) << where;
      return;
    }
    if (!kill) {
      ADD_FAILURE() << where << ": exit " << r.exit_code << " with no kill: " << r.out << r.err;
      return;
    }
    Log(absl::StrCat(where, ": ", FirstLines(r.err)));
    EXPECT_EQ(r.exit_code, FailureExit(op)) << where << ": " << r.err;
    bool named = false;
    for (absl::string_view line : absl::StrSplit(r.err, '\n')) {
      if (!absl::StartsWith(line, "airlock: ")) continue;
      named = named || absl::StrContains(line, kill->daemon) ||
              (kill->daemon == "vmmd" && (absl::StrContains(line, "Socket closed") ||
                                          absl::StrContains(line, "Connection reset")));
    }
    EXPECT_TRUE(named) << where << ": no \"airlock: \" error line names " << kill->daemon
                       << " or the lost connection: " << r.err;
    for (const char* crash : {"terminate called", "Segmentation fault", "core dumped"}) {
      EXPECT_FALSE(absl::StrContains(r.err, crash)) << where << ": " << r.err;
    }
  }

  std::vector<std::string> CreateArgs(const std::string& name, Mode mode) {
    switch (mode) {
      case Mode::kDirect: return {"create", "--name", name, "-m", "1g", "shell", ws_};
      case Mode::kClone: return {"create", "--clone", "--name", name, "-m", "1g", "shell", repo_};
      case Mode::kKit: return {"create", "--name", name, "--kit", kit_, "shell"};
    }
    return {};
  }

  // The exec step: it reads what the mode put in the guest, leaves a mark
  // on the guest's disk (synced, so a killed VM keeps it) and takes a
  // second, so that a kill can land inside it.
  std::vector<std::string> ExecArgs(const std::string& name, Mode mode, int iter) {
    std::string first;
    switch (mode) {
      case Mode::kDirect: first = "cat from-host.txt"; break;
      case Mode::kClone:
        first = absl::StrCat("git log --reverse --format=%s | head -1 && ",
                             "git commit --allow-empty -qm chaos-", iter);
        break;
      case Mode::kKit: first = "cat /home/agent/.chaos/config.txt"; break;
    }
    return {"exec", name, "--", "sh", "-c",
            absl::StrCat(first, " && echo ", iter,
                         " > /home/agent/chaos-mark && sync && echo begin && sleep 1 && echo end")};
  }

  std::string ExecOut(Mode mode) {
    switch (mode) {
      case Mode::kDirect: return "host data\nbegin\nend\n";
      case Mode::kClone: return "host-commit\nbegin\nend\n";
      case Mode::kKit: return "chaos=1\nbegin\nend\n";
    }
    return "";
  }

  // ExpectEgress: the guest reaches the allowed upstream through proxyd
  // (whichever daemons were killed and started again before).
  void ExpectEgress(const std::string& name, const std::string& path, const std::string& where) {
    std::string url = absl::StrCat("http://allowed.example.test:", upstream_.port, path);
    CommandResult r = Airlock({"exec", name, "--", "curl", "-sS", "-m", "20", url});
    EXPECT_EQ(r.out, absl::StrCat("upstream saw GET ", path, " host=allowed.example.test:",
                                  upstream_.port, " body=0 auth=-\n"))
        << where << ": egress from " << name << ": exit " << r.exit_code << ": " << r.err;
  }

  void Lifecycle(int iter, Mode mode, const std::map<Op, Kill>& plan);

  // Log prints one line, stamped with the seconds since the test began.
  void Log(const std::string& line) {
    char stamp[32];
    snprintf(stamp, sizeof(stamp), "chaos [%6.1f s] ",
             std::chrono::duration<double>(Clock::now() - begin_).count());
    std::cout << stamp << line << std::endl;
  }

  Clock::time_point begin_ = Clock::now();
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
  std::string run_, state_, ws_, repo_, kit_;
  testing::FixtureServer upstream_;
  // Sandboxes whose create was accepted and that no rm has removed.
  std::set<std::string> accepted_;
  std::map<std::string, Mode> modes_;
  std::map<std::string, std::set<int>> ports_;
  // How long each operation takes undisturbed (ms), so kills land inside.
  std::map<Op, double> typical_ms_ = {{Op::kCreate, 9000}, {Op::kExec, 1500},
                                      {Op::kStop, 700},    {Op::kStart, 8000},
                                      {Op::kRm, 200}};
  std::map<std::string, std::map<Op, int>> kills_, mid_op_;
};

void ChaosE2ETest::Lifecycle(int iter, Mode mode, const std::map<Op, Kill>& plan) {
  const std::string name = absl::StrCat(ModeName(mode), "-", iter);
  modes_[name] = mode;
  auto kill_for = [&](Op op) -> std::optional<Kill> {
    auto it = plan.find(op);
    return it == plan.end() ? std::nullopt : std::optional<Kill>(it->second);
  };
  auto label = [&](Op op) {
    return absl::StrCat("iteration ", iter, ": ", OpName(op), " of ", ModeName(mode),
                        " sandbox ", name);
  };

  // create: a sandbox that was accepted runs once it is started (again);
  // a request that was lost is made again.
  {
    std::string where = label(Op::kCreate);
    auto kill = kill_for(Op::kCreate);
    CommandResult r = Run(Op::kCreate, CreateArgs(name, mode), kill, &where);
    Judge(Op::kCreate, kill, r, name + "\n", where);
    if (r.exit_code == 0 ||
        absl::StrContains(r.err, "lost contact with vmmd while waiting for " + name) ||
        absl::StrContains(r.err, "sandbox " + name + " did not start")) {
      accepted_.insert(name);
    }
    if (kill) AfterKill(*kill, where);
    std::string state = State(name);
    if (state == "absent") {
      CommandResult again = Airlock(CreateArgs(name, mode));
      ASSERT_EQ(again.exit_code, 0) << where << ": create again: " << again.err;
    } else if (state != "running") {
      CommandResult again = Airlock({"start", name});
      ASSERT_EQ(again.exit_code, 0) << where << ": start after the kill: " << again.err;
    }
    accepted_.insert(name);
    if (mode == Mode::kKit) {
      EXPECT_GT(KitRules(name), 0) << where << ": the kit's rules";
    }
  }

  // exec: a daemon's death never stops a guest; the exec works again.
  {
    std::string where = label(Op::kExec);
    auto kill = kill_for(Op::kExec);
    CommandResult r = Run(Op::kExec, ExecArgs(name, mode, iter), kill, &where);
    Judge(Op::kExec, kill, r, ExecOut(mode), where);
    if (kill) AfterKill(*kill, where);
    EXPECT_EQ(State(name), "running") << where;
    if (r.exit_code != 0) {
      CommandResult again = Airlock(ExecArgs(name, mode, iter));
      ASSERT_EQ(again.exit_code, 0) << where << ": exec again: " << again.err;
      EXPECT_EQ(again.out, ExecOut(mode)) << where;
    }
    if (mode == Mode::kClone) {
      CommandResult fetch = Git(absl::StrCat("git fetch -q sandbox-", name,
                                             " && git log -1 --format=%s sandbox-", name,
                                             "/main"));
      EXPECT_EQ(fetch.out, absl::StrCat("chaos-", iter, "\n")) << where << ": " << fetch.err;
    }
    ExpectEgress(name, absl::StrCat("/exec-", iter), where);
  }

  // stop: stopped, or still running when the request never got through.
  {
    std::string where = label(Op::kStop);
    auto kill = kill_for(Op::kStop);
    CommandResult r = Run(Op::kStop, {"stop", name}, kill, &where);
    Judge(Op::kStop, kill, r, name + "\n", where);
    if (kill) AfterKill(*kill, where);
    std::string state = State(name);
    if (state == "running") {
      CommandResult again = Airlock({"stop", name});
      ASSERT_EQ(again.exit_code, 0) << where << ": stop again: " << again.err;
      state = State(name);
    }
    EXPECT_TRUE(state == "stopped" || (kill && state == "failed")) << where << ": " << state;
  }

  // start: the disk, and the mark the exec left on it, survive.
  {
    std::string where = label(Op::kStart);
    auto kill = kill_for(Op::kStart);
    CommandResult r = Run(Op::kStart, {"start", name}, kill, &where);
    Judge(Op::kStart, kill, r, name + "\n", where);
    if (kill) AfterKill(*kill, where);
    if (State(name) != "running") {
      CommandResult again = Airlock({"start", name});
      ASSERT_EQ(again.exit_code, 0) << where << ": start again: " << again.err;
    }
    CommandResult mark = Airlock({"exec", name, "--", "cat", "/home/agent/chaos-mark"});
    EXPECT_EQ(mark.out, absl::StrCat(iter, "\n")) << where << ": " << mark.err;
    ExpectEgress(name, absl::StrCat("/start-", iter), where);
  }

  // rm: gone, and nothing of it left.
  {
    std::string where = label(Op::kRm);
    auto kill = kill_for(Op::kRm);
    Sandboxes();  // its ports, for CheckRemoved
    CommandResult r = Run(Op::kRm, {"rm", "-f", name}, kill, &where);
    Judge(Op::kRm, kill, r, name + "\n", where);
    // Asked to go: it may be gone even when the kill broke the answer.
    accepted_.erase(name);
    if (kill) AfterKill(*kill, where);
    if (State(name) != "absent") {
      CommandResult again = Airlock({"rm", "-f", name});
      ASSERT_EQ(again.exit_code, 0) << where << ": rm again: " << again.err;
    }
    CheckRemoved(name, where);
  }
}

TEST_F(ChaosE2ETest, KilledDaemonsLoseNothingAndLeaveNothingBehind) {
  const uint64_t seed = ChaosSeed();
  const int budget_s = ChaosSeconds();
  // AIRLOCK_CHAOS_KEEP_GOING=1 runs on after a failing lifecycle (to see
  // every failure of a run, not only the first).
  const char* keep = getenv("AIRLOCK_CHAOS_KEEP_GOING");
  const bool keep_going = keep != nullptr && std::string(keep) == "1";
  std::string replay = absl::StrCat(
      "bazel test //tests:chaos_e2e_test --test_env=AIRLOCK_CHAOS_SEED=", seed,
      " --test_env=AIRLOCK_CHAOS_SECONDS=", budget_s,
      " --test_env=AIRLOCK_IMAGE_DIR=$AIRLOCK_IMAGE_DIR --test_env=HOME=$HOME");
  std::cout << "chaos: seed " << seed << "; replay with: " << replay << std::endl;
  RecordProperty("chaos_seed", std::to_string(seed));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<size_t> victim(0, kVictims.size() - 1);
  std::uniform_int_distribution<size_t> any_op(0, std::size(kOps) - 1);

  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  auto begin = Clock::now();
  int lifecycles = 0;
  std::map<Mode, int> per_mode;
  while (std::chrono::duration<double>(Clock::now() - begin).count() < budget_s) {
    Mode mode = static_cast<Mode>(lifecycles % 3);
    // Each operation is hit with probability 0.4; every lifecycle at least once.
    std::map<Op, Kill> plan;
    for (Op op : kOps) {
      if (unit(rng) < 0.4) plan[op] = {kVictims[victim(rng)], unit(rng)};
    }
    if (plan.empty()) {
      Op op = kOps[any_op(rng)];
      plan[op] = {kVictims[victim(rng)], unit(rng)};
    }
    std::string line = absl::StrCat("lifecycle ", lifecycles, " (", ModeName(mode), "):");
    for (const auto& [op, k] : plan) {
      absl::StrAppend(&line, " ", OpName(op), "/", k.daemon, "@",
                      static_cast<int>(k.fraction * 100), "%");
    }
    Log(line);
    Lifecycle(lifecycles, mode, plan);
    ++lifecycles;
    ++per_mode[mode];
    if (HasFailure() && !keep_going) {
      Log("stopping after the first lifecycle with a failure; replay with: " + replay);
      break;
    }
  }
  double elapsed = std::chrono::duration<double>(Clock::now() - begin).count();

  int total = 0, total_mid = 0;
  std::ostringstream table;
  table << "kills      create   exec   stop  start     rm  total (mid-operation)\n";
  for (const auto& d : kVictims) {
    int row = 0, row_mid = 0;
    table << d << std::string(9 - d.size(), ' ');
    for (Op op : kOps) {
      char cell[16];
      snprintf(cell, sizeof(cell), "%7d", kills_[d][op]);
      table << cell;
      row += kills_[d][op];
      row_mid += mid_op_[d][op];
    }
    table << "  " << row << " (" << row_mid << ")\n";
    total += row;
    total_mid += row_mid;
  }
  std::cout << "chaos: seed " << seed << ": " << lifecycles << " lifecycles (direct "
            << per_mode[Mode::kDirect] << ", clone " << per_mode[Mode::kClone] << ", kit "
            << per_mode[Mode::kKit] << ") in " << static_cast<int>(elapsed) << " s; " << total
            << " kills, " << total_mid << " while the operation ran\n"
            << table.str() << std::flush;
  EXPECT_GT(lifecycles, 0);

  // The end: everything goes, and nothing is left.
  CommandResult rm = Airlock({"rm", "-f", "--all"});
  EXPECT_EQ(rm.exit_code, 0) << rm.err;
  accepted_.clear();
  EXPECT_TRUE(Sandboxes().empty());
  CheckInvariants("after rm -f --all");
}

}  // namespace
}  // namespace airlock
