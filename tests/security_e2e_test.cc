// The escape suite: from inside a real guest, try to reach what a sandbox
// must not reach, and expect each attempt to fail the expected way. The
// guest has no network device: TCP is redirected to the agent and decided
// by proxyd (403 for HTTP and TLS, a reset for anything else), UDP and
// IPv6 are refused in the guest, and protected addresses stay closed even
// when every host is allowed.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <map>
#include <thread>

#include "common/subprocess.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

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
    if (HasFailure()) std::cerr << testing::FailureDiagnostics(dir_.path());
    Airlock({"rm", "-f", "--all"});
    Airlock({"daemon", "stop"});
  }
  CommandResult Airlock(const std::vector<std::string>& args, const std::string& input = "") {
    return testing::RunAirlock(env_, args, input);
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

  // No NIC: loopback and the dummy interface that holds the default route
  // into the egress redirect; neither is a device.
  auto links = Guest("ls /sys/class/net; ls -d /sys/class/net/*/device 2>/dev/null | wc -l");
  EXPECT_EQ(links.out, "egress0\nlo\n0\n") << "a sandbox must have no network device";

  struct Attempt {
    std::string what;
    std::string script;
    std::string expect;
  } attempts[] = {
      {"host loopback service via the guest's 127.0.0.1",
       "exec 3<>/dev/tcp/127.0.0.1/" + port, "Connection refused"},
      {"host via the slirp gateway address",
       "exec 3<>/dev/tcp/10.0.2.2/" + port + " && printf 'hello\\n' >&3 && cat <&3",
       "Connection reset by peer"},
      {"cloud metadata address over HTTP",
       "curl -sS -m 20 --noproxy '*' http://169.254.169.254/latest/meta-data/",
       "blocked 169.254.169.254:80"},
      {"a private range, raw TCP",
       "exec 3<>/dev/tcp/192.168.1.1/22 && printf 'SSH-2.0-x\\r\\n' >&3 && cat <&3",
       "Connection reset by peer"},
      {"an outside host by IP over HTTPS", "curl -sS -m 20 --noproxy '*' https://1.1.1.1/",
       "blocked 1.1.1.1:443"},
      {"UDP out (DNS)", "exec 3<>/dev/udp/8.8.8.8/53 && echo x >&3", "Operation not permitted"},
      {"IPv6 out", "exec 3<>/dev/tcp/2606:4700::1111/443", "Network is unreachable"},
      {"ICMP echo out (raw socket as root)",
       "perl -e 'use Socket; socket(S, PF_INET, SOCK_RAW, 1) or die \"socket: $!\\n\"; "
       "send(S, pack(\"C8\", 8, 0, 0xf7, 0xff, 0, 0, 0, 0), 0, "
       "sockaddr_in(0, inet_aton(\"1.1.1.1\"))) or die \"send: $!\\n\"'",
       "send: Operation not permitted"},
  };
  for (const auto& a : attempts) {
    auto r = Guest(a.script);
    EXPECT_NE((r.out + r.err).find(a.expect), std::string::npos)
        << a.what << ": " << r.out << r.err;
  }
  // Even with every host allowed, protected addresses stay closed: the
  // metadata address, private ranges, and the host's loopback by name.
  ASSERT_EQ(Airlock({"policy", "init", "allow-all"}).exit_code, 0);
  auto meta = Guest("curl -sS -m 20 --noproxy '*' http://169.254.169.254/latest/meta-data/");
  EXPECT_NE(meta.out.find("protected address"), std::string::npos) << meta.out << meta.err;
  auto lo = Guest("curl -sS -m 20 -x http://127.0.0.1:3128 --noproxy '' http://localhost:" + port +
                  "/");
  EXPECT_NE(lo.out.find("protected address"), std::string::npos) << lo.out << lo.err;
  EXPECT_EQ(host_service.accepted(), 0) << "a host loopback service was reached from the guest";
  // A guest root that flushes the egress ruleset (the README's case) only
  // loses its own egress: with no NIC, what it sends goes to the dummy
  // device and nowhere else, so every connection times out. The guest has
  // no nft of its own; root brings one (the host's, with its libraries).
  auto tarball = RunCommand({"sh", "-c",
                             "tar -chf - /usr/sbin/nft $(ldd /usr/sbin/nft | grep -o '/[^ ]*' | "
                             "sort -u) 2>/dev/null"});
  ASSERT_FALSE(tarball.out.empty()) << tarball.err;
  auto carried = Airlock({"exec", "-i", "-u", "root", "esc", "--", "sh", "-c",
                          "mkdir -p /tmp/nft && tar -xf - -C /tmp/nft"}, tarball.out);
  ASSERT_EQ(carried.exit_code, 0) << carried.err;
  const std::string nft =
      "LD_LIBRARY_PATH=/tmp/nft/lib/x86_64-linux-gnu:/tmp/nft/usr/lib/x86_64-linux-gnu "
      "/tmp/nft/lib64/ld-linux-x86-64.so.2 /tmp/nft/usr/sbin/nft";
  auto before = Guest(nft + " list ruleset | grep -c redirect");
  EXPECT_NE(before.out, "0\n") << "the egress ruleset redirects TCP: " << before.out << before.err;
  auto flushed = Guest(
      nft + " flush ruleset && echo rules=$(" + nft + " list ruleset | wc -l); "
      "timeout 5 bash -c 'exec 3<>/dev/tcp/1.1.1.1/443'; echo outside=$?; "
      "timeout 5 bash -c 'exec 3<>/dev/tcp/10.0.2.2/" + port + "'; echo gateway=$?; "
      "timeout 5 bash -c 'exec 3<>/dev/tcp/192.168.1.1/22'; echo private=$?; "
      "curl -sS -m 5 --noproxy '*' http://169.254.169.254/ 2>&1; echo metadata=$?");
  EXPECT_NE(flushed.out.find("rules=0\n"), std::string::npos) << flushed.out << flushed.err;
  for (const char* what : {"outside=124\n", "gateway=124\n", "private=124\n"}) {
    EXPECT_NE(flushed.out.find(what), std::string::npos)
        << what << " (124: timed out, nothing answered): " << flushed.out;
  }
  EXPECT_NE(flushed.out.find("curl: (28)"), std::string::npos) << flushed.out;
  EXPECT_NE(flushed.out.find("metadata=28\n"), std::string::npos) << flushed.out;
  EXPECT_EQ(host_service.accepted(), 0) << "a flushed ruleset reached a host service";
  // A guest root that takes the egress redirect's route away only loses
  // its own egress: with no device left there is no route at all.
  auto unrouted = Guest("ip link del egress0 && ip route; exec 3<>/dev/tcp/1.1.1.1/443");
  EXPECT_NE(unrouted.exit_code, 0);
  EXPECT_EQ(unrouted.out, "") << "routes left: " << unrouted.out;
  EXPECT_NE(unrouted.err.find("connect: Network is unreachable"), std::string::npos)
      << unrouted.err;
  EXPECT_EQ(host_service.accepted(), 0);
  ASSERT_EQ(Airlock({"policy", "init", "balanced"}).exit_code, 0);
}

TEST_F(SecurityE2ETest, GuestCannotReachAnotherSandbox) {
  ASSERT_EQ(Airlock({"create", "--name", "esc", "-m", "1g", "-p", "8000", "shell"}).exit_code, 0);
  ASSERT_EQ(Airlock({"create", "--name", "other", "-m", "1g", "shell"}).exit_code, 0);
  // The other sandbox's published port lives on the host's loopback, which
  // the guest cannot reach; sandboxes share nothing else.
  auto ports = Airlock({"ports", "esc", "--json"});
  auto parsed = nlohmann::json::parse(ports.out, nullptr, false);
  ASSERT_TRUE(parsed.is_array() && parsed.size() == 1) << ports.out;
  std::string host_port = std::to_string(parsed[0]["host_port"].get<int>());
  auto r = Airlock({"exec", "-u", "root", "other", "--", "bash", "-c",
                    "exec 3<>/dev/tcp/127.0.0.1/" + host_port});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("Connection refused"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace airlock
