#include "proxyd/connections.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace airlock::proxyd {
namespace {

TEST(ConnectionCapsTest, ABurstNeverPassesEitherCap) {
  ConnectionCaps caps(/*total=*/300);
  std::atomic<uint64_t> a{0}, b{0};
  std::atomic<int> got_a{0}, got_b{0};
  std::vector<std::thread> burst;
  for (int t = 0; t < 16; ++t) {
    burst.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if (t % 2 == 0) {
          if (caps.Reserve(&a, 256)) got_a++;
        } else {
          if (caps.Reserve(&b, 256)) got_b++;
        }
      }
    });
  }
  for (auto& t : burst) t.join();
  // 800 tries each: neither sandbox passes its cap, and together they
  // fill the total exactly.
  EXPECT_LE(got_a.load(), 256);
  EXPECT_LE(got_b.load(), 256);
  EXPECT_EQ(got_a.load() + got_b.load(), 300);
  EXPECT_EQ(a.load(), static_cast<uint64_t>(got_a.load()));
  EXPECT_EQ(b.load(), static_cast<uint64_t>(got_b.load()));
  EXPECT_EQ(caps.open(), 300u);
  caps.Release(&a);
  EXPECT_TRUE(caps.Reserve(&a, 256));
  EXPECT_FALSE(caps.Reserve(&a, 256));  // the total is full again
  EXPECT_FALSE(caps.Reserve(&b, 256));
}

TEST(ConnectionCapsTest, ARefusalTakesNothing) {
  ConnectionCaps caps(10);
  std::atomic<uint64_t> a{0};
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(caps.Reserve(&a, 3));
  EXPECT_FALSE(caps.Reserve(&a, 3));
  EXPECT_EQ(a.load(), 3u);
  EXPECT_EQ(caps.open(), 3u);
}

TEST(HandlersTest, EveryHandlerIsWaitedFor) {
  auto loops = std::make_shared<FiberLoops>(2, 2);
  std::atomic<int> ran{0};
  Handlers handlers(loops, loops->PickLoop());
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(handlers.Spawn([&ran, i] {
      SleepFor(std::chrono::milliseconds(i % 5));
      ran++;
    }));
  }
  handlers.JoinAll();
  EXPECT_EQ(ran.load(), 50);
  EXPECT_EQ(handlers.running(), 0u);
  EXPECT_FALSE(handlers.Spawn([] {}));
}

TEST(HandlersTest, JoinAllWaitsForHandlersStillRunning) {
  auto loops = std::make_shared<FiberLoops>(1, 1);
  Handlers handlers(loops, loops->PickLoop());
  std::atomic<bool> finished{false};
  ASSERT_TRUE(handlers.Spawn([&] {
    SleepFor(std::chrono::milliseconds(200));
    finished = true;
  }));
  handlers.JoinAll();
  EXPECT_TRUE(finished.load());
}

TEST(HandlersTest, TwoAttachmentsShareTheLoopsAndWaitOnlyForTheirOwn) {
  auto loops = std::make_shared<FiberLoops>(1, 1);
  Handlers a(loops, 0), b(loops, 0);
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sp), 0);
  std::atomic<bool> b_done{false};
  // A's handler waits on a socket nobody writes to until the end.
  ASSERT_TRUE(a.Spawn([&] {
    pollfd p = {sp[0], POLLIN, 0};
    EXPECT_EQ(Poll(&p, 1, -1), 1);
  }));
  ASSERT_TRUE(b.Spawn([&] { b_done = true; }));
  b.JoinAll();
  EXPECT_TRUE(b_done.load());
  EXPECT_EQ(a.running(), 1u);
  ASSERT_EQ(write(sp[1], "x", 1), 1);
  a.JoinAll();
  close(sp[0]);
  close(sp[1]);
}

TEST(SocketSetTest, ShutdownAllEndsABlockedReadAndLaterAdds) {
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sp), 0);
  SocketSet set;
  set.Add(sp[0]);
  std::thread reader([&] {
    char c;
    EXPECT_EQ(read(sp[0], &c, 1), 0);  // ends without data
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  set.ShutdownAll();
  reader.join();
  int late[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, late), 0);
  set.Add(late[0]);
  char c;
  EXPECT_EQ(read(late[0], &c, 1), 0);
  set.Remove(sp[0]);
  set.Remove(late[0]);
  for (int fd : {sp[0], sp[1], late[0], late[1]}) close(fd);
}

}  // namespace
}  // namespace airlock::proxyd
