// Streams on fibers: TLS connections whose handlers share one loop thread
// (and so OpenSSL's per-thread error queue and errno).
#include "proxyd/stream.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "common/testing/harness.h"
#include "gtest/gtest.h"
#include "proxyd/fibers.h"
#include "proxyd/test_tls.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {
namespace {

using std::chrono::milliseconds;

struct TlsPair {
  int server = -1;  // non-blocking: a fiber's end
  int client = -1;
  TlsPair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
    server = fds[0];
    client = fds[1];
    fcntl(server, F_SETFL, fcntl(server, F_GETFL) | O_NONBLOCK);
  }
};

TEST(StreamTest, AFailedTlsConnectionLeavesNothingForAnotherOnTheSameLoop) {
  signal(SIGPIPE, SIG_IGN);
  TestTls tls;
  ASSERT_NO_FATAL_FAILURE(MakeTestTls("a.example.test", &tls));
  SSL_CTX* server_ctx = tls.server.get();
  SSL_CTX* client_ctx = tls.client.get();

  TlsPair a, b;
  std::atomic<bool> b_failed{false};
  std::string a_got;
  FiberLoops loops(1, 1);
  // B's client goes away without close_notify: its fiber's read fails,
  // and OpenSSL queues why on the loop's thread.
  ASSERT_TRUE(loops.Spawn([&] {
    auto ssl = AcceptClientTls(server_ctx, b.server);
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    Stream s(b.server);
    s.StartTls(std::move(*ssl));
    char buf[16];
    EXPECT_LT(s.Read(buf, sizeof(buf)), 0);
    s.Release();
    b_failed = true;
  }));
  // A reads only after that, with nothing there yet: its read must wait,
  // not take B's failure for its own.
  ASSERT_TRUE(loops.Spawn([&] {
    auto ssl = AcceptClientTls(server_ctx, a.server);
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    Stream s(a.server);
    s.set_timeout(std::chrono::seconds(10));
    s.StartTls(std::move(*ssl));
    for (int i = 0; i < 2000 && !b_failed; ++i) SleepFor(milliseconds(5));
    char buf[16];
    ssize_t n = s.Read(buf, sizeof(buf));
    if (n > 0) a_got.assign(buf, n);
    s.Release();
  }));
  std::thread client_b([&] {
    auto ssl = StartUpstreamTls(client_ctx, b.client, "a.example.test");
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    shutdown(b.client, SHUT_RDWR);  // no close_notify
  });
  std::thread client_a([&] {
    auto ssl = StartUpstreamTls(client_ctx, a.client, "a.example.test");
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    for (int i = 0; i < 2000 && !b_failed; ++i) std::this_thread::sleep_for(milliseconds(5));
    std::this_thread::sleep_for(milliseconds(200));
    SSL_write(ssl->get(), "hello", 5);
    std::this_thread::sleep_for(milliseconds(200));
  });
  client_b.join();
  client_a.join();
  loops.Stop();
  EXPECT_TRUE(b_failed.load());
  EXPECT_EQ(a_got, "hello");
  for (int fd : {a.server, a.client, b.server, b.client}) close(fd);
}

TEST(StreamTest, ExpectWaitChangesNothingAReaderSees) {
  int fds[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, fds), 0);
  Stream s(fds[0]);
  s.set_timeout(milliseconds(200));
  char buf[16];
  // Bytes already there: read at once.
  ASSERT_EQ(write(fds[1], "ab", 2), 2);
  s.ExpectWait();
  ASSERT_EQ(s.Read(buf, sizeof(buf)), 2);
  EXPECT_EQ(std::string(buf, 2), "ab");
  // Bytes read past a head come first, without waiting.
  s.unread() = "cd";
  s.ExpectWait();
  ASSERT_EQ(s.Read(buf, sizeof(buf)), 2);
  EXPECT_EQ(std::string(buf, 2), "cd");
  // Nothing: the wait keeps the stream's time limit.
  s.ExpectWait();
  errno = 0;
  EXPECT_EQ(s.Read(buf, sizeof(buf)), -1);
  EXPECT_EQ(errno, ETIMEDOUT);
  // Bytes that come while it waits, and then the end.
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(30));
    (void)!write(fds[1], "ef", 2);
    shutdown(fds[1], SHUT_WR);
  });
  s.set_timeout(milliseconds(5000));
  s.ExpectWait();
  ASSERT_EQ(s.Read(buf, sizeof(buf)), 2);
  EXPECT_EQ(std::string(buf, 2), "ef");
  s.ExpectWait();
  EXPECT_EQ(s.Read(buf, sizeof(buf)), 0);
  later.join();
  close(fds[1]);
}

}  // namespace
}  // namespace airlock::proxyd
