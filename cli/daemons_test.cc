#include "cli/daemons.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace airlock::cli {
namespace {

// A runtime and state dir of the test's own, and no daemon binaries.
class DaemonsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/airlock-daemons-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(mkdir((dir_ + "/run").c_str(), 0700), 0);
    ASSERT_EQ(mkdir((dir_ + "/state").c_str(), 0700), 0);
    ASSERT_EQ(mkdir((dir_ + "/libexec").c_str(), 0700), 0);
    setenv("AIRLOCK_RUNTIME_DIR", (dir_ + "/run").c_str(), 1);
    setenv("AIRLOCK_STATE_DIR", (dir_ + "/state").c_str(), 1);
    setenv("AIRLOCK_LIBEXEC_DIR", (dir_ + "/libexec").c_str(), 1);
    unsetenv("AIRLOCK_VMMD");
  }
  void TearDown() override {
    if (listener_ >= 0) close(listener_);
    std::string rm = "rm -rf " + dir_;
    ASSERT_EQ(system(rm.c_str()), 0);
  }

  // Listen makes a Unix socket at vmmd's path that accepts connections
  // and never answers; `keep` false closes it again, leaving the file.
  void Listen(bool keep) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::string path = dir_ + "/run/vmmd.sock";
    memcpy(addr.sun_path, path.data(), path.size());
    listener_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(listener_, 0);
    ASSERT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    ASSERT_EQ(listen(listener_, 8), 0);
    if (!keep) {
      close(listener_);
      listener_ = -1;
    }
  }

  std::string dir_;
  int listener_ = -1;
};

TEST_F(DaemonsTest, ALocalDaemonThatAcceptsIsUsedWithoutAHealthCheck) {
  Listen(/*keep=*/true);
  std::shared_ptr<grpc::Channel> channel;
  absl::Status s = Daemons().EnsureRunning("vmmd", &channel);
  ASSERT_TRUE(s.ok()) << s;
  ASSERT_NE(channel, nullptr);
  // The one connection made was the probe's: closed without a byte (a
  // health check would have sent gRPC's HTTP/2 preface).
  int conn = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  ASSERT_GE(conn, 0);
  char buf[64];
  EXPECT_EQ(read(conn, buf, sizeof(buf)), 0);
  close(conn);
  pollfd p = {listener_, POLLIN, 0};
  EXPECT_EQ(poll(&p, 1, 200), 0) << "a second connection was made";
}

// What decides between using a local daemon as it is and starting the
// daemons (which the tests above would do for real: the bazel-bin layout
// has them beside this test).
TEST_F(DaemonsTest, OnlyASocketSomeoneListensOnCountsAsAccepting) {
  std::string path = dir_ + "/run/vmmd.sock";
  EXPECT_FALSE(SocketAccepting(path)) << "no socket file";
  Listen(/*keep=*/false);
  EXPECT_FALSE(SocketAccepting(path)) << "a socket file left by a stopped daemon";
  ASSERT_EQ(unlink(path.c_str()), 0);
  Listen(/*keep=*/true);
  EXPECT_TRUE(SocketAccepting(path));
  EXPECT_FALSE(SocketAccepting(dir_ + "/run/" + std::string(200, 'x'))) << "a path too long";
  EXPECT_FALSE(SocketAccepting(dir_ + "/run")) << "a directory";
}

}  // namespace
}  // namespace airlock::cli
