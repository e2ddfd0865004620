// End-to-end tests of the jails of QEMU and virtiofsd, checked from the
// host on real sandboxes: who they run as, what they can see, their
// cgroup limits, a guest past its memory, and what rm leaves.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace airlock {
namespace {

std::string StatusField(pid_t pid, const std::string& key) {
  std::string status = ReadFileToString(absl::StrCat("/proc/", pid, "/status"));
  size_t at = status.find("\n" + key + ":");
  if (at == std::string::npos) return "";
  size_t start = status.find_first_not_of(" \t", at + key.size() + 2);
  return status.substr(start, status.find('\n', start) - start);
}

std::string Link(const std::string& path) {
  char buf[256];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n > 0 ? std::string(buf, n) : "";
}

std::set<std::string> Entries(const std::string& dir) {
  std::set<std::string> out;
  for (absl::string_view e : absl::StrSplit(RunCommand({"ls", "-A", dir}).out, '\n', absl::SkipEmpty())) {
    out.insert(std::string(e));
  }
  return out;
}

// CgroupDir is the directory of `pid`'s cgroup for `controller` on the
// host (its v1 hierarchy on hybrid hosts, else the unified one).
std::string CgroupDir(pid_t pid, const std::string& controller) {
  std::string v2;
  for (absl::string_view line :
       absl::StrSplit(ReadFileToString(absl::StrCat("/proc/", pid, "/cgroup")), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (f.size() != 3) continue;
    for (absl::string_view c : absl::StrSplit(f[1], ',')) {
      if (c == controller) return "/sys/fs/cgroup/" + f[1] + f[2];
    }
    if (f[1].empty()) v2 = f[2];
  }
  return access(("/sys/fs/cgroup" + v2 + "/memory.max").c_str(), F_OK) == 0
             ? "/sys/fs/cgroup" + v2
             : "/sys/fs/cgroup/unified" + v2;
}

std::string MemoryCgroup(pid_t pid) { return CgroupDir(pid, "memory"); }

uint64_t Number(const std::string& path) {
  uint64_t v = 0;
  EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(ReadFileToString(path)), &v)) << path;
  return v;
}

uint64_t OomKills(const std::string& cg) {
  for (const char* file : {"/memory.oom_control", "/memory.events"}) {
    for (absl::string_view line : absl::StrSplit(ReadFileToString(cg + file), '\n')) {
      uint64_t v = 0;
      if (absl::ConsumePrefix(&line, "oom_kill ") && absl::SimpleAtoi(line, &v)) return v;
    }
  }
  return 0;
}

class JailE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
    for (const auto& [k, v] : env_) setenv(k.c_str(), v.c_str(), 1);
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
    EXPECT_TRUE(testing::ProcessesNamed(dir_.path()).empty()) << "processes of this test left running";
    for (pid_t p : testing::ProcessesNamed(dir_.path())) kill(p, SIGKILL);
  }
  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args, "");
  }
  nlohmann::json Sandbox(const std::string& name) {
    for (const auto& sb : nlohmann::json::parse(Airlock({"ls", "--json"}).out)) {
      if (sb["name"] == name) return sb;
    }
    return nullptr;
  }
  std::vector<pid_t> Virtiofsds(const std::string& name) {
    return testing::ProcessesNamed(absl::StrCat("--socket-path=", dir_.path(), "/run/vms/", name, "/fs"));
  }

  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(JailE2ETest, QemuAndVirtiofsdRunUnprivilegedAndSeeOnlyTheirOwnFiles) {
  std::string ws = dir_.path() + "/ws";
  ASSERT_EQ(mkdir(ws.c_str(), 0755), 0);
  std::ofstream(ws + "/host.txt") << "from host\n";
  // The share's owner: the guest's user acts as this uid on the host.
  ASSERT_EQ(RunCommand({"chown", "-R", "1000:1000", ws}).exit_code, 0);
  // A root-owned tree shared writable: host root is never the guest's.
  std::string rootws = dir_.path() + "/rootws";
  ASSERT_EQ(mkdir(rootws.c_str(), 0755), 0);
  auto a = Airlock({"run", "--name", "ja", "-m", "1g", "shell", ws, rootws, "--", "sh", "-c",
                    "echo agent > by-agent.txt; sudo sh -c 'echo root > by-root.txt'; "
                    "touch " + rootws + "/agent-file 2>&1; "
                    "sudo sh -c 'cp /bin/true " + rootws + "/suid && chmod 4755 " + rootws +
                    "/suid' 2>&1; true"});
  ASSERT_EQ(a.exit_code, 0) << a.err;
  EXPECT_NE(a.out.find("Permission denied"), std::string::npos)
      << "the guest user is not the owner of a root-owned tree: " << a.out;
  ASSERT_EQ(Airlock({"create", "--name", "jb", "-m", "1g", "shell"}).exit_code, 0);
  nlohmann::json ja = Sandbox("ja"), jb = Sandbox("jb");
  pid_t pa = ja["pid"].get<pid_t>(), pb = jb["pid"].get<pid_t>();
  ASSERT_GT(pa, 0);
  ASSERT_GT(pb, 0);
  uint32_t ua = ja["jail_uid"].get<uint32_t>(), ub = jb["jail_uid"].get<uint32_t>();

  // Who QEMU is: a uid of its own (not root, not the user, not the other
  // sandbox's), nothing more.
  EXPECT_NE(ua, 0u);
  EXPECT_NE(ua, getuid());
  EXPECT_NE(ua, 1000u);
  EXPECT_NE(ua, ub) << "two sandboxes never share a uid";
  EXPECT_GE(ub > ua ? ub - ua : ua - ub, 65536u) << "each sandbox owns a block of ids";
  EXPECT_EQ(StatusField(pa, "Uid"), absl::StrCat(ua, "\t", ua, "\t", ua, "\t", ua));
  EXPECT_EQ(StatusField(pa, "Gid"), absl::StrCat(ua, "\t", ua, "\t", ua, "\t", ua));
  EXPECT_EQ(StatusField(pa, "Groups"), "");
  EXPECT_EQ(StatusField(pa, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(pa, "CapPrm"), "0000000000000000");
  EXPECT_EQ(StatusField(pa, "CapBnd"), "0000000000000000");
  EXPECT_EQ(StatusField(pa, "NoNewPrivs"), "1");
  EXPECT_EQ(StatusField(pa, "Seccomp"), "2") << "QEMU's own -sandbox filter stays on";
  EXPECT_EQ(StatusField(pa, "NSpid"), absl::StrCat(pa, "\t1")) << "pid 1 of its own namespace";
  for (const char* ns : {"mnt", "pid", "net", "ipc", "uts", "cgroup"}) {
    EXPECT_NE(Link(absl::StrCat("/proc/", pa, "/ns/", ns)), Link(absl::StrCat("/proc/self/ns/", ns)))
        << ns;
  }
  EXPECT_NE(Link(absl::StrCat("/proc/", pa, "/ns/mnt")), Link(absl::StrCat("/proc/", pb, "/ns/mnt")));

  // What QEMU sees: its own files and nothing of the host's or jb's.
  std::string root = absl::StrCat("/proc/", pa, "/root");
  for (const char* absent : {"/home", "/root", "/etc/shadow", "/etc/passwd", "/var", "/boot"}) {
    EXPECT_NE(access((root + absent).c_str(), F_OK), 0) << absent << " is visible to QEMU";
  }
  EXPECT_EQ(Entries(root + "/etc"), (std::set<std::string>{"ld.so.cache"}));
  EXPECT_EQ(Entries(root + "/vm"), (std::set<std::string>{"initrd", "kernel"}));
  EXPECT_EQ(Entries(root + dir_.path() + "/state/sandboxes/ja"),
            (std::set<std::string>{"console.log", "disk.qcow2"}));
  EXPECT_EQ(Entries(root + dir_.path() + "/state/sandboxes"), (std::set<std::string>{"ja"}))
      << "another sandbox's disk is not in the jail";
  EXPECT_EQ(Entries(root + dir_.path() + "/run/vms"), (std::set<std::string>{"ja"}));
  EXPECT_NE(access((root + ws).c_str(), F_OK), 0) << "the workspace is virtiofsd's, not QEMU's";
  std::set<std::string> devices = Entries(root + "/dev");
  devices.erase("kvm");
  EXPECT_EQ(devices, (std::set<std::string>{"full", "null", "random", "urandom", "zero"}));
  struct stat st;
  if (stat((root + "/dev/kvm").c_str(), &st) == 0) {
    EXPECT_EQ(st.st_uid, ua);
    EXPECT_EQ(st.st_mode & 0777, 0600u) << "/dev/kvm is the jail uid's alone";
  }
  // One sandbox's sockets are closed to the other's uid.
  ASSERT_EQ(stat((dir_.path() + "/run/vms/ja").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ua);
  EXPECT_EQ(st.st_mode & 0777, 0700u);

  // Its cgroup and limits (guest 1 GiB plus the bounded overhead).
  std::string cg = MemoryCgroup(pa);
  EXPECT_NE(cg.find("/airlock-"), std::string::npos) << cg;
  uint64_t limit = ja["host_memory_limit_bytes"].get<uint64_t>();
  EXPECT_EQ(limit, ja["accelerator"] == "kvm" ? (1024ull + 384) << 20 : (1024ull + 256 + 384) << 20);
  uint64_t file_limit = access((cg + "/memory.limit_in_bytes").c_str(), F_OK) == 0
                            ? Number(cg + "/memory.limit_in_bytes")
                            : Number(cg + "/memory.max");
  EXPECT_EQ(file_limit, limit);
  std::string pids = CgroupDir(pa, "pids"), cpu = CgroupDir(pa, "cpu");
  EXPECT_EQ(absl::StripAsciiWhitespace(ReadFileToString(pids + "/pids.max")), "512") << pids;
  std::string quota = access((cpu + "/cpu.max").c_str(), F_OK) == 0
                          ? ReadFileToString(cpu + "/cpu.max")
                          : ReadFileToString(cpu + "/cpu.cfs_quota_us");
  EXPECT_EQ(std::string(absl::StripAsciiWhitespace(quota)).substr(0, absl::StrCat(ja["cpus"].get<int>() * 100000).size()),
            absl::StrCat(ja["cpus"].get<int>() * 100000)) << cpu << ": its vCPUs' worth of CPU time";
  EXPECT_GT(ja["host_memory_bytes"].get<uint64_t>(), 0u);
  EXPECT_LT(ja["host_memory_bytes"].get<uint64_t>(), limit);

  // virtiofsd: the sandbox's base id on the host, in a user namespace that
  // maps the guest user to the share's owner and never names host root.
  std::vector<pid_t> fsd = Virtiofsds("ja");
  ASSERT_FALSE(fsd.empty());
  for (pid_t p : fsd) {
    EXPECT_EQ(StatusField(p, "Uid"), absl::StrCat(ua, "\t", ua, "\t", ua, "\t", ua)) << p;
    EXPECT_EQ(StatusField(p, "NoNewPrivs"), "1");
    EXPECT_NE(Link(absl::StrCat("/proc/", p, "/ns/user")), Link("/proc/self/ns/user"));
    std::string map = ReadFileToString(absl::StrCat("/proc/", p, "/uid_map"));
    bool owner = false;
    for (absl::string_view line : absl::StrSplit(map, '\n', absl::SkipEmpty())) {
      std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      ASSERT_EQ(f.size(), 3u);
      EXPECT_NE(f[1], "0") << "host root is mapped into virtiofsd's namespace: " << map;
      owner = owner || (f[0] == "1000" && f[1] == "1000" && f[2] == "1");
    }
    // fs0 is ws (owned by 1000); fs1 is the root-owned tree, whose owner
    // is not mapped at all.
    bool root_owned = ProcessCmdline(p).find("/fs1.sock") != std::string::npos;
    EXPECT_EQ(owner, !root_owned) << "the guest user is ws's owner, and nobody's in rootws: " << map;
    // Its root: the shared tree (the worker, after its own pivot) or the
    // jail's root, never the host's.
    std::set<std::string> seen = Entries(absl::StrCat("/proc/", p, "/root"));
    EXPECT_EQ(seen.count("home") + seen.count("root") + seen.count("var"), 0u);
  }
  // The guest user's files are the owner's; guest root's are the block's.
  ASSERT_EQ(stat((ws + "/by-agent.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  ASSERT_EQ(stat((ws + "/by-root.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ua) << "guest root never makes a file owned by host root";
  EXPECT_EQ(Airlock({"exec", "ja", "--", "cat", ws + "/host.txt"}).out, "from host\n");
  // Guest root is the sandbox's own id there, with no power over host
  // root's files: nothing, and no setuid file, was made in the tree.
  EXPECT_TRUE(Entries(rootws).empty()) << "written into a root-owned tree";

  // rm removes the jail, and the ids go back to the pool.
  ASSERT_EQ(Airlock({"rm", "-f", "ja"}).exit_code, 0);
  EXPECT_NE(access((dir_.path() + "/run/jail/ja").c_str(), F_OK), 0);
  EXPECT_NE(access((dir_.path() + "/run/vms/ja").c_str(), F_OK), 0);
  EXPECT_NE(access(cg.c_str(), F_OK), 0) << cg << " left behind";
  EXPECT_TRUE(Virtiofsds("ja").empty());
  ASSERT_EQ(Airlock({"create", "--name", "jc", "-m", "1g", "shell"}).exit_code, 0);
  EXPECT_EQ(Sandbox("jc")["jail_uid"].get<uint32_t>(), ua) << "the freed block is used again";
}

// Code running as QEMU (what a device-emulation bug would give a guest):
// entered into a running QEMU's namespaces and root with its uid and its
// privileges, it tries to reach the host, and each try fails as it must.
TEST_F(JailE2ETest, CodeRunningAsQemuCannotReachTheHostOrAnotherSandbox) {
  ASSERT_EQ(Airlock({"create", "--name", "qa", "-m", "1g", "shell"}).exit_code, 0);
  ASSERT_EQ(Airlock({"create", "--name", "qb", "-m", "1g", "shell"}).exit_code, 0);
  nlohmann::json qa = Sandbox("qa");
  pid_t pid = qa["pid"].get<pid_t>();
  uint32_t uid = qa["jail_uid"].get<uint32_t>();
  std::ifstream f(dir_.path() + "/run/vmmd.pid");
  pid_t vmmd = 0;
  f >> vmmd;
  ASSERT_GT(vmmd, 0);
  // A host service on loopback that the jail must not reach.
  int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(listen(listener, 4), 0);
  socklen_t len = sizeof(addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len);
  int port = ntohs(addr.sin_port);
  std::string other = dir_.path() + "/run/vms/qb/agent.sock";
  std::string script = absl::StrCat(
      "t() { if out=$(\"$@\" 2>&1); then echo \"$1: ALLOWED\"; else echo \"$1: $out\"; fi; }; "
      "t cat /etc/shadow; t cat ", other, "; t ls ", dir_.path(), "/state/sandboxes/qb; ",
      "t sh -c 'echo x > /vm/kernel'; t touch /planted; t kill -0 ", vmmd, "; ",
      "t python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", ", port, "), 2)'; ",
      "t python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])' ",
      dir_.path(), "/run/vmmd.sock; "
      "t python3 -c 'import os; os.setuid(0)'; "
      "echo caps=$(grep CapEff /proc/self/status | cut -f2); echo nnp=$(grep NoNewPrivs /proc/self/status | cut -f2)");
  auto r = RunCommand({"nsenter", "-t", absl::StrCat(pid), "-m", "-u", "-i", "-n", "-p", "-C", "-r",
                       "-w", "--", "/usr/bin/setpriv", absl::StrCat("--reuid=", uid),
                       absl::StrCat("--regid=", uid), "--clear-groups", "--inh-caps=-all",
                       "--bounding-set=-all", "--no-new-privs", "/usr/bin/sh", "-c", script});
  close(listener);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string& out = r.out;
  EXPECT_NE(out.find("cat: cat: /etc/shadow: No such file or directory"), std::string::npos) << out;
  EXPECT_NE(out.find(absl::StrCat("cat: cat: ", other, ": No such file or directory")),
            std::string::npos) << out;
  EXPECT_NE(out.find("ls: ls: cannot access"), std::string::npos) << out;
  EXPECT_NE(out.find("sh: sh: 1: cannot create /vm/kernel: Read-only file system"), std::string::npos)
      << out;
  EXPECT_NE(out.find("touch: touch: cannot touch '/planted': Read-only file system"),
            std::string::npos) << out;
  EXPECT_NE(out.find("No such process"), std::string::npos) << "vmmd is outside its PID namespace: " << out;
  EXPECT_NE(out.find("OSError: [Errno 101] Network is unreachable"), std::string::npos) << out;
  EXPECT_NE(out.find("FileNotFoundError: [Errno 2] No such file or directory"), std::string::npos)
      << "vmmd's socket is not in its root: " << out;
  EXPECT_NE(out.find("PermissionError: [Errno 1] Operation not permitted"), std::string::npos) << out;
  EXPECT_EQ(out.find("ALLOWED"), std::string::npos) << out;
  EXPECT_NE(out.find("caps=0000000000000000"), std::string::npos) << out;
  EXPECT_NE(out.find("nnp=1"), std::string::npos) << out;
  // Nothing was planted on the host.
  EXPECT_NE(access((dir_.path() + "/run/jail/qa/vm/planted").c_str(), F_OK), 0);
}

// The KVM probe (run when /dev/kvm opens) is jailed and dies with vmmd.
TEST_F(JailE2ETest, TheKvmProbeIsJailedAndNeverOutlivesVmmd) {
  int kvm = open("/dev/kvm", O_RDWR | O_CLOEXEC);
  if (kvm < 0) GTEST_SKIP() << "no /dev/kvm: vmmd does not probe";
  close(kvm);
  ASSERT_EQ(Airlock({"daemon", "start"}).exit_code, 0);
  std::string probe_marker = dir_.path() + "/state/kvm-probe.console";
  pid_t create = fork();
  if (create == 0) {
    testing::RunAirlock(env_, {"create", "--name", "probed", "shell"}, "");
    _exit(0);
  }
  std::vector<pid_t> probe;
  for (int i = 0; i < 400 && probe.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(25));
    probe = testing::ProcessesNamed(probe_marker);
  }
  ASSERT_FALSE(probe.empty()) << "no probe QEMU seen (its verdict may be cached)";
  std::string uid = StatusField(probe[0], "Uid");
  EXPECT_EQ(uid.substr(0, uid.find('\t')), "1879048192") << "the pool's first id, not root";
  EXPECT_EQ(StatusField(probe[0], "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(probe[0], "NoNewPrivs"), "1");
  std::ifstream f(dir_.path() + "/run/vmmd.pid");
  pid_t vmmd = 0;
  f >> vmmd;
  ASSERT_GT(vmmd, 0);
  kill(vmmd, SIGKILL);
  for (int i = 0; i < 200 && !testing::ProcessesNamed(probe_marker).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(testing::ProcessesNamed(probe_marker).empty()) << "the probe outlived vmmd";
  waitpid(create, nullptr, 0);
}

// vmmd run by an ordinary user (here nobody): QEMU is jailed in a user
// namespace of that user's own uid, with the same namespaces, root and lack
// of privilege.
TEST_F(JailE2ETest, AnOrdinaryUsersVmmdJailsQemuInAUserNamespace) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to become nobody";
  const uid_t nobody = 65534;
  const char* images = getenv("AIRLOCK_IMAGE_DIR");
  ASSERT_NE(images, nullptr) << "AIRLOCK_IMAGE_DIR names the built images";
  // What nobody runs and reads must be its own to reach: the binaries, the
  // kernel, the initramfs and the base template, copied.
  std::string home = dir_.path() + "/nobody";
  ASSERT_EQ(mkdir(home.c_str(), 0700), 0);
  ASSERT_EQ(RunCommand({"mkdir", "-p", home + "/bin", home + "/images/templates"}).exit_code, 0);
  for (const char* b : {"cli/airlock", "vmmd/vmmd", "proxyd/proxyd", "policyd/policyd",
                        "secretsd/secretsd", "gitd/gitd", "apid/apid"}) {
    ASSERT_EQ(RunCommand({"cp", testing::BinaryPath(b), home + "/bin/"}).exit_code, 0) << b;
  }
  std::string img = images;
  ASSERT_EQ(RunCommand({"cp", "-r", img + "/kernel", img + "/initramfs", home + "/images/"}).exit_code, 0);
  ASSERT_EQ(RunCommand({"cp", "-r", img + "/templates/base", home + "/images/templates/"}).exit_code, 0);
  ASSERT_EQ(RunCommand({"chown", "-R", "65534:65534", home}).exit_code, 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  std::map<std::string, std::string> env = {
      {"HOME", home}, {"AIRLOCK_RUNTIME_DIR", home + "/run"}, {"AIRLOCK_STATE_DIR", home + "/state"},
      {"AIRLOCK_IMAGE_DIR", home + "/images"}, {"AIRLOCK_LIBEXEC_DIR", home + "/bin"},
      {"AIRLOCK_API_LISTEN", "127.0.0.1:0"}};
  auto as_nobody = [&](std::vector<std::string> args) {
    std::vector<std::string> argv = {"setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                     "--", home + "/bin/airlock"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv, env, "", 300);
  };
  auto create = as_nobody({"create", "--name", "mine", "-m", "512m", "shell"});
  ASSERT_EQ(create.exit_code, 0) << create.err;
  auto ls = as_nobody({"ls", "--json"});
  nlohmann::json sb = nlohmann::json::parse(ls.out).at(0);
  pid_t pid = sb["pid"].get<pid_t>();
  ASSERT_GT(pid, 0);
  EXPECT_EQ(sb["jail_uid"].get<uint32_t>(), nobody);
  EXPECT_EQ(StatusField(pid, "Uid"), "65534\t65534\t65534\t65534");
  EXPECT_EQ(StatusField(pid, "CapEff"), "0000000000000000");
  EXPECT_EQ(StatusField(pid, "CapBnd"), "0000000000000000");
  EXPECT_EQ(StatusField(pid, "NoNewPrivs"), "1");
  EXPECT_EQ(StatusField(pid, "NSpid"), absl::StrCat(pid, "\t1"));
  EXPECT_NE(Link(absl::StrCat("/proc/", pid, "/ns/user")), Link("/proc/self/ns/user"));
  EXPECT_EQ(absl::StripAsciiWhitespace(ReadFileToString(absl::StrCat("/proc/", pid, "/uid_map"))),
            "65534      65534          1");
  for (const char* absent : {"/home", "/root", "/etc/shadow", "/var"}) {
    EXPECT_NE(access(absl::StrCat("/proc/", pid, "/root", absent).c_str(), F_OK), 0) << absent;
  }
  auto exec = as_nobody({"exec", "mine", "--", "echo", "inside"});
  EXPECT_EQ(exec.out, "inside\n") << exec.err;
  // vmmd says what an ordinary user's jail lacks.
  EXPECT_NE(ReadFileToString(home + "/state/logs/vmmd.log").find("in a user namespace"),
            std::string::npos);
  EXPECT_EQ(as_nobody({"rm", "-f", "mine"}).exit_code, 0);
  EXPECT_EQ(as_nobody({"daemon", "stop"}).exit_code, 0);
  EXPECT_NE(access((home + "/run/jail/mine").c_str(), F_OK), 0);
}

TEST_F(JailE2ETest, AGuestPastItsMemoryIsStoppedByItsOwnLimitsNotTheHost) {
  ASSERT_EQ(Airlock({"create", "--name", "mem", "-m", "512m", "shell"}).exit_code, 0);
  nlohmann::json sb = Sandbox("mem");
  pid_t pid = sb["pid"].get<pid_t>();
  std::string cg = MemoryCgroup(pid);
  uint64_t oom_before = OomKills(cg);
  // tail holds all of a newline-free stream: it grows past the guest's
  // 512 MiB until the guest's kernel kills it.
  auto hog = Airlock({"exec", "-u", "root", "mem", "--", "sh", "-c",
                      "head -c 900M /dev/zero | tail > /dev/null"});
  EXPECT_NE(hog.exit_code, 0) << hog.out;
  auto dmesg = Airlock({"exec", "-u", "root", "mem", "--", "dmesg"});
  EXPECT_NE(dmesg.out.find("Out of memory: Killed process"), std::string::npos) << dmesg.out;
  // The sandbox lives on, the host's side was never out of memory.
  EXPECT_EQ(Airlock({"exec", "mem", "--", "echo", "alive"}).out, "alive\n");
  EXPECT_EQ(Sandbox("mem")["pid"].get<pid_t>(), pid);
  EXPECT_EQ(OomKills(cg), oom_before) << "the host's limit had to kill inside the cgroup";
  uint64_t limit = sb["host_memory_limit_bytes"].get<uint64_t>();
  std::string peak = access((cg + "/memory.max_usage_in_bytes").c_str(), F_OK) == 0
                         ? cg + "/memory.max_usage_in_bytes"
                         : cg + "/memory.peak";
  if (access(peak.c_str(), F_OK) == 0) {
    EXPECT_LE(Number(peak), limit);
  }
  auto status = Airlock({"daemon", "status"});
  EXPECT_EQ(status.exit_code, 0) << status.out;
  EXPECT_EQ(status.out.find("stopped"), std::string::npos) << status.out;
}

}  // namespace
}  // namespace airlock
