// Two EgressMuxes back to back over an in-memory transport, each carrying
// real sockets: bytes, half-closes, resets and flow control as the guest
// agent and proxyd see them.
#include "common/egress_mux.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <chrono>
#include <functional>
#include <set>
#include <thread>

#include "absl/strings/string_view.h"
#include "common/fd_io.h"
#include "common/testing/sockets.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

using agent::v1::EgressFrame;
using agent::v1::EgressFrames;

// A connected loopback TCP pair, so a reset shows as ECONNRESET.
std::pair<int, int> TcpPair() {
  auto pair = testing::LoopbackTcpPair();
  EXPECT_GE(pair.first, 0);
  return pair;
}

std::pair<int, int> UnixPair() {
  int sp[2];
  EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  return {sp[0], sp[1]};
}

// ReadAll reads until end of stream; *error gets errno of a failed read.
std::string ReadAll(int fd, int* error = nullptr) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && error != nullptr) *error = errno;
    if (n <= 0) return out;
    out.append(buf, n);
  }
}

// ReadExactly reads `n` bytes (fewer at an end or error).
std::string ReadExactly(int fd, size_t n) {
  std::string out;
  char buf[256];
  while (out.size() < n) {
    // Ten seconds of silence end it short (a test fails, it never hangs).
    pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 10000) != 1) break;
    ssize_t r = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    out.append(buf, r);
  }
  return out;
}

std::string Pattern(size_t n, int seed) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>((i * 131 + seed * 7 + i / 4096) & 0xff);
  return s;
}

// Recorder is a transport that keeps every batch a mux sends.
class Recorder {
 public:
  EgressMux::Send send() {
    return [this](const EgressFrames& b) {
      std::lock_guard<std::mutex> lock(mu_);
      batches_.push_back(b);
      return true;
    };
  }
  // WaitFor waits up to 2 s for a sent frame that `match`es.
  bool WaitFor(const std::function<bool(const EgressFrame&)>& match) {
    for (int i = 0; i < 400; ++i) {
      for (const EgressFrame& f : frames()) {
        if (match(f)) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }
  std::vector<EgressFrames> batches() {
    std::lock_guard<std::mutex> lock(mu_);
    return batches_;
  }
  std::vector<EgressFrame> frames() {
    std::vector<EgressFrame> out;
    for (const EgressFrames& b : batches()) {
      out.insert(out.end(), b.frames().begin(), b.frames().end());
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::vector<EgressFrames> batches_;
};

// PipeOwner holds a mux's pipe as a blocking owner on a thread of its
// own would (proxyd's handlers hold theirs on a fiber of the mux's loop):
// each wait ends at the pipe's wake or after 10 s.
class PipeOwner {
 public:
  explicit PipeOwner(std::shared_ptr<EgressPipe> pipe) : pipe_(std::move(pipe)) {
    pipe_->SetOwnerWake([this] {
      std::lock_guard<std::mutex> lock(mu_);
      wakes_++;
      cv_.notify_all();
    });
  }
  ~PipeOwner() {
    if (!closed_) pipe_->Close();
  }
  EgressPipe& pipe() { return *pipe_; }
  // Read waits for bytes: > 0, 0 at the end, -1 after 10 s.
  ssize_t Read(char* buf, size_t n) {
    for (int i = 0; i < 1000; ++i) {
      ssize_t r = pipe_->Read(buf, n);
      if (r >= 0 || errno != EAGAIN) return r;
      Wait([&] { return pipe_->Readable(); });
    }
    return -1;
  }
  std::string ReadAll() {
    std::string out;
    char buf[65536];
    while (true) {
      ssize_t n = Read(buf, sizeof(buf));
      if (n <= 0) return out;
      out.append(buf, n);
    }
  }
  std::string ReadExactly(size_t n) {
    std::string out;
    char buf[256];
    while (out.size() < n) {
      ssize_t r = Read(buf, std::min(sizeof(buf), n - out.size()));
      if (r <= 0) break;
      out.append(buf, r);
    }
    return out;
  }
  bool WriteAll(absl::string_view data) {
    while (!data.empty()) {
      ssize_t r = pipe_->Write(data.data(), data.size());
      if (r > 0) {
        data.remove_prefix(r);
        continue;
      }
      if (r < 0 && errno != EAGAIN) return false;
      if (!Wait([&] { return pipe_->Writable(); })) return false;
    }
    return true;
  }
  void Close() {
    closed_ = true;
    pipe_->Close();
  }
  int wakes() {
    std::lock_guard<std::mutex> lock(mu_);
    return wakes_;
  }

 private:
  // Wait waits for `ready`, looking again at each wake. The pipe is
  // never called under mu_: the wake runs under the pipe's lock.
  bool Wait(const std::function<bool()>& ready) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (true) {
      int seen = wakes();
      if (ready()) return true;
      std::unique_lock<std::mutex> lock(mu_);
      if (!cv_.wait_until(lock, deadline, [&] { return wakes_ != seen; })) return false;
    }
  }

  std::shared_ptr<EgressPipe> pipe_;
  bool closed_ = false;
  std::mutex mu_;
  std::condition_variable cv_;
  int wakes_ = 0;
};

// Link joins a "guest" mux and a "host" mux. Each guest connection is a
// TCP pair: the test's app end, and the end the guest mux carries. The
// host side answers each open with a TCP pair too, whose app end the test
// takes from host_apps.
class Link {
 public:
  // `host_runner`: how the host mux runs its loop (its own thread when
  // empty).
  explicit Link(EgressMuxRunner host_runner = {}) {
    guest = std::make_unique<EgressMux>([this](const EgressFrames& b) {
      if (cut) return false;
      for (const EgressFrame& f : b.frames()) {
        if (f.kind_case() == EgressFrame::kReset) guest_resets++;
        ToHost(f);
      }
      return true;
    });
    host = std::make_unique<EgressMux>([this](const EgressFrames& b) {
      if (cut) return false;
      for (const EgressFrame& f : b.frames()) {
        if (f.kind_case() == EgressFrame::kReset) host_resets++;
        guest->Deliver(f);
      }
      return true;
    }, kEgressWindow, std::move(host_runner));
  }
  ~Link() {
    guest->Stop();
    host->Stop();
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [id, fd] : host_apps) close(fd);
  }

  // ConnectOnPipe opens guest connection `id` whose host side is a pipe,
  // as proxyd's handlers hold it: returns the guest app's end and the
  // pipe's owner (null when none came).
  std::pair<int, std::unique_ptr<PipeOwner>> ConnectOnPipe(uint64_t id) {
    host_pipes = true;
    int app = Connect(id);
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return pipes.count(id) != 0; });
    if (pipes.count(id) == 0) return {app, nullptr};
    auto owner = std::make_unique<PipeOwner>(pipes[id]);
    pipes.erase(id);
    return {app, std::move(owner)};
  }

  // Connect opens a guest connection; returns the app's end.
  int Connect(uint64_t id) {
    auto [app, carried] = TcpPair();
    EgressFrame open;
    open.mutable_open()->set_via(agent::v1::EGRESS_FORWARD);
    EXPECT_TRUE(guest->Open(id, carried, &open));
    return app;
  }
  // ConnectOnPair opens guest connection `id` whose host side is a socket
  // pair, as proxyd's handlers hold it: returns the guest app's end and
  // the pair end its owner may hand over (Replace), -1 when none came.
  std::pair<int, int> ConnectOnPair(uint64_t id) {
    host_pairs = true;
    int app = Connect(id);
    return {app, HostApp(id)};
  }
  // HostApp waits for the host side of stream `id`.
  int HostApp(uint64_t id) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait_for(lock, std::chrono::seconds(10), [&] { return host_apps.count(id) != 0; });
    if (host_apps.count(id) == 0) return -1;
    int fd = host_apps[id];
    host_apps.erase(id);
    return fd;
  }

  std::unique_ptr<EgressMux> guest, host;
  // Host streams on socket pairs (as proxyd's handlers have them) instead
  // of TCP pairs.
  bool host_pairs = false;
  // Host streams on pipes (as proxyd's handlers have them now).
  bool host_pipes = false;
  std::atomic<bool> cut{false};
  std::atomic<int> host_resets{0};
  std::atomic<int> guest_resets{0};
  std::atomic<int> guest_eofs{0};

 private:
  void ToHost(const EgressFrame& f) {
    if (f.kind_case() == EgressFrame::kOpen && host_pipes) {
      auto pipe = host->OpenPipe(f.id());
      std::lock_guard<std::mutex> lock(mu);
      pipes[f.id()] = pipe;
      cv.notify_all();
      return;
    }
    if (f.kind_case() == EgressFrame::kOpen) {
      auto [app, carried] = host_pairs ? UnixPair() : TcpPair();
      host->Open(f.id(), carried);
      std::lock_guard<std::mutex> lock(mu);
      host_apps[f.id()] = app;
      cv.notify_all();
      return;
    }
    if (f.kind_case() == EgressFrame::kEof) guest_eofs++;
    host->Deliver(f);
  }

  std::mutex mu;
  std::condition_variable cv;
  std::map<uint64_t, int> host_apps;
  std::map<uint64_t, std::shared_ptr<EgressPipe>> pipes;
};

// OwnersLoop stands for an owner's event loop (proxyd's fibers): it runs
// the mux's loop on a thread of its own and counts the waits it is given.
struct OwnersLoop {
  std::thread thread;
  std::atomic<int> waits{0};
  bool refuse = false;
  EgressMuxRunner Runner() {
    EgressMuxRunner r;
    r.start = [this](std::function<void()> fn) {
      if (refuse) return false;
      thread = std::thread(std::move(fn));
      return true;
    };
    r.wait = [this](int fd, int timeout_ms) {
      waits++;
      pollfd p = {fd, POLLIN, 0};
      poll(&p, 1, timeout_ms);
    };
    return r;
  }
  ~OwnersLoop() {
    if (thread.joinable()) thread.join();
  }
};

TEST(EgressMuxTest, AMuxRunByItsOwnersLoopCarriesAndStops) {
  OwnersLoop owner;
  {
    Link link(owner.Runner());
    int guest = link.Connect(1);
    int host = link.HostApp(1);
    ASSERT_GE(host, 0);
    ASSERT_TRUE(WriteAll(guest, "ping"));
    shutdown(guest, SHUT_WR);
    EXPECT_EQ(ReadAll(host), "ping");
    ASSERT_TRUE(WriteAll(host, "pong"));
    shutdown(host, SHUT_WR);
    EXPECT_EQ(ReadAll(guest), "pong");
    close(guest);
    close(host);
    EXPECT_GT(owner.waits.load(), 0);
  }  // Stop returns once the owner's loop has run the mux's to its end
  ASSERT_TRUE(owner.thread.joinable());
  owner.thread.join();
}

TEST(EgressMuxTest, AMuxWhoseOwnerCannotRunItCarriesNothing) {
  OwnersLoop owner;
  owner.refuse = true;
  EgressMux mux([](const EgressFrames&) { return true; }, kEgressWindow, owner.Runner());
  auto [app, carried] = UnixPair();
  EXPECT_FALSE(mux.Open(1, carried));
  char c;
  EXPECT_LE(read(app, &c, 1), 0);  // reset and closed
  close(app);
  mux.Stop();
}

TEST(EgressMuxTest, BytesBothWaysAndHalfClose) {
  Link link;
  int guest = link.Connect(1);
  int host = link.HostApp(1);
  ASSERT_GE(host, 0);
  ASSERT_TRUE(WriteAll(guest, "GET / HTTP/1.1\r\n\r\n"));
  shutdown(guest, SHUT_WR);
  EXPECT_EQ(ReadAll(host), "GET / HTTP/1.1\r\n\r\n");
  // The guest's half-close reached the host; the other way still flows.
  ASSERT_TRUE(WriteAll(host, "HTTP/1.1 200 OK\r\n\r\nhi"));
  close(host);
  EXPECT_EQ(ReadAll(guest), "HTTP/1.1 200 OK\r\n\r\nhi");
  close(guest);
  for (int i = 0; i < 200 && (link.guest->streams() + link.host->streams()) > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(link.guest->streams(), 0u);
  EXPECT_EQ(link.host->streams(), 0u);
}

TEST(EgressMuxTest, ManyMegabytesBothWaysAtOnceArriveWhole) {
  Link link;
  int guest = link.Connect(1);
  int host = link.HostApp(1);
  // Every 8 bytes say where they belong, so a failure says where the
  // bytes it found came from.
  auto numbered = [](size_t n, uint64_t seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i + 8 <= n; i += 8) {
      uint64_t v = (seed << 56) | i;
      memcpy(&s[i], &v, 8);
    }
    return s;
  };
  std::string up = numbered(8 << 20, 1), down = numbered(8 << 20, 2);
  std::string got_up, got_down;
  std::thread w1([&] { WriteAll(guest, up); shutdown(guest, SHUT_WR); });
  std::thread w2([&] { WriteAll(host, down); shutdown(host, SHUT_WR); });
  int down_error = 0;
  std::thread r1([&] { got_down = ReadAll(guest, &down_error); });
  got_up = ReadAll(host);
  r1.join();
  w1.join();
  w2.join();
  auto first_difference = [](const std::string& a, const std::string& b) {
    size_t i = 0;
    while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
    return i;
  };
  auto from = [](const std::string& got, const std::string&, size_t at) {
    at &= ~size_t{7};
    if (at + 8 > got.size()) return std::string("-");
    uint64_t v;
    memcpy(&v, &got[at], 8);
    return std::to_string(v & ((uint64_t{1} << 56) - 1));
  };
  size_t d = first_difference(got_up, up);
  EXPECT_TRUE(got_up == up) << got_up.size() << " bytes, first difference at " << d
                            << ", the bytes there are from " << from(got_up, up, d)
                            << ", 64 KiB later from " << from(got_up, up, d + 65536)
                            << ", 128 KiB later from " << from(got_up, up, d + 131072);
  size_t e = first_difference(got_down, down);
  EXPECT_TRUE(got_down == down) << got_down.size() << " bytes, first difference at " << e
                                << ", the bytes there are from " << from(got_down, down, e)
                                << ", 64 KiB later from " << from(got_down, down, e + 65536)
                                << ", 128 KiB later from " << from(got_down, down, e + 131072)
                                << "; resets from the host " << link.host_resets.load()
                                << ", from the guest " << link.guest_resets.load()
                                << "; the read's error " << down_error;
  close(guest);
  close(host);
}

TEST(EgressMuxTest, AStalledReaderHoldsOnlyItsWindowAndOthersFlow) {
  Link link;
  int stalled_guest = link.Connect(1);
  int stalled_host = link.HostApp(1);
  // Nobody reads the host end of stream 1: the guest's writes stop once
  // the socket buffers and one window are full.
  std::atomic<size_t> sent{0};
  std::thread writer([&] {
    std::string chunk(65536, 'x');
    while (sent < (64u << 20)) {
      ssize_t n = send(stalled_guest, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += n;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  size_t stuck_at = sent.load();
  EXPECT_LT(stuck_at, 16u << 20) << "flow control did not stop the sender";
  // Another stream is not held up behind it.
  int guest = link.Connect(3);
  int host = link.HostApp(3);
  ASSERT_TRUE(WriteAll(guest, "ping"));
  char buf[4];
  ASSERT_EQ(read(host, buf, 4), 4);
  EXPECT_EQ(std::string(buf, 4), "ping");
  // Reading the stalled stream lets everything through.
  shutdown(stalled_guest, SHUT_RD);
  std::thread drain([&] { ReadAll(stalled_host); });
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_GT(sent.load(), stuck_at);
  shutdown(stalled_guest, SHUT_RDWR);  // ends the writer's send with an error
  writer.join();
  drain.join();
  for (int fd : {stalled_guest, stalled_host, guest, host}) close(fd);
}

TEST(EgressMuxTest, AReadOfMoreThanAFrameGoesOutAsFramesOfAtMostTheLargestInOrder) {
  Recorder rec;
  EgressMux mux(rec.send());
  auto [app, carried] = UnixPair();
  int big = 4 << 20;
  setsockopt(app, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  // The whole window is waiting before the mux looks: its reads take up
  // to kEgressMaxRead at once.
  const std::string data = Pattern(kEgressWindow, 3);
  ASSERT_TRUE(WriteAll(app, data));
  ASSERT_TRUE(mux.Open(1, carried));
  std::string got;
  size_t frames = 0;
  for (int i = 0; i < 400 && got.size() < data.size(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    got.clear();
    frames = 0;
    for (const EgressFrame& f : rec.frames()) {
      if (f.kind_case() != EgressFrame::kData) continue;
      EXPECT_LE(f.data().size(), kEgressMaxFrame);
      got += f.data();
      ++frames;
    }
  }
  // The peer gave no credit back: exactly the first window, nothing past.
  EXPECT_EQ(got.size(), data.size());
  EXPECT_TRUE(got == data);
  EXPECT_GE(frames, kEgressWindow / kEgressMaxFrame);
  close(app);
  mux.Stop();
}

TEST(EgressMuxTest, BytesThatCameBeforeAResetInOneBatchAreReadBeforeTheReset) {
  // The loop starts only once the open, the data and the reset are all
  // queued, so one turn applies them together.
  std::function<void()> loop;
  EgressMuxRunner runner;
  runner.start = [&loop](std::function<void()> fn) {
    loop = std::move(fn);
    return true;
  };
  runner.wait = [](int fd, int timeout_ms) {
    pollfd p = {fd, POLLIN, 0};
    poll(&p, 1, timeout_ms);
  };
  Recorder rec;
  EgressMux mux(rec.send(), kEgressWindow, runner);
  auto [app, carried] = TcpPair();
  ASSERT_TRUE(mux.Open(1, carried));
  EgressFrame data;
  data.set_id(1);
  data.set_data("the answer");
  ASSERT_TRUE(mux.Deliver(data));
  EgressFrame reset;
  reset.set_id(1);
  reset.set_reset(true);
  ASSERT_TRUE(mux.Deliver(reset));
  std::thread t(loop);
  int error = 0;
  EXPECT_EQ(ReadAll(app, &error), "the answer");
  EXPECT_EQ(error, ECONNRESET);
  mux.Stop();
  t.join();
  close(app);
}

TEST(EgressMuxTest, ResetIsATcpResetOnTheOtherSide) {
  Link link;
  int guest = link.Connect(1);
  ASSERT_GE(link.HostApp(1), 0);
  link.host->Reset(1);
  int error = 0;
  EXPECT_EQ(ReadAll(guest, &error), "");
  EXPECT_EQ(error, ECONNRESET);
  close(guest);
}

TEST(EgressMuxTest, ResetBeforeCloseIsNeverSentAsEof) {
  // proxyd's handler asks for a reset and then closes its end at once:
  // the guest must see the reset, in every interleaving.
  Link link;
  for (uint64_t id = 1; id < 400; id += 2) {
    int guest = link.Connect(id);
    int host = link.HostApp(id);
    ASSERT_GE(host, 0);
    link.host->Reset(id);
    close(host);
    int error = 0;
    ReadAll(guest, &error);
    ASSERT_EQ(error, ECONNRESET) << "stream " << id;
    close(guest);
  }
  EXPECT_EQ(link.guest_eofs.load(), 0);
}

TEST(EgressMuxTest, ResetOfAStreamNotOpenHereStillReachesThePeer) {
  // A refusal of a stream this side never carried (proxyd over its cap).
  Recorder transport;
  EgressMux refuser(transport.send());
  refuser.Reset(7);
  transport.WaitFor([](const EgressFrame&) { return true; });
  refuser.Stop();
  std::vector<EgressFrames> sent = transport.batches();
  ASSERT_EQ(sent.size(), 1u);
  ASSERT_EQ(sent[0].frames_size(), 1);
  EXPECT_EQ(sent[0].frames(0).id(), 7u);
  EXPECT_TRUE(sent[0].frames(0).reset());
}

TEST(EgressMuxTest, DataPastTheWindowResetsTheStream) {
  Recorder transport;
  EgressMux mux(transport.send());
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  int small = 4096;
  setsockopt(sp[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  int app = sp[0];
  mux.Open(9, sp[1]);
  // The app reads nothing, so the small socket buffer fills and nothing
  // more is credited; the peer then sends more than it was given.
  std::string chunk(kEgressMaxFrame, 'y');
  for (size_t given = 0; given <= kEgressWindow; given += chunk.size()) {
    EgressFrame f;
    f.set_id(9);
    f.set_data(chunk);
    mux.Deliver(f);
  }
  EXPECT_TRUE(transport.WaitFor([](const EgressFrame& f) { return f.id() == 9 && f.reset(); }));
  ReadAll(app);  // ends: the mux closed its end
  close(app);
}

TEST(EgressMuxTest, ABrokenTransportResetsEveryStream) {
  Link link;
  int a = link.Connect(1);
  int b = link.Connect(3);
  int ha = link.HostApp(1), hb = link.HostApp(3);
  link.cut = true;
  ASSERT_TRUE(WriteAll(a, "x"));  // the guest's next send fails
  for (int fd : {a, b}) {
    int error = 0;
    ReadAll(fd, &error);
    EXPECT_EQ(error, ECONNRESET);
    close(fd);
  }
  // Opens after the break are refused at once.
  int late = link.Connect(5);
  int error = 0;
  ReadAll(late, &error);
  EXPECT_EQ(error, ECONNRESET);
  for (int fd : {late, ha, hb}) close(fd);
}

TEST(EgressMuxTest, ABreakWhileABatchFillsUpEndsEveryStreamSafely) {
  // Twenty streams with data at once fill a batch in one turn; the send of
  // that full batch fails mid-turn. Every stream is reset (under ASan, a
  // stream freed while the turn still used it would show here).
  Link link;
  std::vector<int> apps, hosts;
  for (uint64_t id = 1; id < 41; id += 2) {
    apps.push_back(link.Connect(id));
    hosts.push_back(link.HostApp(id));
  }
  link.cut = true;
  std::string chunk(256 * 1024, 'z');
  // The reset can reach an app before its own send does: the send then
  // reports it, and the read sees the end.
  std::vector<int> send_errors;
  for (int fd : apps) {
    ssize_t n = send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    send_errors.push_back(n < 0 ? errno : 0);
  }
  for (size_t i = 0; i < apps.size(); ++i) {
    int error = 0;
    ReadAll(apps[i], &error);
    bool reset = error == ECONNRESET || send_errors[i] == ECONNRESET || send_errors[i] == EPIPE;
    EXPECT_TRUE(reset) << "read " << error << ", send " << send_errors[i];
    close(apps[i]);
  }
  for (int fd : hosts) close(fd);
  for (int i = 0; i < 200 && link.guest->streams() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(link.guest->streams(), 0u);
}

TEST(EgressMuxTest, APeerThatKeepsSendingWhileTheMuxCannotSendIsRefused) {
  std::mutex mu;
  std::condition_variable cv;
  bool release = false;
  EgressMux mux([&](const EgressFrames&) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return release; });
    return true;
  });
  auto [app, carried] = TcpPair();
  ASSERT_TRUE(mux.Open(1, carried));
  ASSERT_TRUE(WriteAll(app, "x"));  // the mux's send now blocks
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EgressFrame f;
  f.set_id(99);
  f.set_data(std::string(1 << 20, 'q'));
  int accepted = 0;
  while (accepted < 1000 && mux.Deliver(f)) accepted++;
  EXPECT_GE(accepted, static_cast<int>(kEgressMaxQueued >> 20) - 2);
  EXPECT_LE(accepted, static_cast<int>(kEgressMaxQueued >> 20) + 2);
  {
    std::lock_guard<std::mutex> lock(mu);
    release = true;
  }
  cv.notify_all();
  // Once the queue drains, frames are taken again.
  bool again = false;
  for (int i = 0; i < 200 && !again; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    EgressFrame small;
    small.set_id(99);
    small.set_window(1);
    again = mux.Deliver(small);
  }
  EXPECT_TRUE(again);
  mux.Stop();
  close(app);
}

TEST(EgressMuxTest, AStreamEndsWhenItsLocalEndIsClosedEvenIfThePeerNeverEnds) {
  // proxyd's handler closed its end of the pair after its response; the
  // guest never sent eof. The stream (and its descriptor) goes anyway.
  Recorder transport;
  EgressMux mux(transport.send());
  int sp[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
  mux.Open(3, sp[1]);
  ASSERT_TRUE(WriteAll(sp[0], "HTTP/1.1 403 Forbidden\r\n\r\n"));
  close(sp[0]);
  ASSERT_TRUE(transport.WaitFor([](const EgressFrame& f) { return f.eof(); }));
  for (int i = 0; i < 400 && mux.streams() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(mux.streams(), 0u);
  mux.Stop();
  // The peer got the bytes and an eof, never a reset.
  std::string data;
  bool eof = false, reset = false;
  for (const auto& f : transport.frames()) {
    data += f.data();
    eof = eof || f.eof();
    reset = reset || f.reset();
  }
  EXPECT_EQ(data, "HTTP/1.1 403 Forbidden\r\n\r\n");
  EXPECT_TRUE(eof);
  EXPECT_FALSE(reset);
}

TEST(EgressMuxTest, AnOpenAfterStopIsResetNotLeaked) {
  EgressMux mux([](const EgressFrames&) { return true; });
  mux.Stop();
  auto [app, carried] = TcpPair();
  EXPECT_FALSE(mux.Open(1, carried));
  int error = 0;
  ReadAll(app, &error);
  EXPECT_EQ(error, ECONNRESET);
  close(app);
}


// An owner's watch (Watch): its transport read on the mux's own loop.
TEST(EgressMuxTest, AWatchRunsOnTheLoopWhileItsDescriptorIsReadableAndWhatItDeliversIsWritten) {
  std::mutex mu;
  std::set<std::thread::id> send_threads, ready_threads;
  EgressMux mux([&](const EgressFrames&) {
    std::lock_guard<std::mutex> lock(mu);
    send_threads.insert(std::this_thread::get_id());
    return true;
  });
  auto [app, carried] = TcpPair();
  ASSERT_TRUE(mux.Open(1, carried));
  int signal[2];
  ASSERT_EQ(pipe2(signal, O_CLOEXEC | O_NONBLOCK), 0);
  // Readable before the watch is set: it runs at once.
  ASSERT_EQ(write(signal[1], "x", 1), 1);
  std::atomic<int> calls{0};
  ASSERT_TRUE(mux.Watch({signal[0]}, [&] {
    {
      std::lock_guard<std::mutex> lock(mu);
      ready_threads.insert(std::this_thread::get_id());
    }
    // Level-triggered: the byte left unread calls it again.
    if (++calls < 3) return EgressMux::Watched::kIdle;
    char c;
    while (read(signal[0], &c, 1) == 1) {
    }
    EgressFrame f;
    f.set_id(1);
    f.set_data("from the transport");
    EXPECT_TRUE(mux.Deliver(std::move(f)));
    return EgressMux::Watched::kIdle;
  }));
  EXPECT_EQ(ReadExactly(app, 18), "from the transport");
  EXPECT_EQ(calls.load(), 3) << "not called while nothing is readable";
  ASSERT_EQ(write(signal[1], "y", 1), 1);
  for (int i = 0; i < 200 && calls.load() < 4; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(calls.load(), 4);
  EXPECT_EQ(ReadExactly(app, 18), "from the transport");
  // Something for the mux to send.
  ASSERT_TRUE(WriteAll(app, "up"));
  auto sent = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return !send_threads.empty();
  };
  for (int i = 0; i < 400 && !sent(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  mux.Stop();
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_EQ(ready_threads.size(), 1u);
  EXPECT_EQ(ready_threads, send_threads) << "the watch ran on the thread that sends";
  close(app);
  close(signal[0]);
  close(signal[1]);
}

TEST(EgressMuxTest, AWatchThatSaysNoMoreIsNotCalledAgainAndAWatchAfterStopIsRefused) {
  EgressMux mux([](const EgressFrames&) { return true; });
  int signal[2];
  ASSERT_EQ(pipe2(signal, O_CLOEXEC | O_NONBLOCK), 0);
  EXPECT_FALSE(mux.Watch({}, [] { return EgressMux::Watched::kIdle; })) << "nothing to watch";
  std::atomic<int> calls{0};
  // Called once when set (nothing readable yet), then for the byte.
  ASSERT_TRUE(mux.Watch({signal[0]}, [&] {
    return ++calls < 2 ? EgressMux::Watched::kIdle : EgressMux::Watched::kDone;
  }));
  ASSERT_EQ(write(signal[1], "x", 1), 1);
  for (int i = 0; i < 400 && calls.load() < 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(calls.load(), 2) << "the byte is still there, but the watch is gone";
  mux.Stop();
  EXPECT_FALSE(mux.Watch({signal[0]}, [] { return EgressMux::Watched::kIdle; }));
  close(signal[0]);
  close(signal[1]);
}

TEST(EgressMuxTest, AWatchWithMorePendingRunsAgainWithoutItsDescriptorAndBetweenTurns) {
  // Nothing is ever readable: only kPending brings the watch back. Each
  // call delivers one frame; the mux writes each out in its own turn.
  EgressMux mux([](const EgressFrames&) { return true; });
  auto [app, carried] = TcpPair();
  ASSERT_TRUE(mux.Open(1, carried));
  int signal[2];
  ASSERT_EQ(pipe2(signal, O_CLOEXEC | O_NONBLOCK), 0);
  std::atomic<int> calls{0};
  std::atomic<int> written_before{-1};
  ASSERT_TRUE(mux.Watch({signal[0]}, [&] {
    int n = ++calls;
    if (n == 3) {
      // The first two calls' bytes went out in the turns between.
      char buf[8];
      written_before = static_cast<int>(recv(app, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT));
    }
    EgressFrame f;
    f.set_id(1);
    f.set_data(std::string(1, static_cast<char>('a' + n - 1)));
    EXPECT_TRUE(mux.Deliver(std::move(f)));
    return n < 5 ? EgressMux::Watched::kPending : EgressMux::Watched::kIdle;
  }));
  EXPECT_EQ(ReadExactly(app, 5), "abcde");
  EXPECT_EQ(calls.load(), 5);
  EXPECT_EQ(written_before.load(), 2);
  mux.Stop();
  close(app);
  close(signal[0]);
  close(signal[1]);
}

namespace replace {

// Done counts the runs of a Replace's end.
struct Done {
  std::atomic<int> runs{0};
  std::function<void()> fn() {
    return [this] { runs++; };
  }
  bool WaitOnce() {
    for (int i = 0; i < 400 && runs.load() == 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return runs.load() == 1;
  }
};

// Owner is how a test's handler holds stream 1 before it hands it over:
// its end of a socket pair, or a pipe.
struct Owner {
  std::function<std::string(size_t)> read_exactly;
  std::function<std::string()> read_all;
  std::function<bool(absl::string_view)> write_all;
  // Replace with `carried` as the stream's new socket.
  std::function<bool(int carried, std::function<void()> done)> hand_over;
};

Owner OnPair(Link& link, int fd) {
  return {[fd](size_t n) { return ReadExactly(fd, n); }, [fd] { return ReadAll(fd); },
          [fd](absl::string_view d) { return WriteAll(fd, d); },
          [&link, fd](int carried, std::function<void()> done) {
            return link.host->Replace(1, fd, carried, std::move(done), std::chrono::seconds(60));
          }};
}

Owner OnPipe(Link& link, PipeOwner* p) {
  return {[p](size_t n) { return p->ReadExactly(n); }, [p] { return p->ReadAll(); },
          [p](absl::string_view d) { return p->WriteAll(d); },
          [&link, p](int carried, std::function<void()> done) {
            p->pipe().SetOwnerWake(nullptr);
            return link.host->Replace(1, -1, carried, std::move(done), std::chrono::seconds(60));
          }};
}

// KeepsEveryByteInOrderBothWays: what either side had not read when the
// owner handed stream 1 over reaches the new socket or the app, in order.
void KeepsEveryByteInOrderBothWays(int app, const Owner& owner) {
  ASSERT_TRUE(WriteAll(app, "GET-ish head|the body the owner never read|"));
  // The owner reads the head only, as a handler reads a request head, and
  // answers before handing over; more arrives while it does.
  EXPECT_EQ(owner.read_exactly(13), "GET-ish head|");
  ASSERT_TRUE(owner.write_all("200 from the owner|"));
  ASSERT_TRUE(WriteAll(app, "sent around the hand-over|"));
  auto [upstream, carried] = TcpPair();
  Done done;
  ASSERT_TRUE(owner.hand_over(carried, done.fn()));
  ASSERT_TRUE(WriteAll(app, "after it"));
  shutdown(app, SHUT_WR);
  std::string big = Pattern(3 << 20, 5);
  std::thread up([&, upstream = upstream] {
    WriteAll(upstream, big);
    shutdown(upstream, SHUT_WR);
  });
  EXPECT_EQ(ReadAll(upstream),
            "the body the owner never read|sent around the hand-over|after it");
  EXPECT_EQ(ReadAll(app), "200 from the owner|" + big);
  up.join();
  EXPECT_TRUE(done.WaitOnce());
  close(upstream);
  close(app);
}

// TheGuestsEndOfStreamReachesTheNewSocket: an end of stream the owner read
// before handing over is passed on to the new socket.
void TheGuestsEndOfStreamReachesTheNewSocket(int app, const Owner& owner) {
  ASSERT_TRUE(WriteAll(app, "all of it"));
  shutdown(app, SHUT_WR);
  EXPECT_EQ(owner.read_all(), "all of it");  // and the end of stream
  auto [upstream, carried] = TcpPair();
  Done done;
  ASSERT_TRUE(owner.hand_over(carried, done.fn()));
  EXPECT_EQ(ReadAll(upstream), "");  // an end of stream, not a hang
  ASSERT_TRUE(WriteAll(upstream, "answer"));
  close(upstream);
  EXPECT_EQ(ReadAll(app), "answer");
  EXPECT_TRUE(done.WaitOnce());
  close(app);
}

}  // namespace replace

TEST(EgressMuxTest, AReplacedStreamKeepsEveryByteInOrderBothWays) {
  Link link;
  auto [app, owner] = link.ConnectOnPair(1);
  ASSERT_GE(owner, 0);
  replace::KeepsEveryByteInOrderBothWays(app, replace::OnPair(link, owner));
}

TEST(EgressMuxTest, TheGuestsEndOfStreamBeforeAReplaceReachesTheNewSocket) {
  Link link;
  auto [app, owner] = link.ConnectOnPair(1);
  ASSERT_GE(owner, 0);
  replace::TheGuestsEndOfStreamReachesTheNewSocket(app, replace::OnPair(link, owner));
}

TEST(EgressMuxTest, AReplacedStreamIdlePastItsLimitIsResetBothWays) {
  Link link;
  auto [app, owner] = link.ConnectOnPair(1);
  ASSERT_GE(owner, 0);
  auto [upstream, carried] = TcpPair();
  replace::Done done;
  ASSERT_TRUE(
      link.host->Replace(1, owner, carried, done.fn(), std::chrono::milliseconds(200)));
  int up_error = 0, app_error = 0;
  EXPECT_EQ(ReadAll(upstream, &up_error), "");
  EXPECT_EQ(up_error, ECONNRESET);
  EXPECT_EQ(ReadAll(app, &app_error), "");
  EXPECT_EQ(app_error, ECONNRESET);
  EXPECT_TRUE(done.WaitOnce());
  close(upstream);
  close(app);
}

TEST(EgressMuxTest, ASecondReplaceOfAStreamIsRefusedAndLeavesTheFirstAlone) {
  Link link;
  auto [app, owner] = link.ConnectOnPair(1);
  ASSERT_GE(owner, 0);
  auto [upstream, carried] = TcpPair();
  replace::Done first, second;
  ASSERT_TRUE(link.host->Replace(1, owner, carried, first.fn(), std::chrono::seconds(60)));
  // Another handler for the same id (a guest that opened it twice).
  auto [other_peer, other_end] = UnixPair();
  auto [other_up, other_carried] = TcpPair();
  ASSERT_TRUE(
      link.host->Replace(1, other_end, other_carried, second.fn(), std::chrono::seconds(60)));
  EXPECT_TRUE(second.WaitOnce());
  int error = 0;
  EXPECT_EQ(ReadAll(other_up, &error), "");
  EXPECT_EQ(error, ECONNRESET);
  EXPECT_EQ(first.runs.load(), 0);
  // The first hand-over still carries the stream.
  ASSERT_TRUE(WriteAll(app, "still mine"));
  shutdown(app, SHUT_WR);
  EXPECT_EQ(ReadAll(upstream), "still mine");
  ASSERT_TRUE(WriteAll(upstream, "answer"));
  close(upstream);
  EXPECT_EQ(ReadAll(app), "answer");
  EXPECT_TRUE(first.WaitOnce());
  close(app);
  close(other_peer);
  close(other_up);
}

TEST(EgressMuxTest, AReplaceOfAnEndedStreamClosesBothAndRunsItsEnd) {
  Link link;
  auto [owner_peer, owner] = UnixPair();
  auto [upstream, carried] = TcpPair();
  replace::Done done;
  ASSERT_TRUE(link.host->Replace(7, owner, carried, done.fn(), std::chrono::seconds(60)));
  EXPECT_TRUE(done.WaitOnce());
  EXPECT_EQ(ReadAll(owner_peer), "");
  int error = 0;
  EXPECT_EQ(ReadAll(upstream, &error), "");
  EXPECT_EQ(error, ECONNRESET);
  close(owner_peer);
  close(upstream);
}

TEST(EgressMuxTest, AReplaceAfterStopRunsItsEndInTheCall) {
  Link link;
  link.host->Stop();
  auto [owner_peer, owner] = UnixPair();
  auto [upstream, carried] = TcpPair();
  replace::Done done;
  EXPECT_FALSE(link.host->Replace(1, owner, carried, done.fn(), std::chrono::seconds(60)));
  EXPECT_EQ(done.runs.load(), 1);
  EXPECT_EQ(ReadAll(owner_peer), "");
  close(owner_peer);
  close(upstream);
}

// Sends 16 MiB on stream 1 of `mux` keeping to the credit it grants, as
// the peer's mux does, and returns the most credit it had at once (0 on a
// reset or when not all arrived).
uint64_t MostCredit(Recorder& rec, EgressMux& mux);

TEST(EgressMuxTest, AStreamWhoseReaderKeepsUpGetsAWiderWindowNeverPastTheMost) {
  Recorder rec;
  EgressMux mux(rec.send(), kEgressMaxWindow);
  uint64_t most = MostCredit(rec, mux);
  EXPECT_GT(most, kEgressWindow);
  EXPECT_LE(most, kEgressMaxWindow);
}

TEST(EgressMuxTest, APeerThatPredatesWideningKeepsTheFirstWindow) {
  Recorder rec;
  EgressMux mux(rec.send());  // its EgressStart said no max_window
  EXPECT_EQ(MostCredit(rec, mux), kEgressWindow);
}

uint64_t MostCredit(Recorder& rec, EgressMux& mux) {
  auto [app, carried] = UnixPair();
  EXPECT_TRUE(mux.Open(1, carried));
  std::atomic<uint64_t> got{0};
  std::thread reader([&, app = app] {
    char buf[65536];
    while (true) {
      ssize_t n = read(app, buf, sizeof(buf));
      if (n <= 0) return;
      got += n;
    }
  });
  // A sender that keeps to its credit, as the peer's mux does.
  const std::string chunk(64 * 1024, 'x');
  const uint64_t total = 16ull << 20;
  uint64_t credit = kEgressWindow, most = credit, sent = 0;
  size_t seen = 0;
  bool reset = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (sent < total && !reset && std::chrono::steady_clock::now() < deadline) {
    if (credit >= chunk.size()) {
      EgressFrame f;
      f.set_id(1);
      f.set_data(chunk);
      EXPECT_TRUE(mux.Deliver(f));
      credit -= chunk.size();
      sent += chunk.size();
      continue;
    }
    std::vector<EgressFrame> frames = rec.frames();
    for (; seen < frames.size(); ++seen) {
      if (frames[seen].kind_case() == EgressFrame::kWindow) credit += frames[seen].window();
      if (frames[seen].kind_case() == EgressFrame::kReset) reset = true;
    }
    most = std::max(most, credit);
    if (credit < chunk.size()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_FALSE(reset);
  EXPECT_EQ(sent, total);
  EgressFrame eof;
  eof.set_id(1);
  eof.set_eof(true);
  EXPECT_TRUE(mux.Deliver(eof));
  reader.join();  // all of it written, then the end
  mux.Stop();
  EXPECT_EQ(got.load(), total);
  close(app);
  return !reset && got.load() == total ? most : 0;
}

TEST(EgressMuxTest, DataPastAWidenedWindowStillResetsTheStream) {
  Recorder rec;
  EgressMux mux(rec.send(), kEgressMaxWindow);
  auto [app, carried] = UnixPair();
  ASSERT_TRUE(mux.Open(1, carried));
  // Fill what the app's socket takes, read it all, so the window widens
  // to the most; then the app stops reading.
  const std::string chunk(64 * 1024, 'x');
  uint64_t credit = kEgressWindow;
  size_t seen = 0;
  for (int round = 0; round < 64; ++round) {
    while (credit >= chunk.size()) {
      EgressFrame f;
      f.set_id(1);
      f.set_data(chunk);
      ASSERT_TRUE(mux.Deliver(f));
      credit -= chunk.size();
      char buf[65536];
      size_t left = chunk.size();
      while (left > 0) {
        ssize_t n = read(app, buf, std::min(sizeof(buf), left));
        ASSERT_GT(n, 0);
        left -= n;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    std::vector<EgressFrame> frames = rec.frames();
    for (; seen < frames.size(); ++seen) {
      if (frames[seen].kind_case() == EgressFrame::kWindow) credit += frames[seen].window();
    }
  }
  ASSERT_GT(credit, kEgressWindow);
  // The app reads no more: exactly the credit is taken, one byte past it
  // is a reset.
  std::string all(credit, 'y');
  EgressFrame f;
  f.set_id(1);
  f.set_data(all);
  ASSERT_TRUE(mux.Deliver(f));
  f.set_data("z");
  ASSERT_TRUE(mux.Deliver(f));
  EXPECT_TRUE(rec.WaitFor([](const EgressFrame& f) { return f.id() == 1 && f.reset(); }));
  mux.Stop();
  close(app);
}

}  // namespace
}  // namespace airlock

namespace airlock {
namespace {

// Pipes: the host side as proxyd's handlers hold it, in memory.

TEST(EgressPipeTest, BytesBothWaysAndHalfCloseWithManyMegabytesBack) {
  Link link;
  auto [guest, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(WriteAll(guest, "GET / HTTP/1.1\r\n\r\n"));
  shutdown(guest, SHUT_WR);
  EXPECT_EQ(owner->ReadAll(), "GET / HTTP/1.1\r\n\r\n");
  // Many windows' worth back: the pipe's bytes leave as the guest credits
  // them, and the owner waits (woken) while the pipe is full.
  std::string big = Pattern(9 << 20, 3);
  std::thread reader([&, guest = guest] { EXPECT_EQ(ReadAll(guest), big); });
  ASSERT_TRUE(owner->WriteAll(big));
  owner->pipe().ShutdownWrite();
  reader.join();
  close(guest);
}

TEST(EgressPipeTest, AnOwnerThatDoesNotReadHoldsThePeerToItsWindow) {
  Link link;
  auto [guest, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  std::atomic<size_t> sent{0};
  std::thread writer([&, guest = guest] {
    std::string chunk(65536, 'x');
    while (sent < (64u << 20)) {
      ssize_t n = send(guest, chunk.data(), chunk.size(), MSG_NOSIGNAL);
      if (n <= 0) return;
      sent += n;
    }
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  size_t stuck_at = sent.load();
  EXPECT_LT(stuck_at, 16u << 20) << "flow control did not stop the sender";
  // Reading lets it all through: the owner's reads are credited back.
  std::atomic<size_t> got{0};
  std::thread drain([&] {
    char buf[65536];
    while (true) {
      ssize_t n = owner->Read(buf, sizeof(buf));
      if (n <= 0) return;
      got += n;
    }
  });
  for (int i = 0; i < 400 && got.load() < (32u << 20); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_GE(got.load(), 32u << 20);
  shutdown(guest, SHUT_RDWR);
  writer.join();
  drain.join();
  close(guest);
}

TEST(EgressPipeTest, AnOwnersWriteIntoAFullPipeSaysEagainAndIsWokenWhenThereIsRoom) {
  Link link;
  auto [guest, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  // The guest reads nothing: one window crosses, the pipe fills behind it.
  std::string chunk(65536, 'y');
  size_t taken = 0;
  for (int round = 0; round < 100; ++round) {
    while (true) {
      ssize_t r = owner->pipe().Write(chunk.data(), chunk.size());
      if (r < 0) break;
      taken += r;
    }
    ASSERT_EQ(errno, EAGAIN);
    // Until the mux takes no more (the guest's socket buffers are full).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!owner->pipe().Writable()) break;
  }
  EXPECT_FALSE(owner->pipe().Writable());
  EXPECT_GE(taken, kEgressPipeBytes);
  EXPECT_LE(taken, kEgressPipeBytes + 16 * kEgressMaxWindow);
  int before = owner->wakes();
  char buf[65536];
  size_t read_back = 0;
  while (read_back < taken / 2) {
    ssize_t n = read(guest, buf, sizeof(buf));
    ASSERT_GT(n, 0);
    read_back += n;
  }
  for (int i = 0; i < 400 && !owner->pipe().Writable(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_TRUE(owner->pipe().Writable());
  EXPECT_GT(owner->wakes(), before);
  close(guest);
}

TEST(EgressPipeTest, AResetEndsThePipeForItsOwnerAndResetsTheGuest) {
  Link link;
  auto [guest, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  link.host->Reset(1);
  char c;
  EXPECT_EQ(owner->Read(&c, 1), 0);  // as a pair whose other end closed
  errno = 0;
  EXPECT_EQ(owner->pipe().Write("x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  int error = 0;
  EXPECT_EQ(ReadAll(guest, &error), "");
  EXPECT_EQ(error, ECONNRESET);
  close(guest);
}

TEST(EgressPipeTest, AnOwnersResetBeforeItClosesIsNeverSentAsEof) {
  Link link;
  for (uint64_t id = 1; id < 200; id += 2) {
    auto [guest, owner] = link.ConnectOnPipe(id);
    ASSERT_NE(owner, nullptr);
    link.host->Reset(id);
    owner->Close();
    int error = 0;
    ReadAll(guest, &error);
    ASSERT_EQ(error, ECONNRESET) << "stream " << id;
    close(guest);
  }
  EXPECT_EQ(link.guest_eofs.load(), 0);
}

TEST(EgressPipeTest, AStreamEndsWhenItsOwnerClosesEvenIfThePeerNeverEnds) {
  Link link;
  auto [guest, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  ASSERT_TRUE(owner->WriteAll("HTTP/1.1 403 Forbidden\r\n\r\n"));
  owner->Close();
  EXPECT_EQ(ReadAll(guest), "HTTP/1.1 403 Forbidden\r\n\r\n");  // an end, not a reset
  for (int i = 0; i < 400 && link.host->streams() > 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(link.host->streams(), 0u);
  EXPECT_EQ(link.host_resets.load(), 0);
  close(guest);
}

TEST(EgressPipeTest, APipeOpenedAfterStopHasEnded) {
  EgressMux mux([](const EgressFrames&) { return true; });
  mux.Stop();
  auto pipe = mux.OpenPipe(1);
  char c;
  EXPECT_EQ(pipe->Read(&c, 1), 0);
  errno = 0;
  EXPECT_EQ(pipe->Write("x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
}

TEST(EgressPipeTest, BytesTheOwnerReadBeforeAHandoverAreCreditedBackToo) {
  // 200 KiB from the peer: the owner reads 60 KiB (less than a credit
  // notice) and hands over; the new socket takes the rest. The peer gets
  // all 200 KiB back as credit, none lost to the handover.
  Recorder transport;
  EgressMux mux(transport.send());
  PipeOwner owner(mux.OpenPipe(1));
  const std::string sent = Pattern(200 * 1024, 9);
  for (size_t off = 0; off < sent.size(); off += kEgressMaxFrame) {
    EgressFrame f;
    f.set_id(1);
    f.set_data(sent.substr(off, kEgressMaxFrame));
    ASSERT_TRUE(mux.Deliver(f));
  }
  EXPECT_EQ(owner.ReadExactly(60 * 1024), sent.substr(0, 60 * 1024));
  auto [upstream, carried] = TcpPair();
  replace::Done done;
  owner.pipe().SetOwnerWake(nullptr);
  ASSERT_TRUE(mux.Replace(1, -1, carried, done.fn(), std::chrono::seconds(60)));
  EXPECT_EQ(ReadExactly(upstream, sent.size() - 60 * 1024), sent.substr(60 * 1024));
  uint64_t credited = 0;
  for (int i = 0; i < 400 && credited < sent.size(); ++i) {
    credited = 0;
    for (const EgressFrame& f : transport.frames()) credited += f.window();
    if (credited < sent.size()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(credited, sent.size());
  close(upstream);
  mux.Stop();
}

TEST(EgressPipeTest, AReplacedPipeKeepsEveryByteInOrderBothWays) {
  Link link;
  auto [app, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  replace::KeepsEveryByteInOrderBothWays(app, replace::OnPipe(link, owner.get()));
}

TEST(EgressPipeTest, TheGuestsEndOfStreamBeforeAReplaceOfAPipeReachesTheNewSocket) {
  Link link;
  auto [app, owner] = link.ConnectOnPipe(1);
  ASSERT_NE(owner, nullptr);
  replace::TheGuestsEndOfStreamReachesTheNewSocket(app, replace::OnPipe(link, owner.get()));
}

}  // namespace
}  // namespace airlock
