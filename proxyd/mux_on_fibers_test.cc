// A sandbox's egress mux and transport as proxyd runs them: the mux's loop
// a fiber (EgressMuxRunner), the transport's waits through Poll, on the
// loop of the connections' handlers.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/egress_mux.h"
#include "common/egress_transport.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "common/testing/sockets.h"
#include "gtest/gtest.h"
#include "proxyd/fibers.h"
#include "proxyd/mux_runner.h"
#include "proxyd/stream.h"
#include "proxyd/test_tls.h"
#include "proxyd/tls.h"

namespace airlock::proxyd {
namespace {

using agent::v1::EgressFrames;
using Clock = std::chrono::steady_clock;

// A tunnel (ours, the peer's end), a local stream's pair (the handler's
// end, the mux's end), the transport on ours waiting through Poll, and a
// mux over it run as proxyd runs one (MuxRunnerOn) on loop 0.
struct Wiring {
  int tunnel[2] = {-1, -1};
  int local[2] = {-1, -1};
  std::shared_ptr<EgressTransport> transport;
  std::shared_ptr<EgressMux> mux;
};

void Wire(FiberLoops* loops, Wiring* w) {
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, w->tunnel), 0);
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, w->local), 0);
  w->transport = std::make_shared<EgressTransport>(w->tunnel[0]);
  w->transport->UsePoll(&Poll);
  auto transport = w->transport;
  w->mux = std::make_shared<EgressMux>(
      [transport](const EgressFrames& b) { return transport->Write(b); }, kEgressWindow,
      MuxRunnerOn(loops, 0));
}

TEST(MuxOnFibersTest, AStreamsBytesReachTheTunnelAndAHandlerOnTheSameLoopGoesOn) {
  FiberLoops loops(1, 1);
  Wiring w;
  ASSERT_NO_FATAL_FAILURE(Wire(&loops, &w));
  int* tunnel = w.tunnel;
  int* local = w.local;
  auto transport = w.transport;
  {
    EgressMux& mux = *w.mux;
    ASSERT_TRUE(mux.Open(7, local[1]));
    // A handler fiber on the same loop writes; the mux carries it out.
    std::atomic<bool> wrote{false};
    ASSERT_TRUE(loops.SpawnOn(0, [&] {
      const std::string msg = "GET / HTTP/1.1\r\n\r\n";
      ASSERT_EQ(send(local[0], msg.data(), msg.size(), MSG_NOSIGNAL), static_cast<ssize_t>(msg.size()));
      wrote = true;
    }));
    EgressTransport peer(tunnel[1]);
    EgressFrames got;
    std::string data;
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (data.size() < 18 && peer.Read(&got, deadline)) {
      for (const auto& f : got.frames()) {
        if (f.id() == 7) data += f.data();
      }
    }
    EXPECT_TRUE(wrote.load());
    EXPECT_EQ(data, "GET / HTTP/1.1\r\n\r\n");
    transport->Shutdown();
    mux.Stop();
  }
  w.mux.reset();
  loops.Stop();
  close(local[0]);
}

TEST(MuxOnFibersTest, AReaderOnTheMuxsLoopFeedsItAndStopsItAtTheTunnelsEnd) {
  // proxyd's tunnel: the transport's reader is a fiber of the loop that
  // runs the mux, it reads while the mux's sends wait on the same
  // descriptor, and at the tunnel's end it stops the mux from that loop.
  FiberLoops loops(1, 1);
  Wiring w;
  ASSERT_NO_FATAL_FAILURE(Wire(&loops, &w));
  int* tunnel = w.tunnel;
  int* local = w.local;
  auto transport = w.transport;
  auto mux = std::move(w.mux);
  ASSERT_TRUE(mux->Open(7, local[1]));
  std::atomic<bool> stopped{false};
  std::atomic<int> delivered{0};
  ASSERT_TRUE(loops.SpawnOn(0, [&, mux] {
    EgressFrames in;
    while (transport->Read(&in)) {
      for (auto& f : *in.mutable_frames()) {
        if (mux->Deliver(std::move(f))) delivered++;
      }
      Yield();
    }
    transport->Shutdown();
    mux->Stop();
    stopped = true;
  }));
  // Both ways at once: the peer's bytes reach the local end while the
  // local end's bytes reach the peer.
  EgressTransport peer(tunnel[1]);
  EgressFrames out;
  auto* f = out.add_frames();
  f->set_id(7);
  f->set_data("from the guest");
  ASSERT_TRUE(peer.Write(out));
  const std::string msg = "from a handler";
  ASSERT_EQ(send(local[0], msg.data(), msg.size(), MSG_NOSIGNAL), static_cast<ssize_t>(msg.size()));
  std::string to_peer;
  EgressFrames got;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (to_peer.size() < msg.size() && peer.Read(&got, deadline)) {
    for (const auto& g : got.frames()) {
      if (g.id() == 7) to_peer += g.data();
    }
  }
  EXPECT_EQ(to_peer, msg);
  std::string to_local;
  char buf[64];
  while (to_local.size() < 14 && Clock::now() < deadline) {
    ssize_t n = recv(local[0], buf, sizeof(buf), MSG_DONTWAIT);
    if (n > 0) {
      to_local.append(buf, n);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  EXPECT_EQ(to_local, "from the guest");
  EXPECT_EQ(delivered.load(), 1);
  // The tunnel's end: the reader stops the mux from the mux's own loop.
  peer.Shutdown();
  deadline = Clock::now() + std::chrono::seconds(10);
  while (!stopped && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!stopped) {
    // The loop is stuck: the loops could never stop, so neither can this
    // test.
    fprintf(stderr, "the mux's Stop, called from its own loop, never returned\n");
    std::_Exit(1);
  }
  mux.reset();
  loops.Stop();
  close(local[0]);
}

// CountingPoll is Poll, counting the waits for room to write.
std::atomic<int> g_write_waits{0};
int CountingPoll(pollfd* fds, nfds_t n, int timeout_ms) {
  if (n > 0 && (fds[0].events & POLLOUT)) g_write_waits++;
  return Poll(fds, n, timeout_ms);
}

TEST(MuxOnFibersTest, StopEndsAMuxParkedInASendThePeerDoesNotRead) {
  FiberLoops loops(1, 1);
  int tunnel[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, tunnel), 0);
  int small = 4096;
  setsockopt(tunnel[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  auto transport = std::make_shared<EgressTransport>(tunnel[0]);
  transport->UsePoll(&CountingPoll);
  std::vector<int> apps;
  std::atomic<int> sends{0};
  auto start = Clock::now();
  {
    EgressMux mux(
        [transport, &sends](const EgressFrames& b) {
          sends++;
          return transport->Write(b);
        },
        kEgressWindow, MuxRunnerOn(&loops, 0));
    // Whatever happens below, the transport is shut down before the mux
    // is destroyed (its Stop waits for a fiber parked in a send).
    struct ShutdownFirst {
      std::shared_ptr<EgressTransport> t;
      ~ShutdownFirst() { t->Shutdown(); }
    } shutdown_first{transport};
    // Three streams' bytes, far more than the tunnel holds while nobody
    // reads its other end.
    for (uint64_t id = 1; id <= 3; ++id) {
      int sp[2];
      ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp), 0);
      ASSERT_TRUE(mux.Open(id, sp[1]));
      // What fits in the socket now (the mux stops reading once its send
      // waits).
      std::string chunk(128 * 1024, 'x');
      EXPECT_GT(send(sp[0], chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT), 0);
      apps.push_back(sp[0]);
    }
    // The mux's send waits for the tunnel (its fiber parked); another
    // fiber on the loop still runs.
    auto deadline = Clock::now() + std::chrono::seconds(10);
    while (g_write_waits.load() == 0 && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    ASSERT_GT(g_write_waits.load(), 0);
    std::atomic<bool> other_ran{false};
    ASSERT_TRUE(loops.SpawnOn(0, [&] { other_ran = true; }));
    while (!other_ran && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    EXPECT_TRUE(other_ran.load());
    EXPECT_GT(sends.load(), 0);
    transport->Shutdown();
    mux.Stop();
  }
  loops.Stop();
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(20));
  for (int fd : apps) close(fd);
  close(tunnel[1]);
}

// Pattern is `n` bytes that differ from stream to stream (`seed`).
std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 4096) & 0xff);
  return s;
}

TEST(MuxOnFibersTest, TwoSandboxesMuxesOnOneLoopNeverMixTheirBytes) {
  // Two sandboxes' muxes on one loop. A's first send waits (its fiber
  // parked) in the middle of a turn that still has bytes of a read to
  // send; B reads meanwhile. Each frame of A must carry A's bytes.
  FiberLoops loops(1, 1);
  int release[2];
  ASSERT_EQ(pipe2(release, O_CLOEXEC | O_NONBLOCK), 0);
  std::mutex mu;
  std::map<uint64_t, std::string> a_got, b_got;
  std::atomic<bool> a_waiting{false};
  auto record = [&mu](std::map<uint64_t, std::string>* into, const EgressFrames& batch) {
    std::lock_guard<std::mutex> lock(mu);
    for (const auto& f : batch.frames()) (*into)[f.id()] += f.data();
  };
  auto a = std::make_shared<EgressMux>(
      [&](const EgressFrames& batch) {
        record(&a_got, batch);
        if (!a_waiting.exchange(true)) {
          pollfd p = {release[0], POLLIN, 0};
          Poll(&p, 1, 10000);
        }
        return true;
      },
      kEgressWindow, MuxRunnerOn(&loops, 0));
  auto b = std::make_shared<EgressMux>(
      [&](const EgressFrames& batch) {
        record(&b_got, batch);
        return true;
      },
      kEgressWindow, MuxRunnerOn(&loops, 0));
  // Six streams of 200 KiB (under the first window, so one read each):
  // the batch fills (kEgressMaxBatch) at the first frame of the sixth
  // read, with three more frames of that read to come.
  const size_t kEach = 200 * 1024;
  // The loop is held (a fiber that does not yield) until all six are
  // open, so A's mux reads them in one turn.
  std::atomic<bool> opened{false};
  ASSERT_TRUE(loops.SpawnOn(0, [&] {
    while (!opened) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }));
  std::vector<int> apps;
  for (uint64_t id = 1; id <= 6; ++id) {
    int sp[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    int big = 4 << 20;
    setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
    std::string data = Pattern(kEach, static_cast<int>(id));
    ASSERT_EQ(send(sp[0], data.data(), data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(kEach));
    apps.push_back(sp[0]);
    ASSERT_TRUE(a->Open(id, sp[1]));
  }
  opened = true;
  auto deadline = Clock::now() + std::chrono::seconds(10);
  while (!a_waiting && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  ASSERT_TRUE(a_waiting.load());
  // B reads its stream while A is parked.
  int bp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, bp), 0);
  int big = 4 << 20;
  setsockopt(bp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  const std::string b_data = Pattern(kEach, 99);
  ASSERT_EQ(send(bp[0], b_data.data(), b_data.size(), MSG_NOSIGNAL), static_cast<ssize_t>(kEach));
  ASSERT_TRUE(b->Open(9, bp[1]));
  auto size_of = [&mu](std::map<uint64_t, std::string>* m) {
    std::lock_guard<std::mutex> lock(mu);
    size_t n = 0;
    for (const auto& [id, d] : *m) n += d.size();
    return n;
  };
  while (size_of(&b_got) < kEach && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(size_of(&b_got), kEach);
  ASSERT_EQ(write(release[1], "x", 1), 1);
  while (size_of(&a_got) < 6 * kEach && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    for (uint64_t id = 1; id <= 6; ++id) {
      EXPECT_TRUE(a_got[id] == Pattern(kEach, static_cast<int>(id))) << "stream " << id;
    }
    EXPECT_TRUE(b_got[9] == b_data);
  }
  a->Stop();
  b->Stop();
  loops.Stop();
  for (int fd : apps) close(fd);
  close(bp[0]);
  close(release[0]);
  close(release[1]);
}

}  // namespace
}  // namespace airlock::proxyd

namespace airlock::proxyd {
namespace {

// Sandbox is a guest mux (a thread of its own, as in the guest agent)
// joined over a real tunnel to a host mux run as proxyd runs one, whose
// streams are pipes served by handler fibers on the mux's loop, each
// holding its pipe as a Stream.
class Sandbox {
 public:
  using Handler = std::function<void(Stream&)>;
  Sandbox(FiberLoops* loops, Handler handler) : loops_(loops), handler_(std::move(handler)) {
    int t[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, t), 0);
    host_transport_ = std::make_shared<EgressTransport>(t[0]);
    host_transport_->UsePoll(&Poll);
    guest_transport_ = std::make_shared<EgressTransport>(t[1]);
    auto ht = host_transport_;
    host_ = std::make_shared<EgressMux>([ht](const EgressFrames& b) { return ht->Write(b); },
                                        kEgressWindow, MuxRunnerOn(loops, 0));
    auto gt = guest_transport_;
    guest_ = std::make_shared<EgressMux>([gt](const EgressFrames& b) { return gt->Write(b); });
    guest_reader_ = std::thread([this] {
      EgressFrames in;
      while (guest_transport_->Read(&in)) {
        for (auto& f : *in.mutable_frames()) guest_->Deliver(std::move(f));
      }
    });
    auto host = host_;
    EXPECT_TRUE(loops->SpawnOn(0, [this, host, ht] {
      EgressFrames in;
      while (ht->Read(&in)) {
        for (auto& f : *in.mutable_frames()) {
          if (f.kind_case() != agent::v1::EgressFrame::kOpen) {
            host->Deliver(std::move(f));
            continue;
          }
          std::shared_ptr<EgressPipe> pipe = host->OpenPipe(f.id());
          loops_->SpawnOn(0, [this, pipe] {
            Stream s(pipe);
            s.set_timeout(std::chrono::seconds(20));
            handler_(s);
          });
        }
      }
      ht->Shutdown();
      host->Stop();
      host_stopped_ = true;
    }));
  }
  ~Sandbox() {
    guest_transport_->Shutdown();
    for (int i = 0; i < 2000 && !host_stopped_; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    guest_->Stop();
    guest_reader_.join();
  }
  // Connect opens a guest connection: the guest app's end (a TCP socket).
  int Connect(uint64_t id) {
    auto [app, carried] = testing::LoopbackTcpPair();
    EXPECT_GE(app, 0);
    agent::v1::EgressFrame open;
    open.mutable_open()->set_via(agent::v1::EGRESS_FORWARD);
    EXPECT_TRUE(guest_->Open(id, carried, &open));
    return app;
  }

 private:
  FiberLoops* loops_;
  Handler handler_;
  std::shared_ptr<EgressTransport> host_transport_, guest_transport_;
  std::shared_ptr<EgressMux> host_, guest_;
  std::thread guest_reader_;
  std::atomic<bool> host_stopped_{false};
};

std::string Pattern(size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + i / 4096) & 0xff);
  return s;
}

std::string ReadToEnd(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, n);
  }
}

TEST(PipeStreamTest, AHandlersStreamOnAPipeCarriesManyWindowsBothWaysAndItsEnds) {
  FiberLoops loops(1, 1);
  const std::string up = Pattern(5 << 20), down = Pattern(7 << 20);
  std::string got_up;
  {
    Sandbox box(&loops, [&](Stream& s) {
      EXPECT_TRUE(s.piped());
      EXPECT_EQ(s.fd(), -1);
      char buf[65536];
      while (true) {
        ssize_t n = s.Read(buf, sizeof(buf));
        if (n <= 0) break;
        got_up.append(buf, n);
      }
      EXPECT_TRUE(s.WriteAll(down));
      s.ShutdownWrite();
    });
    int app = box.Connect(1);
    std::thread writer([&] {
      EXPECT_TRUE(WriteAll(app, up));
      shutdown(app, SHUT_WR);
    });
    EXPECT_EQ(ReadToEnd(app), down);
    writer.join();
    close(app);
  }
  loops.Stop();
  EXPECT_EQ(got_up, up);
}

TEST(PipeStreamTest, TlsWithTheGuestsClientRunsOverThePipe) {
  signal(SIGPIPE, SIG_IGN);
  TestTls tls;
  ASSERT_NO_FATAL_FAILURE(MakeTestTls("a.example.test", &tls));
  SSL_CTX* server_ctx = tls.server.get();
  SSL_CTX* client_ctx = tls.client.get();
  FiberLoops loops(1, 1);
  std::string heard;
  {
    Sandbox box(&loops, [&](Stream& s) {
      BIO* bio = s.NewBio();
      ASSERT_NE(bio, nullptr);
      auto ssl = AcceptClientTls(server_ctx, bio, [&s](short ev) { return s.Wait(ev); });
      ASSERT_TRUE(ssl.ok()) << ssl.status();
      s.StartTls(std::move(*ssl));
      char buf[256];
      ssize_t n = s.Read(buf, sizeof(buf));
      if (n > 0) heard.assign(buf, n);
      EXPECT_TRUE(s.WriteAll("hello from the handler"));
      s.ShutdownWrite();
    });
    int app = box.Connect(3);
    auto ssl = StartUpstreamTls(client_ctx, app, "a.example.test");
    ASSERT_TRUE(ssl.ok()) << ssl.status();
    ASSERT_EQ(SSL_write(ssl->get(), "hello", 5), 5);
    char buf[256];
    std::string back;
    while (true) {
      int n = SSL_read(ssl->get(), buf, sizeof(buf));
      if (n <= 0) break;
      back.append(buf, n);
    }
    EXPECT_EQ(back, "hello from the handler");
    EXPECT_EQ(SSL_get_error(ssl->get(), 0), SSL_ERROR_ZERO_RETURN) << "no close_notify came";
    ssl->reset();
    close(app);
  }
  loops.Stop();
  EXPECT_EQ(heard, "hello");
}

TEST(PipeStreamTest, AWaitOnAPipeAndASocketEndsForEitherAndAtItsTimeLimit) {
  FiberLoops loops(1, 1);
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, sp), 0);
  std::atomic<int> step{0};
  std::string order;
  {
    Sandbox box(&loops, [&](Stream& s) {
      Stream sock(sp[0]);
      Stream* both[2] = {&s, &sock};
      short events[2] = {POLLIN, POLLIN};
      short ready[2] = {0, 0};
      auto start = Clock::now();
      EXPECT_EQ(WaitStreams(both, events, ready, 2, 100), 0);  // nothing yet
      EXPECT_GE(Clock::now() - start, std::chrono::milliseconds(90));
      step = 1;
      ASSERT_EQ(WaitStreams(both, events, ready, 2, 10000), 1);
      order += ready[1] != 0 ? "socket" : "pipe";
      char c;
      ASSERT_EQ(sock.Read(&c, 1), 1);
      step = 2;
      ASSERT_EQ(WaitStreams(both, events, ready, 2, 10000), 1);
      order += ready[0] != 0 ? ",pipe" : ",socket";
      sock.Release();
    });
    int app = box.Connect(5);
    while (step.load() < 1) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_EQ(write(sp[1], "x", 1), 1);
    while (step.load() < 2) std::this_thread::sleep_for(std::chrono::milliseconds(2));
    ASSERT_TRUE(WriteAll(app, "y"));
    shutdown(app, SHUT_WR);
    ReadToEnd(app);
    close(app);
  }
  loops.Stop();
  EXPECT_EQ(order, "socket,pipe");
  close(sp[0]);
  close(sp[1]);
}

}  // namespace
}  // namespace airlock::proxyd
