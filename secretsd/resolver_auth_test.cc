#include "secretsd/resolver_auth.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

std::string SelfExe() { return *CanonicalPath("/proc/self/exe"); }

CallerIdentity UnixCaller(pid_t pid, uid_t uid) {
  CallerIdentity c;
  c.transport = CallerIdentity::Transport::kUnix;
  c.pid = pid;
  c.uid = uid;
  return c;
}

CallerIdentity TlsCaller(std::vector<std::string> cns) {
  CallerIdentity c;
  c.transport = CallerIdentity::Transport::kTls;
  c.tls_common_names = std::move(cns);
  return c;
}

void Copy(const std::string& from, const std::string& to) {
  ASSERT_EQ(system(("cp " + from + " " + to + " && chmod 755 " + to).c_str()), 0);
}

TEST(ResolverAuthTest, UnixCallerRunningTheProxydBinaryIsAllowed) {
  ResolverPolicy p{getuid(), SelfExe(), "proxyd"};
  ResolverDecision d = AuthorizeResolver(UnixCaller(getpid(), getuid()), p);
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_NE(d.caller.find(SelfExe()), std::string::npos) << d.caller;
  // Root may be proxyd too.
  ResolverPolicy other_uid{getuid() + 1000, SelfExe(), "proxyd"};
  ResolverDecision as_root = AuthorizeResolver(UnixCaller(getpid(), 0), other_uid);
  EXPECT_TRUE(as_root.allowed) << as_root.reason;
}

TEST(ResolverAuthTest, UnixCallerRunningAnotherBinaryOrUidIsRefused) {
  ResolverPolicy p{getuid(), *CanonicalPath("/bin/sh"), "proxyd"};
  ResolverDecision d = AuthorizeResolver(UnixCaller(getpid(), getuid()), p);
  EXPECT_FALSE(d.allowed);
  EXPECT_NE(d.reason.find("not proxyd"), std::string::npos) << d.reason;
  EXPECT_NE(d.caller.find("pid " + std::to_string(getpid())), std::string::npos) << d.caller;

  ResolverPolicy self{getuid(), SelfExe(), "proxyd"};
  uid_t stranger = getuid() == 0 ? 4242 : getuid() + 1;
  if (getuid() == 0) self.uid = 4243;
  ResolverDecision wrong_uid = AuthorizeResolver(UnixCaller(getpid(), stranger), self);
  EXPECT_FALSE(wrong_uid.allowed);
  EXPECT_NE(wrong_uid.reason.find("uid"), std::string::npos) << wrong_uid.reason;

  ResolverPolicy unknown{getuid(), "", "proxyd"};
  EXPECT_FALSE(AuthorizeResolver(UnixCaller(getpid(), getuid()), unknown).allowed);
  // A pid that does not exist.
  EXPECT_FALSE(AuthorizeResolver(UnixCaller(0x3ffffff, getuid()), self).allowed);
}

TEST(ResolverAuthTest, ABinaryReplacedAfterTheCallerStartedIsRefused) {
  testing::ShortTempDir dir;
  std::string proxyd = dir.path() + "/proxyd";
  Copy("/bin/sleep", proxyd);
  pid_t pid = fork();
  if (pid == 0) {
    execl(proxyd.c_str(), proxyd.c_str(), "30", nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  // Wait until the child runs the copy (not this test binary any more).
  for (int i = 0; i < 200 && CanonicalPath("/proc/" + std::to_string(pid) + "/exe").value_or("") !=
                                 *CanonicalPath(proxyd);
       ++i) {
    usleep(10000);
  }
  ResolverPolicy p{getuid(), *CanonicalPath(proxyd), "proxyd"};
  ResolverDecision before = AuthorizeResolver(UnixCaller(pid, getuid()), p);
  EXPECT_TRUE(before.allowed) << before.reason;

  // An upgrade puts a new file at the same path.
  Copy("/bin/sleep", proxyd + ".new");
  ASSERT_EQ(rename((proxyd + ".new").c_str(), proxyd.c_str()), 0);
  ResolverDecision after = AuthorizeResolver(UnixCaller(pid, getuid()), p);
  EXPECT_FALSE(after.allowed);
  EXPECT_NE(after.reason.find("restart"), std::string::npos) << after.reason;

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ResolverAuthTest, TlsCallerNeedsProxydsCommonName) {
  ResolverPolicy p{getuid(), SelfExe(), "proxyd"};
  EXPECT_TRUE(AuthorizeResolver(TlsCaller({"proxyd"}), p).allowed);
  ResolverDecision other = AuthorizeResolver(TlsCaller({"vmmd"}), p);
  EXPECT_FALSE(other.allowed);
  EXPECT_EQ(other.caller, "tls cn=vmmd");
  EXPECT_FALSE(AuthorizeResolver(TlsCaller({"proxyd.evil"}), p).allowed);
  EXPECT_FALSE(AuthorizeResolver(TlsCaller({}), p).allowed);
  ResolverPolicy no_tls{getuid(), SelfExe(), ""};
  EXPECT_FALSE(AuthorizeResolver(TlsCaller({""}), no_tls).allowed);
  EXPECT_FALSE(AuthorizeResolver(CallerIdentity{}, p).allowed);
}

TEST(ResolverAuthTest, FindsProxydBesideSecretsdOrInTheBazelLayout) {
  testing::ShortTempDir dir;
  const std::string d = *CanonicalPath(dir.path());
  ASSERT_EQ(system(("mkdir -p " + d + "/bin " + d + "/out/secretsd " + d + "/out/proxyd").c_str()),
            0);
  Copy("/bin/true", d + "/bin/secretsd");
  Copy("/bin/true", d + "/bin/proxyd");
  Copy("/bin/true", d + "/out/secretsd/secretsd");
  Copy("/bin/true", d + "/out/proxyd/proxyd");

  EXPECT_EQ(*FindDaemonExecutable("proxyd", "", d + "/bin/secretsd"), d + "/bin/proxyd");
  EXPECT_EQ(*FindDaemonExecutable("proxyd", "", d + "/out/secretsd/secretsd"),
            d + "/out/proxyd/proxyd");
  // Beside wins over the Bazel layout.
  Copy("/bin/true", d + "/out/secretsd/proxyd");
  EXPECT_EQ(*FindDaemonExecutable("proxyd", "", d + "/out/secretsd/secretsd"),
            d + "/out/secretsd/proxyd");
  // Not executable: skipped.
  ASSERT_EQ(chmod((d + "/bin/proxyd").c_str(), 0644), 0);
  EXPECT_EQ(*FindDaemonExecutable("proxyd", "", d + "/bin/secretsd"), "");

  // An explicit path is canonicalized, and must be an executable file.
  ASSERT_EQ(symlink((d + "/out/proxyd/proxyd").c_str(), (d + "/link").c_str()), 0);
  EXPECT_EQ(*FindDaemonExecutable("proxyd", d + "/link", d + "/bin/secretsd"),
            d + "/out/proxyd/proxyd");
  EXPECT_EQ(FindDaemonExecutable("proxyd", d + "/none", d + "/bin/secretsd").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(FindDaemonExecutable("proxyd", d + "/bin/proxyd", d + "/bin/secretsd").ok());
  EXPECT_FALSE(FindDaemonExecutable("proxyd", d + "/out", d + "/bin/secretsd").ok());
}

TEST(ResolverAuthTest, FindsVmmdTheSameWay) {
  testing::ShortTempDir dir;
  const std::string d = *CanonicalPath(dir.path());
  ASSERT_EQ(system(("mkdir -p " + d + "/bin " + d + "/out/secretsd " + d + "/out/vmmd").c_str()),
            0);
  Copy("/bin/true", d + "/bin/secretsd");
  Copy("/bin/true", d + "/bin/proxyd");
  Copy("/bin/true", d + "/out/vmmd/vmmd");

  EXPECT_EQ(*FindDaemonExecutable("vmmd", "", d + "/bin/secretsd"), "");
  Copy("/bin/true", d + "/bin/vmmd");
  EXPECT_EQ(*FindDaemonExecutable("vmmd", "", d + "/bin/secretsd"), d + "/bin/vmmd");
  EXPECT_EQ(*FindDaemonExecutable("vmmd", "", d + "/out/secretsd/secretsd"), d + "/out/vmmd/vmmd");
  auto bad = FindDaemonExecutable("vmmd", d + "/none", d + "/bin/secretsd");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("--vmmd-exe="), std::string::npos) << bad.status();
}

// A policy where this test binary is vmmd and /bin/sh is proxyd.
ResolverPolicy VmmdIsSelf() {
  ResolverPolicy p;
  p.uid = getuid();
  p.proxyd_exe = *CanonicalPath("/bin/sh");
  p.proxyd_tls_name = "proxyd";
  p.vmmd_exe = SelfExe();
  p.vmmd_tls_name = "vmmd";
  return p;
}

TEST(ResolverAuthTest, RegistryResolverAcceptsVmmdOnly) {
  ResolverPolicy p = VmmdIsSelf();
  ResolverDecision d = AuthorizeRegistryResolver(UnixCaller(getpid(), getuid()), p);
  EXPECT_TRUE(d.allowed) << d.reason;
  EXPECT_EQ(d.reason, "vmmd");
  EXPECT_NE(d.caller.find(SelfExe()), std::string::npos) << d.caller;
  EXPECT_TRUE(AuthorizeRegistryResolver(TlsCaller({"vmmd"}), p).allowed);
  // vmmd is not proxyd: the same caller may not Resolve.
  ResolverDecision resolve = AuthorizeResolver(UnixCaller(getpid(), getuid()), p);
  EXPECT_FALSE(resolve.allowed);
  EXPECT_NE(resolve.reason.find("not proxyd"), std::string::npos) << resolve.reason;
  EXPECT_FALSE(AuthorizeResolver(TlsCaller({"vmmd"}), p).allowed);
}

TEST(ResolverAuthTest, RegistryResolverRefusesProxydAndOtherBinaries) {
  // This test binary is proxyd; vmmd is some other binary.
  ResolverPolicy p{getuid(), SelfExe(), "proxyd", *CanonicalPath("/bin/sh"), "vmmd"};
  EXPECT_TRUE(AuthorizeResolver(UnixCaller(getpid(), getuid()), p).allowed);
  ResolverDecision proxyd = AuthorizeRegistryResolver(UnixCaller(getpid(), getuid()), p);
  EXPECT_FALSE(proxyd.allowed);
  EXPECT_NE(proxyd.reason.find("not vmmd"), std::string::npos) << proxyd.reason;
  ResolverDecision proxyd_tls = AuthorizeRegistryResolver(TlsCaller({"proxyd"}), p);
  EXPECT_FALSE(proxyd_tls.allowed);
  EXPECT_NE(proxyd_tls.reason.find("not vmmd"), std::string::npos) << proxyd_tls.reason;

  // Nobody is vmmd when no vmmd is known.
  ResolverPolicy unknown = VmmdIsSelf();
  unknown.vmmd_exe = "";
  unknown.vmmd_tls_name = "";
  ResolverDecision no_exe = AuthorizeRegistryResolver(UnixCaller(getpid(), getuid()), unknown);
  EXPECT_FALSE(no_exe.allowed);
  EXPECT_NE(no_exe.reason.find("--vmmd-exe"), std::string::npos) << no_exe.reason;
  ResolverDecision no_tls = AuthorizeRegistryResolver(TlsCaller({""}), unknown);
  EXPECT_FALSE(no_tls.allowed);
  EXPECT_NE(no_tls.reason.find("--vmmd-tls-name"), std::string::npos) << no_tls.reason;

  // Another uid, a pid that does not exist, no identity at all.
  ResolverPolicy self = VmmdIsSelf();
  uid_t stranger = getuid() == 0 ? 4242 : getuid() + 1;
  if (getuid() == 0) self.uid = 4243;
  EXPECT_FALSE(AuthorizeRegistryResolver(UnixCaller(getpid(), stranger), self).allowed);
  EXPECT_FALSE(AuthorizeRegistryResolver(UnixCaller(0x3ffffff, getuid()), VmmdIsSelf()).allowed);
  EXPECT_FALSE(AuthorizeRegistryResolver(CallerIdentity{}, VmmdIsSelf()).allowed);
  EXPECT_FALSE(AuthorizeRegistryResolver(TlsCaller({"vmmd.evil"}), VmmdIsSelf()).allowed);
}

TEST(ResolverAuthTest, ARegistryResolverReplacedAfterItStartedIsRefused) {
  testing::ShortTempDir dir;
  std::string vmmd = dir.path() + "/vmmd";
  Copy("/bin/sleep", vmmd);
  pid_t pid = fork();
  if (pid == 0) {
    execl(vmmd.c_str(), vmmd.c_str(), "30", nullptr);
    _exit(127);
  }
  ASSERT_GT(pid, 0);
  for (int i = 0; i < 200 && CanonicalPath("/proc/" + std::to_string(pid) + "/exe").value_or("") !=
                                 *CanonicalPath(vmmd);
       ++i) {
    usleep(10000);
  }
  ResolverPolicy p{getuid(), SelfExe(), "proxyd", *CanonicalPath(vmmd), "vmmd"};
  ResolverDecision before = AuthorizeRegistryResolver(UnixCaller(pid, getuid()), p);
  EXPECT_TRUE(before.allowed) << before.reason;

  Copy("/bin/sleep", vmmd + ".new");
  ASSERT_EQ(rename((vmmd + ".new").c_str(), vmmd.c_str()), 0);
  ResolverDecision after = AuthorizeRegistryResolver(UnixCaller(pid, getuid()), p);
  EXPECT_FALSE(after.allowed);
  EXPECT_NE(after.reason.find("restart"), std::string::npos) << after.reason;

  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ResolverAuthTest, APolicyCannotMakeOneCallerBothDaemons) {
  EXPECT_TRUE(CheckPolicy(VmmdIsSelf()).ok());
  EXPECT_TRUE(CheckPolicy(ResolverPolicy{getuid(), "", "proxyd", "", "vmmd"}).ok());
  ResolverPolicy same_exe = VmmdIsSelf();
  same_exe.proxyd_exe = same_exe.vmmd_exe;
  absl::Status s = CheckPolicy(same_exe);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--vmmd-exe"), std::string::npos) << s;
  ResolverPolicy same_cn = VmmdIsSelf();
  same_cn.vmmd_tls_name = "proxyd";
  s = CheckPolicy(same_cn);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--vmmd-tls-name"), std::string::npos) << s;
}

}  // namespace
}  // namespace airlock::secretsd
