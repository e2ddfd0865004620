// UpstreamPool on its own, with socket pairs as upstream connections.
#include "proxyd/upstream_pool.h"

#include <sys/socket.h>
#include <unistd.h>

#include <thread>
#include <utility>

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

// Pair is a kept connection (ours) and the server's end of it.
struct Pair {
  std::unique_ptr<Stream> ours;
  int server = -1;
  Pair() = default;
  Pair(Pair&& o) noexcept : ours(std::move(o.ours)), server(std::exchange(o.server, -1)) {}
  Pair& operator=(Pair&& o) noexcept {
    if (server >= 0) close(server);
    ours = std::move(o.ours);
    server = std::exchange(o.server, -1);
    return *this;
  }
  ~Pair() {
    if (server >= 0) close(server);
  }
};

Pair MakePair() {
  int sp[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  Pair p;
  p.ours = std::make_unique<Stream>(sp[0]);
  p.server = sp[1];
  return p;
}

// Closed is true when the server's end sees ours closed.
bool Closed(int server) {
  char c;
  return read(server, &c, 1) == 0;
}

TEST(UpstreamPoolTest, AKeptConnectionIsTakenOnceForItsOwnDestinationOnly) {
  UpstreamPool pool;
  Pair a = MakePair();
  int fd = a.ours->fd();
  pool.Keep("tcp a:80 at 10.0.0.1", std::move(a.ours));
  EXPECT_EQ(pool.idle(), 1u);
  EXPECT_EQ(pool.Take("tcp a:80 at 10.0.0.2"), nullptr);
  EXPECT_EQ(pool.Take("tls a:80 at 10.0.0.1"), nullptr);
  auto got = pool.Take("tcp a:80 at 10.0.0.1");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->fd(), fd);
  EXPECT_EQ(pool.Take("tcp a:80 at 10.0.0.1"), nullptr);
  EXPECT_EQ(pool.idle(), 0u);
}

TEST(UpstreamPoolTest, AConnectionWithAnythingWaitingIsClosedNotTaken) {
  UpstreamPool pool;
  Pair ended = MakePair();
  Pair chatty = MakePair();
  Pair buffered = MakePair();
  Stream* buffered_stream = buffered.ours.get();
  pool.Keep("d", std::move(ended.ours));
  pool.Keep("d", std::move(chatty.ours));
  pool.Keep("d", std::move(buffered.ours));
  EXPECT_EQ(pool.idle(), 3u);
  // While kept: the server closed one, sent more than its response on
  // another, and the third holds bytes read past its last response.
  shutdown(ended.server, SHUT_WR);
  ASSERT_EQ(write(chatty.server, "x", 1), 1);
  buffered_stream->unread() = "HTTP/1.1 200 OK\r\n";
  EXPECT_EQ(pool.Take("d"), nullptr);
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_TRUE(Closed(ended.server));
  EXPECT_TRUE(Closed(buffered.server));
  char c;
  EXPECT_LE(read(chatty.server, &c, 1), 0);
}

TEST(UpstreamPoolTest, AConnectionHoldingBytesPastItsResponseIsClosedWhenKept) {
  UpstreamPool pool;
  Pair buffered = MakePair();
  buffered.ours->unread() = "extra";
  pool.Keep("d", std::move(buffered.ours));
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_TRUE(Closed(buffered.server));
}

TEST(UpstreamPoolTest, BytesInTheSocketWhenKeptAreFoundByTake) {
  // Keep does not ask the socket (one look per request is enough): what
  // a server sent past its response is found when the connection would
  // be used.
  UpstreamPool pool;
  Pair chatty = MakePair();
  ASSERT_EQ(write(chatty.server, "x", 1), 1);
  pool.Keep("d", std::move(chatty.ours));
  EXPECT_EQ(pool.Take("d"), nullptr);
  EXPECT_EQ(pool.idle(), 0u);
  char c;
  EXPECT_LE(read(chatty.server, &c, 1), 0);
}

TEST(UpstreamPoolTest, TheNewestQuietConnectionIsTakenFirst) {
  UpstreamPool pool;
  Pair old_one = MakePair();
  Pair new_one = MakePair();
  int newest = new_one.ours->fd();
  pool.Keep("d", std::move(old_one.ours));
  pool.Keep("d", std::move(new_one.ours));
  auto got = pool.Take("d");
  ASSERT_NE(got, nullptr);
  EXPECT_EQ(got->fd(), newest);
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(UpstreamPoolTest, ConnectionsIdlePastTheLimitAreClosed) {
  UpstreamPool::Limits limits;
  limits.idle = std::chrono::milliseconds(50);
  UpstreamPool pool(limits);
  Pair a = MakePair();
  pool.Keep("d", std::move(a.ours));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  EXPECT_EQ(pool.Take("d"), nullptr);
  EXPECT_TRUE(Closed(a.server));
  // Whatever the destination: keeping one closes those idle too long.
  Pair b = MakePair();
  Pair c = MakePair();
  pool.Keep("b", std::move(b.ours));
  std::this_thread::sleep_for(std::chrono::milliseconds(80));
  pool.Keep("c", std::move(c.ours));
  EXPECT_TRUE(Closed(b.server));
  EXPECT_EQ(pool.idle(), 1u);
}

TEST(UpstreamPoolTest, LimitsPerDestinationAndInAllCloseTheSurplus) {
  UpstreamPool::Limits limits;
  limits.per_destination = 2;
  limits.total = 3;
  UpstreamPool pool(limits);
  Pair p[5];
  for (auto& x : p) x = MakePair();
  pool.Keep("a", std::move(p[0].ours));
  pool.Keep("a", std::move(p[1].ours));
  pool.Keep("a", std::move(p[2].ours));  // the oldest of "a" (p[0]) goes
  EXPECT_EQ(pool.idle(), 2u);
  EXPECT_TRUE(Closed(p[0].server));
  pool.Keep("b", std::move(p[3].ours));
  pool.Keep("b", std::move(p[4].ours));  // over the total: closed
  EXPECT_EQ(pool.idle(), 3u);
  EXPECT_TRUE(Closed(p[4].server));
}

TEST(UpstreamPoolTest, CloseEndsEveryKeptConnectionAndRefusesMore) {
  UpstreamPool pool;
  Pair a = MakePair();
  Pair b = MakePair();
  pool.Keep("d", std::move(a.ours));
  pool.Close();
  EXPECT_TRUE(Closed(a.server));
  pool.Keep("d", std::move(b.ours));
  EXPECT_TRUE(Closed(b.server));
  EXPECT_EQ(pool.idle(), 0u);
  EXPECT_EQ(pool.Take("d"), nullptr);
}

}  // namespace
}  // namespace airlock::proxyd
