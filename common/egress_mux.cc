#include "common/egress_mux.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace airlock {

using agent::v1::EgressFrame;
using agent::v1::EgressFrames;

namespace {

// The epoll set's tags besides the streams' ids: the wake-up descriptor,
// and the owner's watch (no stream is opened with either id).
constexpr uint64_t kWakeTag = 0;
constexpr uint64_t kWatchTag = UINT64_MAX;
// How long a turn waits at most when the owner's watch could not go into
// the epoll set (out of memory for it): its `ready` runs every turn.
constexpr int kWatchPollMs = 20;
// The mux whose watch runs on this thread now: what it passes on is
// applied in the same turn, so it writes no wake-up.
thread_local const EgressMux* watching = nullptr;

// A read of a local socket goes straight into the strings of the data
// frames it becomes (no copy); the strings of the frames a batch sent are
// kept for the next reads of this thread's muxes: at most kSpareFrames of
// about kEgressMaxFrame bytes each, taken whole (a fiber that waits while
// it holds some shares nothing with the next).
constexpr size_t kSpareFrames = 8;
thread_local std::vector<std::string> spare_frames;

std::string TakeFrameBuffer(size_t n) {
  std::string s;
  if (!spare_frames.empty()) {
    s = std::move(spare_frames.back());
    spare_frames.pop_back();
  }
  s.resize(n);  // fills only past what it held before
  return s;
}

void KeepFrameBuffer(std::string&& s) {
  if (spare_frames.size() < kSpareFrames && s.capacity() >= kEgressMaxFrame &&
      s.capacity() <= 2 * kEgressMaxFrame) {
    spare_frames.push_back(std::move(s));
  }
}

void CloseWithReset(int fd) {
  linger l = {1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  close(fd);
}

void SetNonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

EgressFrame Frame(uint64_t id) {
  EgressFrame f;
  f.set_id(id);
  return f;
}

}  // namespace

struct EgressMux::Stream {
  uint64_t id = 0;
  int fd = -1;
  // Or, for an owner in this process, its pipe (fd is -1).
  std::shared_ptr<EgressPipe> pipe;
  bool piped = false;  // in piped_: its owner did something
  // In the epoll set, edge-triggered for both directions once and for
  // all (no epoll_ctl as credit comes and goes). What the edges said:
  // bytes (or an end) may be waiting to be read; the socket hung up
  // both ways; it failed.
  bool registered = false;
  bool local = false;  // an AF_UNIX socket
  bool readable = false;
  bool ends = false;  // the other end's end of stream is queued too
  bool hung_up = false;
  bool failed = false;
  // Toward the peer.
  uint64_t send_credit = kEgressWindow;
  bool read_done = false;  // our eof went out
  // From the peer.
  // What came for fd: written up to out_off; the written prefix is
  // dropped once it is half the buffer (see Apply).
  std::string out;
  size_t out_off = 0;
  bool write_due = false;  // in unwritten_: data came, not yet written
  uint64_t window = kEgressWindow;  // what the peer may have in flight
  uint64_t in_flight = 0;  // received, not yet credited back
  uint64_t written = 0;    // of in_flight, written to fd
  bool peer_eof = false;
  bool shut_wr = false;
  // After a Replace: bytes for the peer read from the old pair (sent
  // within the credit before anything read from fd), bytes at the front
  // of `out` counted as written when they went into the pair, the idle
  // limit and what runs when the stream ends.
  std::string held;
  size_t counted = 0;
  std::chrono::milliseconds idle{0};
  std::chrono::steady_clock::time_point last_active;
  std::function<void()> done;

  ~Stream() {
    if (done) done();
  }
};

EgressMux::EgressMux(Send send, uint32_t widen_to, EgressMuxRunner runner)
    : send_(std::move(send)),
      widen_to_(std::clamp<uint64_t>(widen_to, kEgressWindow, kEgressMaxWindow)),
      runner_(std::move(runner)) {
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kWakeTag;
  if (epoll_fd_ < 0 || wake_fd_ < 0 || epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev) != 0) {
    // Out of descriptors: a mux that carries nothing (every Open is reset).
    stopping_ = true;
    return;
  }
  if (!runner_.start) {
    loop_ = std::thread([this] { Loop(); });
    return;
  }
  ended_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (ended_fd_ < 0) {
    stopping_ = true;
    return;
  }
  running_ = true;
  bool started = runner_.start([this] {
    Loop();
    // Under the lock: once Stop sees the loop ended, nothing here touches
    // the mux again.
    std::lock_guard<std::mutex> lock(run_mu_);
    running_ = false;
    uint64_t one = 1;
    (void)!write(ended_fd_, &one, sizeof(one));
  });
  if (!started) {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    stopping_ = true;
    running_ = false;
  }
}

EgressMux::~EgressMux() {
  Stop();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  if (ended_fd_ >= 0) close(ended_fd_);
}

void EgressMux::Stop() {
  std::call_once(stopped_, [this] {
    {
      std::lock_guard<std::mutex> lock(cmd_mu_);
      stopping_ = true;
    }
    if (loop_.joinable()) {
      Nudge();
      loop_.join();
      return;
    }
    std::unique_lock<std::mutex> lock(run_mu_);
    if (!running_) return;
    Nudge();
    // Through the owner's wait: the caller may be a fiber of the loop
    // that runs the mux, which must go on for the mux to end.
    while (running_) {
      lock.unlock();
      runner_.wait(ended_fd_, -1);
      lock.lock();
    }
  });
}

void EgressMux::Refuse(Command& c) {
  if (c.fd >= 0) CloseWithReset(c.fd);
  if (c.pair_end >= 0) close(c.pair_end);
  if (c.pipe) c.pipe->End();
  if (c.done) c.done();
}

void EgressMux::Nudge() {
  // Written first: a loop that sees the flag finds the count to read (a
  // flag seen before the write would leave the descriptor readable and
  // unread, and the loop's waits would end at once).
  uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
  nudged_ = true;
}

bool EgressMux::Push(Command c) {
  bool wake;
  {
    std::unique_lock<std::mutex> lock(cmd_mu_);
    // Checked with the push: an Open that loses the race with Stop is
    // reset here, never left in a queue no one drains. A pipe's notice
    // and a reset carry nothing and are at most one per stream: past the
    // queue's bound they still go (a refused notice would leave its pipe
    // silent for good, a refused reset would end a stream as an eof).
    bool small = c.kind == Command::kPipe || c.kind == Command::kReset;
    if (stopping_ || (queued_bytes_ > kEgressMaxQueued && !small)) {
      lock.unlock();
      if (c.kind == Command::kOpen || c.kind == Command::kReplace) Refuse(c);
      return false;
    }
    // What it holds in memory: the frame's bytes and the command itself.
    c.bytes = c.frame.ByteSizeLong() + sizeof(Command);
    queued_bytes_ += c.bytes;
    wake = commands_.empty();
    commands_.push_back(std::move(c));
  }
  if (wake && watching != this && !(runner_.wake && runner_.wake())) Nudge();
  return true;
}

bool EgressMux::Watch(std::vector<int> fds, std::function<Watched()> ready) {
  if (fds.empty() || !ready) return false;
  Command c{Command::kWatch};
  c.fds = std::move(fds);
  c.ready = std::move(ready);
  return Push(std::move(c));
}

bool EgressMux::Open(uint64_t id, int fd, const EgressFrame* announce) {
  Command c{Command::kOpen};
  c.id = id;
  c.fd = fd;
  if (announce != nullptr) {
    c.frame = *announce;
    c.frame.set_id(id);
    c.announce = true;
  }
  return Push(std::move(c));
}

std::shared_ptr<EgressPipe> EgressMux::OpenPipe(uint64_t id) {
  auto pipe = std::make_shared<EgressPipe>();
  // Before the open is queued: what the owner does at once is told after
  // it. The notice's command is refused (the pipe ended) once the mux
  // stops, so it never outlives the mux.
  pipe->Attach([this, id] {
    Command c{Command::kPipe};
    c.id = id;
    Push(std::move(c));
  });
  Command c{Command::kOpen};
  c.id = id;
  c.pipe = pipe;
  Push(std::move(c));
  return pipe;
}

bool EgressMux::Replace(uint64_t id, int pair_end, int fd, std::function<void()> done,
                        std::chrono::milliseconds idle) {
  Command c{Command::kReplace};
  c.id = id;
  c.fd = fd;
  c.pair_end = pair_end;
  c.done = std::move(done);
  c.idle = idle;
  return Push(std::move(c));
}

void EgressMux::Reset(uint64_t id) {
  Command c{Command::kReset};
  c.id = id;
  Push(std::move(c));
}

bool EgressMux::Post(EgressFrame frame) {
  Command c{Command::kPost};
  c.frame = std::move(frame);
  return Push(std::move(c));
}

bool EgressMux::Deliver(EgressFrame frame) {
  Command c{Command::kDeliver};
  c.id = frame.id();
  c.frame = std::move(frame);
  return Push(std::move(c));
}

void EgressMux::Close() { Push(Command{Command::kClose}); }

size_t EgressMux::streams() const {
  std::lock_guard<std::mutex> lock(count_mu_);
  return count_;
}

void EgressMux::Loop() {
  epoll_event events[64];
  while (true) {
    // Checked before each wait too: a nested DrainCommands may have taken
    // the wake-up Stop wrote.
    {
      std::lock_guard<std::mutex> lock(cmd_mu_);
      if (stopping_) break;
    }
    int timeout = idle_limits_ ? static_cast<int>(idle_check_every_.count()) : -1;
    if (watch_polled_ && (timeout < 0 || timeout > kWatchPollMs)) timeout = kWatchPollMs;
    if (watch_pending_) timeout = 0;
    if (runner_.wait) {
      // The owner's loop waits on this epoll set (readable when an event
      // is ready) and goes on with its other work meanwhile.
      runner_.wait(epoll_fd_, timeout);
      timeout = 0;
    }
    int n = 0;
    if (!runner_.wait || sockets_ > 0 || !watch_fds_.empty()) {
      n = epoll_wait(epoll_fd_, events, 64, timeout);
      if (n < 0 && errno != EINTR) n = 0;
    } else if (nudged_.exchange(false)) {
      // Only pipes: nothing but the wake-up descriptor is in the set, and
      // it is read only when it was written (proxyd's fibers wake the
      // mux without it, turn after turn).
      events[n++].data.u64 = kWakeTag;
    }
    // The wake-up is taken before the commands: one written after this
    // read has its command still queued, and stays for the next turn.
    // The watch runs before them too: what it passes on is applied now.
    bool watched = watch_polled_ || watch_pending_;
    for (int i = 0; i < n; ++i) {
      if (events[i].data.u64 == kWakeTag) {
        uint64_t count;
        (void)!read(wake_fd_, &count, sizeof(count));
      } else if (events[i].data.u64 == kWatchTag) {
        watched = true;
      }
    }
    if (watched) RunWatch(/*in_turn=*/true);
    DrainCommands();
    if (idle_limits_) ResetIdle();
    {
      std::lock_guard<std::mutex> lock(cmd_mu_);
      if (stopping_) break;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeTag || id == kWatchTag) continue;
      uint32_t got = events[i].events;
      auto it = streams_.find(id);
      if (it == streams_.end()) continue;
      Stream& st = *it->second;
      if (got & (EPOLLIN | EPOLLRDHUP | EPOLLERR | EPOLLHUP)) st.readable = true;
      if (got & (EPOLLRDHUP | EPOLLHUP)) st.ends = true;
      if (got & EPOLLHUP) st.hung_up = true;
      if (got & EPOLLERR) st.failed = true;
      if ((got & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && st.out_off < st.out.size()) WriteTo(st);
      it = streams_.find(id);
      if (it == streams_.end()) continue;
      if (it->second->readable) ReadFrom(*it->second);
      MaybeFinish(id);
    }
    while (!piped_.empty()) {
      std::vector<uint64_t> ids;
      ids.swap(piped_);
      for (uint64_t id : ids) Piped(id);
    }
    while (!credited_.empty()) {
      std::vector<uint64_t> ids;
      ids.swap(credited_);
      for (uint64_t id : ids) {
        auto it = streams_.find(id);
        if (it != streams_.end() && (it->second->readable || it->second->pipe)) {
          ReadFrom(*it->second);
        }
      }
    }
    Flush();
    // A transport that broke during the turn ends every stream now, when
    // no reference to one is held.
    if (broken_ && !closed_) {
      Command close{Command::kClose};
      Apply(close);
    }
    std::lock_guard<std::mutex> lock(count_mu_);
    count_ = streams_.size();
  }
  // Stopping: every stream ends here, with nothing more sent.
  for (auto& [id, s] : streams_) {
    if (s->pipe) {
      s->pipe->End();
    } else {
      CloseWithReset(s->fd);
    }
  }
  streams_.clear();
  std::deque<Command> batch;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    batch.swap(commands_);
  }
  for (Command& c : batch) {
    if (c.kind == Command::kOpen || c.kind == Command::kReplace) Refuse(c);
  }
  std::lock_guard<std::mutex> lock(count_mu_);
  count_ = 0;
}

void EgressMux::DrainCommands() {
  std::deque<Command> batch;
  {
    std::lock_guard<std::mutex> lock(cmd_mu_);
    batch.swap(commands_);
    for (const Command& c : batch) queued_bytes_ -= c.bytes;
  }
  for (Command& c : batch) Apply(c);
  WriteDue();
}

void EgressMux::WriteDue() {
  std::vector<uint64_t> ids;
  ids.swap(unwritten_);
  for (uint64_t id : ids) {
    auto it = streams_.find(id);
    // Ended, or written meanwhile (an eof's write, the socket's room).
    if (it == streams_.end() || !it->second->write_due) continue;
    WriteTo(*it->second);
  }
}

void EgressMux::UnwatchFds() {
  for (int fd : watch_fds_) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  watch_fds_.clear();
  watch_polled_ = false;
}

void EgressMux::ApplyWatch(Command& c) {
  UnwatchFds();
  watch_ready_ = std::move(c.ready);
  for (int fd : c.fds) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kWatchTag;
    if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) == 0) {
      watch_fds_.push_back(fd);
    } else if (errno != EEXIST) {
      // Not in the set (out of memory for it, or not a descriptor epoll
      // takes): looked at every turn instead.
      watch_polled_ = true;
    }
  }
  // Whatever came before the watch was set is read now; this turn's
  // commands were taken already, so what it passes on wakes the next.
  RunWatch(/*in_turn=*/false);
}

void EgressMux::RunWatch(bool in_turn) {
  watch_pending_ = false;
  if (!watch_ready_) return;
  const EgressMux* outer = watching;
  if (in_turn) watching = this;
  Watched result = watch_ready_();
  watching = outer;
  if (result == Watched::kPending) watch_pending_ = true;
  if (result != Watched::kDone) return;
  UnwatchFds();
  watch_ready_ = nullptr;
}

void EgressMux::Apply(Command& c) {
  switch (c.kind) {
    case Command::kOpen: {
      // A socket's stream id tags it in the epoll set: not one of the
      // set's other tags.
      if (closed_ || c.id == kWakeTag || (c.fd >= 0 && c.id == kWatchTag) ||
          streams_.count(c.id) != 0) {
        Refuse(c);
        return;
      }
      auto s = std::make_unique<Stream>();
      s->id = c.id;
      s->fd = c.fd;
      s->pipe = std::move(c.pipe);
      Stream& ref = *s;
      streams_[c.id] = std::move(s);
      if (c.announce) Emit(std::move(c.frame));
      if (ref.pipe) return;
      ++sockets_;
      SetNonBlocking(c.fd);
      Register(ref);
      return;
    }
    case Command::kPipe: {
      auto it = streams_.find(c.id);
      if (it == streams_.end() || !it->second->pipe || it->second->piped) return;
      it->second->piped = true;
      piped_.push_back(c.id);
      return;
    }
    case Command::kReplace:
      ApplyReplace(c);
      return;
    case Command::kReset:
      if (streams_.count(c.id) != 0) {
        Abort(c.id, true);
      } else if (!closed_) {
        EgressFrame f = Frame(c.id);
        f.set_reset(true);
        Emit(std::move(f));
      }
      return;
    case Command::kPost:
      if (!closed_) Emit(std::move(c.frame));
      return;
    case Command::kClose: {
      closed_ = true;
      std::vector<uint64_t> ids;
      for (auto& [id, s] : streams_) ids.push_back(id);
      for (uint64_t id : ids) Abort(id, false);
      return;
    }
    case Command::kWatch:
      ApplyWatch(c);
      return;
    case Command::kDeliver:
      break;
  }
  auto it = streams_.find(c.id);
  if (it == streams_.end()) return;  // ended here; the peer learns or learnt
  Stream& s = *it->second;
  EgressFrame& f = c.frame;
  switch (f.kind_case()) {
    case EgressFrame::kData:
      // Data after an eof, or past the window the peer was given, breaks
      // the protocol: the stream ends.
      if (s.peer_eof || s.in_flight + f.data().size() > s.window) {
        Abort(s.id, true);
        return;
      }
      s.in_flight += f.data().size();
      if (s.pipe) {
        s.pipe->Deliver(std::move(*f.mutable_data()));
        return;
      }
      if (s.out_off == s.out.size()) {
        // Nothing waits (the local reader keeps up): the frame's bytes
        // become the buffer, no copy.
        s.out.swap(*f.mutable_data());
        s.out_off = 0;
      } else {
        // What was written out goes once it is half the buffer: each byte
        // is moved at most once more, and the buffer holds at most twice
        // the window (a slow reader's data is not moved per frame).
        if (s.out_off >= s.out.size() / 2) {
          s.out.erase(0, s.out_off);
          s.out_off = 0;
        }
        s.out.append(f.data());
      }
      if (!s.write_due) {
        s.write_due = true;
        unwritten_.push_back(s.id);
      }
      return;
    case EgressFrame::kEof:
      s.peer_eof = true;
      if (s.pipe) {
        // In order after the bytes: the pipe holds both.
        s.pipe->PeerEof();
        s.shut_wr = true;
        MaybeFinish(s.id);
        return;
      }
      WriteTo(s);
      return;
    case EgressFrame::kReset:
      Abort(s.id, false);
      return;
    case EgressFrame::kWindow:
      if (s.send_credit + f.window() > 2ull * kEgressMaxWindow) {
        Abort(s.id, true);
        return;
      }
      s.send_credit += f.window();
      EmitHeld(s);
      // Read after the commands, never among them: a read that meets the
      // end applies the commands queued since (DrainCommands), which must
      // not overtake the rest of this batch.
      if (s.readable || s.pipe) credited_.push_back(s.id);
      return;
    default:
      return;
  }
}

void EgressMux::ReadFrom(Stream& s) {
  if (s.pipe) {
    ReadPipe(s);
    return;
  }
  constexpr size_t kParts = kEgressMaxRead / kEgressMaxFrame;
  // Until the socket has nothing more (an edge comes with the next
  // bytes), the credit is spent, or the end.
  while (!s.read_done && s.send_credit > 0 && s.held.empty()) {
    size_t want = std::min<uint64_t>(s.send_credit, kEgressMaxRead);
    std::string parts[kParts];
    iovec iov[kParts];
    size_t count = 0;
    for (size_t off = 0; off < want; off += kEgressMaxFrame, ++count) {
      parts[count] = TakeFrameBuffer(std::min(want - off, kEgressMaxFrame));
      iov[count] = {parts[count].data(), parts[count].size()};
    }
    ssize_t n = readv(s.fd, iov, static_cast<int>(count));
    if (n > 0) {
      if (s.idle.count() > 0) s.last_active = std::chrono::steady_clock::now();
      // Every frame takes its bytes before the first Emit (an Emit may
      // send, and a send may wait).
      EgressFrame frames[kParts];
      size_t left = static_cast<size_t>(n), used = 0;
      for (; used < count && left > 0; ++used) {
        size_t k = std::min(left, parts[used].size());
        parts[used].resize(k);
        frames[used] = Frame(s.id);
        frames[used].set_data(std::move(parts[used]));
        left -= k;
      }
      for (size_t i = used; i < count; ++i) KeepFrameBuffer(std::move(parts[i]));
      for (size_t i = 0; i < used; ++i) Emit(std::move(frames[i]));
      s.send_credit -= n;
      // A short read of a local socket took all the bytes it had; only an
      // end of stream may follow them, and then it was in the edge. TCP
      // also stops short at urgent data with more behind it: read on.
      if (static_cast<size_t>(n) < want && !s.ends && s.local) {
        s.readable = false;
        return;
      }
      continue;
    }
    for (size_t i = 0; i < count; ++i) KeepFrameBuffer(std::move(parts[i]));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      s.readable = false;
      return;
    }
    if (n < 0) {
      Abort(s.id, true);
      return;
    }
    EndOfStream(s.id, /*piped=*/false);
    return;
  }
}

void EgressMux::EmitData(uint64_t id, const char* data, size_t n) {
  // Every frame takes its bytes before the first Emit: an Emit may send,
  // and a send that waits lets the owner's other fibers run (proxyd),
  // which may reuse the bytes' buffer.
  EgressFrame frames[kEgressMaxRead / kEgressMaxFrame];
  size_t count = 0;
  for (size_t off = 0; off < n; off += kEgressMaxFrame) {
    frames[count] = Frame(id);
    frames[count++].set_data(data + off, std::min<size_t>(n - off, kEgressMaxFrame));
  }
  for (size_t i = 0; i < count; ++i) Emit(std::move(frames[i]));
}

void EgressMux::EndOfStream(uint64_t id, bool piped) {
  // A Reset asked for before the local end ended comes first (a socket
  // closed, a pipe's owner gone meanwhile, while a send of this turn
  // waited), so a handler's reset is never sent as an eof.
  DrainCommands();
  auto it = streams_.find(id);
  if (it == streams_.end() || (it->second->pipe != nullptr) != piped) return;
  Stream& still = *it->second;
  EgressFrame f = Frame(id);
  f.set_eof(true);
  Emit(std::move(f));
  still.read_done = true;
  still.readable = false;
  MaybeFinish(id);  // may end the stream
}

bool EgressMux::SendOut(Stream& s) {
  while (s.out_off < s.out.size()) {
    ssize_t n = send(s.fd, s.out.data() + s.out_off, s.out.size() - s.out_off, MSG_NOSIGNAL);
    if (n > 0) {
      s.out_off += n;
      // Bytes that went into the pair before a Replace were counted then.
      size_t again = std::min<size_t>(s.counted, n);
      s.counted -= again;
      s.written += n - again;
      if (s.idle.count() > 0) s.last_active = std::chrono::steady_clock::now();
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && errno == EAGAIN;
  }
  return true;
}

void EgressMux::WriteTo(Stream& s) {
  s.write_due = false;
  if (!SendOut(s)) {
    Abort(s.id, true);
    return;
  }
  if (s.out_off == s.out.size()) {
    s.out.clear();
    s.out_off = 0;
  }
  Credit(s);
  if (s.out.empty() && s.peer_eof && !s.shut_wr) {
    shutdown(s.fd, SHUT_WR);
    s.shut_wr = true;
  }
  MaybeFinish(s.id);
}

void EgressMux::Credit(Stream& s) {
  // What was written out is credited back in steps of a quarter of the
  // window: the sender always has at least 3/4 of it (no stall, few
  // frames).
  if (s.written >= s.window / 4) {
    uint64_t grant = s.written;
    // A stream whose local reader takes what comes gets a wider window
    // with each credit, while the mux's budget lasts (a stalled reader
    // earns no credit, so its stream never widens).
    if (s.window < widen_to_ && widened_ < kEgressWideningBudget) {
      uint64_t wider = std::min<uint64_t>(
          {s.window, widen_to_ - s.window, kEgressWideningBudget - widened_});
      s.window += wider;
      widened_ += wider;
      grant += wider;
    }
    EgressFrame f = Frame(s.id);
    f.set_window(static_cast<uint32_t>(grant));
    Emit(std::move(f));
    s.in_flight -= s.written;
    s.written = 0;
  }
}

void EgressMux::Piped(uint64_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end() || !it->second->pipe) return;
  Stream& s = *it->second;
  s.piped = false;
  s.written += s.pipe->Look();
  Credit(s);
  ReadPipe(s);
  MaybeFinish(id);
}

void EgressMux::ReadPipe(Stream& s) {
  // Like a socket's read (ReadFrom), but the bytes are taken from the
  // pipe: a frame of up to kEgressMaxFrame takes the pipe's buffer whole
  // when that is all there is.
  std::string took;
  while (!s.read_done && s.held.empty()) {
    bool ended = false;
    size_t want = std::min<uint64_t>(s.send_credit, kEgressMaxRead);
    s.pipe->Take(want, &took, &ended);
    if (!took.empty()) {
      if (s.idle.count() > 0) s.last_active = std::chrono::steady_clock::now();
      s.send_credit -= took.size();
      if (took.size() <= kEgressMaxFrame) {
        EgressFrame f = Frame(s.id);
        f.mutable_data()->swap(took);
        Emit(std::move(f));
      } else {
        EmitData(s.id, took.data(), took.size());
      }
    }
    if (ended) {
      EndOfStream(s.id, /*piped=*/true);
      return;
    }
    // Nothing more now, or the credit is spent (the peer's window frame
    // reads again).
    if (took.empty() || s.send_credit == 0) return;
  }
}

void EgressMux::MaybeFinish(uint64_t id) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  if (!s.read_done) return;
  if (s.pipe) {
    // The owner's end went out; done once the peer's reached the pipe
    // (the owner reads the rest from there) or the owner is gone.
    if (!s.shut_wr && !s.pipe->OwnerGone()) return;
    s.pipe->Attach(nullptr);
    Forget(it);
    return;
  }
  if (s.shut_wr) {
    close(s.fd);  // both ways done: a clean close
    Forget(it);
    return;
  }
  // Our eof went out and the local end is gone both ways: nothing more
  // can be carried here. A local error (the guest's app reset) is passed
  // on; a plain close (proxyd's handler closed its end of the pair) is
  // not, so the peer still delivers all it has.
  if (!(s.hung_up || s.failed) || s.out_off < s.out.size()) return;
  if (s.failed) {
    Abort(id, true);
    return;
  }
  close(s.fd);
  Forget(it);
}

void EgressMux::Forget(std::map<uint64_t, std::unique_ptr<Stream>>::iterator it) {
  widened_ -= it->second->window - kEgressWindow;
  if (!it->second->pipe) --sockets_;
  streams_.erase(it);
}

void EgressMux::Abort(uint64_t id, bool tell_peer) {
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  Stream& s = *it->second;
  if (s.pipe) {
    // The owner reads what came before, then the end.
    s.pipe->End();
  } else {
    // Bytes that came before the reset in the same batch go to the socket
    // first, as when each frame was written on arrival: an app reads what
    // was queued before it sees the reset. As much as the socket takes now.
    if (s.write_due) (void)SendOut(s);
    CloseWithReset(s.fd);  // also leaves the epoll set
  }
  Forget(it);
  if (tell_peer && !closed_) {
    EgressFrame f = Frame(id);
    f.set_reset(true);
    Emit(std::move(f));
  }
}

void EgressMux::Register(Stream& s) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = s.id;
  int domain = 0;
  socklen_t len = sizeof(domain);
  s.local = getsockopt(s.fd, SOL_SOCKET, SO_DOMAIN, &domain, &len) == 0 && domain == AF_UNIX;
  s.registered = epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, s.fd, &ev) == 0;
  if (!s.registered) Abort(s.id, true);  // never left waiting for an event
}

void EgressMux::Emit(EgressFrame f) {
  if (broken_) return;
  outbox_bytes_ += f.ByteSizeLong() + 8;
  *outbox_.add_frames() = std::move(f);
  if (outbox_bytes_ >= kEgressMaxBatch) Flush();
}

void EgressMux::Flush() {
  if (broken_ || outbox_.frames_size() == 0) return;
  // The transport broke: nothing more can reach the peer. The streams end
  // at the end of the loop's turn (callers may hold one).
  if (!send_(outbox_)) broken_ = true;
  for (EgressFrame& f : *outbox_.mutable_frames()) {
    if (f.kind_case() == EgressFrame::kData) KeepFrameBuffer(std::move(*f.mutable_data()));
  }
  outbox_.Clear();
  outbox_bytes_ = 0;
}

void EgressMux::ApplyReplace(Command& c) {
  auto it = streams_.find(c.id);
  // The socket goes into the epoll set under the stream's id: not the
  // watch's tag (a pipe's id may be any the peer chose).
  if (closed_ || it == streams_.end() || c.id == kWatchTag) {
    Refuse(c);
    return;
  }
  Stream& s = *it->second;
  if (s.done || (!s.pipe && c.pair_end < 0)) {
    // Handed over already: this Replace is not about the pipe or socket
    // pair the stream carries (its owner never held it).
    Refuse(c);
    return;
  }
  // `unread`: what came for the owner that it did not read, which goes to
  // fd first. What the owner wrote that the mux did not take goes to the
  // peer first (held).
  std::string unread;
  if (s.pipe) {
    std::string unsent;
    // What the owner read and the mux has not yet credited is credited
    // with the first write to fd (WriteTo, below).
    s.written += s.pipe->Look();
    s.pipe->Detach(&unread, &unsent);
    s.pipe.reset();
    ++sockets_;
    s.piped = false;
    if (!s.read_done) s.held = std::move(unsent);
    // Bytes in a pipe count as written once the owner reads them: these
    // count when fd takes them.
    s.counted = 0;
  } else {
    DrainPair(s, c.pair_end, &unread);
    // Counted as written when they went into the pair.
    s.counted = unread.size();
  }
  SetNonBlocking(c.fd);
  s.fd = c.fd;
  s.registered = false;
  s.readable = false;
  s.ends = false;
  s.hung_up = false;
  s.failed = false;
  s.out = unread + s.out.substr(s.out_off);
  s.out_off = 0;
  // The peer's end of stream went into the pair or pipe; it goes to fd
  // once out is written.
  s.shut_wr = false;
  s.done = std::move(c.done);
  s.idle = c.idle;
  s.last_active = std::chrono::steady_clock::now();
  if (s.idle.count() > 0) {
    idle_check_every_ = std::min(idle_check_every_, s.idle);
    if (!idle_limits_) next_idle_check_ = s.last_active + idle_check_every_;
    idle_limits_ = true;
  }
  EmitHeld(s);
  Register(s);
  if (streams_.count(c.id) != 0) WriteTo(s);
}

void EgressMux::DrainPair(Stream& s, int pair_end, std::string* unread) {
  SetNonBlocking(pair_end);
  // What the owner wrote before handing over is all in the mux's end now
  // (a socket pair's write lands in the other end at once), and what the
  // mux wrote that the owner did not read is all in the owner's end.
  static thread_local std::string buf;
  buf.resize(kEgressMaxFrame);
  auto drain = [](int fd, std::string* into) {
    while (true) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return;
      into->append(buf.data(), n);
    }
  };
  if (!s.read_done) drain(s.fd, &s.held);
  drain(pair_end, unread);
  if (s.registered) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s.fd, nullptr);
  close(s.fd);
  close(pair_end);
}

void EgressMux::EmitHeld(Stream& s) {
  size_t off = 0;
  while (off < s.held.size() && s.send_credit > 0) {
    size_t k = std::min<size_t>({s.held.size() - off, s.send_credit, kEgressMaxFrame});
    EgressFrame f = Frame(s.id);
    f.set_data(s.held.data() + off, k);
    Emit(std::move(f));
    s.send_credit -= k;
    off += k;
  }
  s.held.erase(0, off);
}

void EgressMux::ResetIdle() {
  auto now = std::chrono::steady_clock::now();
  if (now < next_idle_check_) return;
  next_idle_check_ = now + idle_check_every_;
  std::vector<uint64_t> idle;
  for (auto& [id, s] : streams_) {
    if (s->idle.count() > 0 && now - s->last_active >= s->idle) idle.push_back(id);
  }
  for (uint64_t id : idle) Abort(id, true);
}

}  // namespace airlock
