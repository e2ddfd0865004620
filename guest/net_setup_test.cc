// SetUpEgressInterface in a network namespace of the test's own (needs
// root, as the agent has in the guest; skipped otherwise).
#include "guest/net_setup.h"

#include <sched.h>
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

// Shell runs `cmd` with sh and returns its standard output; -1 in `code`
// when it could not run.
std::string Shell(const std::string& cmd, int* code = nullptr) {
  std::string out;
  FILE* f = popen(cmd.c_str(), "r");
  if (f == nullptr) {
    if (code) *code = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  int status = pclose(f);
  if (code) *code = status;
  return out;
}

struct Outcome {
  std::string first;   // the first call's status
  std::string second;  // a second call's status
  std::string ip;      // what `ip` shows afterwards
};

// Kind is the guest's dummy where this host's kernel has the driver, else
// ifb (which behaves the same for this: it drops what it is sent).
std::string Kind() {
  int code = 0;
  Shell("unshare -n ip link add x0 type dummy 2>/dev/null", &code);
  return code == 0 ? "dummy" : "ifb";
}

// InFreshNamespace runs `before` (a shell command), SetUpEgressInterface
// twice and `ip` in a child in a new network namespace.
Outcome InFreshNamespace(const std::string& before) {
  const std::string kind = Kind();
  int out[2];
  EXPECT_EQ(pipe(out), 0);
  pid_t pid = fork();
  if (pid == 0) {
    close(out[0]);
    if (unshare(CLONE_NEWNET) != 0) _exit(3);
    std::string text;
    int code = 0;
    if (!before.empty()) Shell(before, &code);
    if (code != 0) _exit(4);
    auto first = SetUpEgressInterface(kind);
    auto second = SetUpEgressInterface(kind);
    text = std::string(first.message()) + "\n" + std::string(second.message()) + "\n" +
           Shell("ip -o -4 addr show; ip route; ip -o link show | cut -d' ' -f2,3");
    ssize_t unused = write(out[1], text.data(), text.size());
    (void)unused;
    _exit(0);
  }
  close(out[1]);
  std::string all;
  char buf[4096];
  ssize_t n;
  while ((n = read(out[0], buf, sizeof(buf))) > 0) all.append(buf, n);
  close(out[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  Outcome o;
  size_t a = all.find('\n');
  size_t b = all.find('\n', a + 1);
  if (a == std::string::npos || b == std::string::npos) return o;
  o.first = all.substr(0, a);
  o.second = all.substr(a + 1, b - a - 1);
  o.ip = all.substr(b + 1);
  return o;
}

class NetSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root for a network namespace";
  }
};

TEST_F(NetSetupTest, MakesEgress0WithItsAddressAndTheDefaultRoute) {
  Outcome o = InFreshNamespace("");
  EXPECT_EQ(o.first, "");
  EXPECT_NE(o.ip.find("egress0    inet 10.0.2.15/24"), std::string::npos) << o.ip;
  EXPECT_NE(o.ip.find("default dev egress0 scope link"), std::string::npos) << o.ip;
  EXPECT_NE(o.ip.find("10.0.2.0/24 dev egress0 proto kernel scope link src 10.0.2.15"),
            std::string::npos)
      << o.ip;
  EXPECT_NE(o.ip.find("egress0: <BROADCAST,NOARP,UP,LOWER_UP>"), std::string::npos) << o.ip;
}

TEST_F(NetSetupTest, RemovesTheModulesOwnDummy0) {
  Outcome o = InFreshNamespace("ip link add dummy0 type " + Kind());
  EXPECT_EQ(o.first, "");
  EXPECT_EQ(o.ip.find("dummy0"), std::string::npos) << o.ip;
  EXPECT_NE(o.ip.find("egress0:"), std::string::npos) << o.ip;
}

TEST_F(NetSetupTest, ASecondCallNamesTheStepThatFailed) {
  Outcome o = InFreshNamespace("");
  EXPECT_EQ(o.second, "egress interface: creating egress0: File exists");
}

}  // namespace
}  // namespace airlock::guest
