// The escape suite: from inside a real guest, try to reach what a sandbox
// must not reach, and expect each attempt to fail the expected way. Today
// the guest has no network interface at all (egress through proxyd is not
// built), so every network attempt must fail at the guest's own stack.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <map>
#include <thread>

#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

using testing::BinaryPath;

// LoopbackListener counts connections to a host loopback port.
class LoopbackListener {
 public:
  LoopbackListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 16);
    socklen_t len = sizeof(a);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p = {fd_, POLLIN, 0};
        if (poll(&p, 1, 100) > 0) {
          int c = accept(fd_, nullptr, nullptr);
          if (c >= 0) {
            ++accepted_;
            close(c);
          }
        }
      }
    });
  }
  ~LoopbackListener() {
    stop_ = true;
    thread_.join();
    close(fd_);
  }
  int port() const { return port_; }
  int accepted() const { return accepted_; }

 private:
  int fd_;
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::thread thread_;
};

class SecurityE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    env_ = testing::AirlockEnv(dir_.path());
  }
  void TearDown() override {
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
  }
  CommandResult Airlock(const std::vector<std::string>& args) {
    return testing::RunAirlock(env_, args);
  }
  // Guest runs a bash snippet as root inside the sandbox.
  CommandResult Guest(const std::string& script) {
    return Airlock({"exec", "-u", "root", "esc", "--", "bash", "-c", script});
  }
  testing::ShortTempDir dir_;
  std::map<std::string, std::string> env_;
};

TEST_F(SecurityE2ETest, NetworkEscapesFail) {
  LoopbackListener host_service;
  ASSERT_EQ(Airlock({"create", "--name", "esc", "-m", "1g", "shell"}).exit_code, 0);
  std::string port = std::to_string(host_service.port());

  // The guest has only a loopback interface: no route anywhere.
  auto links = Guest("ls /sys/class/net");
  EXPECT_EQ(links.out, "lo\n") << "a sandbox must have no network interface";

  struct Attempt {
    std::string what;
    std::string script;
    std::string expect;
  } attempts[] = {
      {"host loopback service via the guest's 127.0.0.1",
       "exec 3<>/dev/tcp/127.0.0.1/" + port, "Connection refused"},
      {"host via the slirp gateway address", "exec 3<>/dev/tcp/10.0.2.2/" + port,
       "Network is unreachable"},
      {"cloud metadata address", "exec 3<>/dev/tcp/169.254.169.254/80", "Network is unreachable"},
      {"a private range", "exec 3<>/dev/tcp/192.168.1.1/22", "Network is unreachable"},
      {"an outside host by IP", "exec 3<>/dev/tcp/1.1.1.1/443", "Network is unreachable"},
      {"UDP out (DNS)", "exec 3<>/dev/udp/8.8.8.8/53 && echo x >&3", "Network is unreachable"},
      {"a name (no resolver answers)", "getent hosts example.com || echo no-answer", "no-answer"},
  };
  for (const auto& a : attempts) {
    auto r = Guest(a.script);
    EXPECT_NE((r.out + r.err).find(a.expect), std::string::npos)
        << a.what << ": " << r.out << r.err;
  }
  auto ping = Guest("ping -c1 -W1 1.1.1.1 2>&1 || true");
  EXPECT_EQ(ping.out.find("1 received"), std::string::npos) << ping.out;
  EXPECT_EQ(host_service.accepted(), 0) << "a host loopback service was reached from the guest";
}

TEST_F(SecurityE2ETest, GuestCannotReachAnotherSandbox) {
  ASSERT_EQ(Airlock({"create", "--name", "esc", "-m", "1g", "-p", "8000", "shell"}).exit_code, 0);
  ASSERT_EQ(Airlock({"create", "--name", "other", "-m", "1g", "shell"}).exit_code, 0);
  // The other sandbox's published port lives on the host's loopback, which
  // the guest cannot reach; sandboxes share nothing else.
  auto ports = Airlock({"ports", "esc", "--json"});
  std::string host_port = ports.out.substr(ports.out.find("\"host_port\": ") + 13);
  host_port = host_port.substr(0, host_port.find_first_not_of("0123456789"));
  auto r = Airlock({"exec", "-u", "root", "other", "--", "bash", "-c",
                    "exec 3<>/dev/tcp/127.0.0.1/" + host_port});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace airlock
