// EgressMux carries many byte streams over one ordered message transport:
// the sandbox's egress tunnel (common/egress_transport.h), where every
// guest connection is a stream. Both ends use it: the guest agent with the
// guest's sockets, proxyd with an EgressPipe per connection (its handler
// reads and writes it like a socket; the bytes stay in memory).
//
// What it holds:
// - Flow control per stream: each side sends at most its window (from
//   kEgressWindow, widened by the receiver up to kEgressMaxWindow) bytes
//   of a stream beyond what the other side has written out and credited
//   back, so one slow reader never holds more than that in memory and one
//   stream cannot stall the others on the shared transport. A peer that
//   sends past its window has its stream reset.
// - Half-close (eof) and reset both ways; a local socket that fails or is
//   reset is reset on the other side too.
// - One thread reads and writes every local socket (epoll, edge-triggered)
//   and sends each turn's frames as one batch; nothing blocks on a single
//   stream. proxyd runs that loop as a fiber beside the connections'
//   handlers instead (EgressMuxRunner), so bytes between the two do not
//   cross threads.
// - Handing over (Replace): proxyd's handler, once all that is left of a
//   connection is copying bytes to an upstream socket, gives that socket
//   to the mux in place of the pair, so a tunnel's bytes cross one thread
//   and no pair; the bytes either side had not yet read are kept, in
//   order.
// Where it stops: it does not decide anything. Which streams are opened,
// and what runs on them, is its owner's call. A reset closes the local
// socket with SO_LINGER 0: a TCP reset on the guest's sockets, but to
// proxyd's handlers an end of stream (a pipe's, or a socket pair's close).
#ifndef AIRLOCK_COMMON_EGRESS_MUX_H_
#define AIRLOCK_COMMON_EGRESS_MUX_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/egress_pipe.h"
#include "protos/agent/v1/agent.pb.h"

namespace airlock {

// Bytes of one stream a side may have in flight toward the other: at
// first, and at most once the receiver has widened the window of a
// stream whose local reader takes what comes (a wide window needs fewer
// credits, and every credit is a wake-up on both sides). The widening a
// mux gives all its streams together is bounded, so what a peer can make
// it hold is at most kEgressWindow per stream plus kEgressWideningBudget
// (in buffers of up to twice that: a stream's buffer keeps the bytes
// already written out until they are half of it, so each byte is moved
// at most once more).
inline constexpr uint32_t kEgressWindow = 256 * 1024;
inline constexpr uint32_t kEgressMaxWindow = 1024 * 1024;
inline constexpr uint64_t kEgressWideningBudget = 32 * 1024 * 1024;
// Largest data frame, and about the largest batch, the mux sends.
inline constexpr size_t kEgressMaxFrame = 64 * 1024;
// Largest read of a local socket: what it brings goes out as frames of
// kEgressMaxFrame. Four frames a read when bytes come faster than the
// peer takes them (a download), so a read's system call is paid per
// 256 KiB, not per 64.
inline constexpr size_t kEgressMaxRead = 256 * 1024;
inline constexpr size_t kEgressMaxBatch = 1024 * 1024;
// Bytes of frames waiting for the mux's thread past which the mux takes no
// more (Deliver and Post return false): a peer that keeps sending while
// the mux cannot send (the peer does not read) cannot grow it further.
inline constexpr size_t kEgressMaxQueued = 96 * 1024 * 1024;

// EgressMuxRunner says how a mux runs its loop when its owner has an event
// loop of its own (proxyd's fibers): `start` runs the function it is given
// to its end somewhere (false when it cannot, and the mux then carries
// nothing), and `wait` waits until descriptor `fd` is readable or
// `timeout_ms` (-1: no limit) has passed, without holding up that event
// loop (Stop waits for the loop's end through it too, so a fiber of that
// event loop may stop the mux). Both empty: a thread of the mux's own,
// blocking in epoll_wait.
// `wake` (may be empty) ends the loop's `wait` without a descriptor when
// it can from where it is called (a fiber of the same event loop): true
// when it did; else the mux writes its wake-up descriptor.
struct EgressMuxRunner {
  std::function<bool(std::function<void()>)> start;
  std::function<void(int fd, int timeout_ms)> wait;
  std::function<bool()> wake;
};

class EgressMux {
 public:
  // Send hands a batch to the transport, false when the transport broke.
  // Called on the mux's thread only, one batch at a time; it may block
  // (the transport's flow control), which pauses the mux, never the peer.
  using Send = std::function<bool(const agent::v1::EgressFrames&)>;
  // `widen_to`: the widest window the peer accepts credit for (its
  // EgressStart.max_window, at most kEgressMaxWindow); kEgressWindow (a
  // peer that predates widening) leaves every window as it is.
  explicit EgressMux(Send send, uint32_t widen_to = kEgressWindow, EgressMuxRunner runner = {});
  // Stops (see Stop).
  ~EgressMux();
  EgressMux(const EgressMux&) = delete;
  EgressMux& operator=(const EgressMux&) = delete;

  // Open carries the connected socket `fd` (the mux owns it from here) as
  // stream `id`. With `announce`, that frame (an open) is sent first.
  // False, with `fd` reset and closed, when the mux is stopped or closed
  // or `id` is in use.
  bool Open(uint64_t id, int fd, const agent::v1::EgressFrame* announce = nullptr);
  // OpenPipe carries stream `id` to an owner in this process: the pipe
  // it returns is the owner's end (egress_pipe.h). The owner's wake runs
  // on the mux's thread. When the mux is stopped or closed, or `id` is in
  // use, the pipe it returns has ended (its Read says 0).
  std::shared_ptr<EgressPipe> OpenPipe(uint64_t id);
  // Replace carries the connected socket `fd` as stream `id` in place of
  // the socket pair it carried so far, `pair_end` being the other end of
  // that pair (its owner's): bytes written to `pair_end` before the call
  // reach the peer first, and bytes the mux wrote to the pair that were
  // not read from `pair_end` reach `fd` first. The owner must not have
  // ended its writing (no shutdown of `pair_end`). Both descriptors are
  // the mux's from the call on. A stream opened with OpenPipe passes
  // `pair_end` -1: its pipe's unread bytes are kept the same way, and the
  // owner makes no call on the pipe after this one. `done` runs once, on the mux's thread,
  // when the stream has ended; a stream idle (no byte either way) for
  // `idle` is reset. When `id` is not carried (it ended) both are closed
  // and `done` runs; when the mux is stopped, that happens in this call,
  // which returns false.
  bool Replace(uint64_t id, int pair_end, int fd, std::function<void()> done,
               std::chrono::milliseconds idle);
  // Reset aborts stream `id` both ways: the peer gets a reset frame (also
  // when the stream is not open here, so a peer waiting on it learns),
  // the local socket is closed with a reset. A socket closed after its
  // Reset is never reported to the peer as an eof.
  void Reset(uint64_t id);
  // Post sends a frame that is not about a stream (a DNS question or
  // answer) in order with the rest. False when the mux is stopped or its
  // queue is over kEgressMaxQueued.
  bool Post(agent::v1::EgressFrame frame);
  // Deliver passes on a stream frame from the transport (data, eof,
  // reset, window). Frames for streams that have ended are dropped. False
  // as for Post: the owner should then end the transport.
  bool Deliver(agent::v1::EgressFrame frame);
  // Watch has the mux's loop run `ready` once when it is set and then in
  // every turn in which one of `fds` is readable (level-triggered), before
  // the turn's commands are applied: what `ready` passes on (Deliver,
  // Post, Reset) is applied in that turn, with no wake-up. An owner reads
  // its transport there instead of on a thread of its own, so a message's
  // frames reach their sockets on the thread that reads it. `ready` says
  // whether it is done for good (kDone: not called again), waits for a
  // descriptor (kIdle), or stopped with more to take (kPending: called
  // again in the next turn, which does not wait), so one turn takes a
  // bounded share. It must not wait itself. One watch at a time (a new
  // one replaces it); false when the mux is stopped or `fds` is empty.
  // The descriptors stay the caller's, open until Stop returned.
  enum class Watched { kDone, kIdle, kPending };
  bool Watch(std::vector<int> fds, std::function<Watched()> ready);
  // Close resets every stream and refuses new ones (the transport ended).
  void Close();
  // Stop closes and waits for the mux's loop to end; Send is never called
  // after it returns. Idempotent. Never from the mux's own loop (a Send,
  // a stream's `done`).
  void Stop();

  // Streams carried now.
  size_t streams() const;

 private:
  struct Stream;
  struct Command {
    // kPipe: the owner of stream `id`'s pipe wrote, read or ended.
    enum Kind { kOpen, kReplace, kReset, kPost, kDeliver, kClose, kPipe, kWatch } kind;
    uint64_t id = 0;
    int fd = -1;
    std::shared_ptr<EgressPipe> pipe;  // kOpen of a pipe
    // kReplace: the owner's end of the pair, what runs at the end, and
    // the idle limit.
    int pair_end = -1;
    std::function<void()> done;
    std::chrono::milliseconds idle{0};
    agent::v1::EgressFrame frame;
    bool announce = false;
    size_t bytes = 0;  // counted against kEgressMaxQueued
    // kWatch: the descriptors and what runs when one is readable.
    std::vector<int> fds;
    std::function<Watched()> ready;
  };

  void Loop();
  // Refuse drops a command the loop will never apply: its sockets reset
  // and closed, its pipe ended, its end run.
  static void Refuse(Command& c);
  // Piped handles what a pipe's owner did (kPipe): credit for what it
  // read, its bytes and end for the peer, its close.
  void Piped(uint64_t id);
  // Push queues `c` for the loop; false (an Open's fd reset) when the mux
  // is stopping or the queue is full.
  bool Push(Command c);
  // Nudge writes the wake-up descriptor (and says so in nudged_).
  void Nudge();
  // DrainCommands applies every queued command (loop thread), then
  // writes what the batch's data frames brought (WriteDue).
  void DrainCommands();
  // WriteDue writes each stream the batch gave data to, once: a batch's
  // frames of one stream go to its socket in one send, not one each.
  void WriteDue();
  void Apply(Command& c);
  // ApplyWatch puts a watch's descriptors in the epoll set in place of the
  // last one's; RunWatch runs its `ready` and drops it when that says so
  // (`in_turn`: before the turn's DrainCommands, which applies what it
  // passed on without a wake-up).
  void ApplyWatch(Command& c);
  // UnwatchFds takes the watch's descriptors out of the epoll set.
  void UnwatchFds();
  void RunWatch(bool in_turn);
  void ApplyReplace(Command& c);
  // DrainPair moves what is in the socket pair a Replace ends: the
  // owner's unsent bytes to s.held, the ones it did not read to `unread`,
  // and closes both ends.
  void DrainPair(Stream& s, int pair_end, std::string* unread);
  // EmitHeld sends what a stream holds for the peer, within its credit.
  void EmitHeld(Stream& s);
  // ResetIdle resets the streams idle past their limit (every few
  // seconds, once a stream has a limit).
  void ResetIdle();
  // ReadFrom reads what a stream's socket has, within its credit. Never
  // called while DrainCommands applies a batch: at an end of stream it
  // applies the commands queued since, which would overtake the rest.
  void ReadFrom(Stream& s);
  // ReadPipe takes what a pipe's owner wrote, within the credit, and its
  // end of stream.
  void ReadPipe(Stream& s);
  // EmitData sends `n` bytes of stream `id` a pipe's owner wrote, as
  // frames of at most kEgressMaxFrame.
  void EmitData(uint64_t id, const char* data, size_t n);
  // EndOfStream sends stream `id`'s eof once the local end (a socket, or a
  // pipe when `piped`) ended, after the commands queued before it.
  void EndOfStream(uint64_t id, bool piped);
  void WriteTo(Stream& s);
  // Credit gives the peer back what was written out (or read from a
  // pipe), in steps of a quarter of the window.
  void Credit(Stream& s);
  // SendOut writes what `s` holds for its socket, as much as the socket
  // takes now; false when the socket failed (not merely full).
  bool SendOut(Stream& s);
  // Finish closes a stream when both directions are done.
  void MaybeFinish(uint64_t id);
  // Abort closes the local socket with a reset; `tell_peer` sends a reset.
  void Abort(uint64_t id, bool tell_peer);
  // Forget erases a stream, giving back its widening.
  void Forget(std::map<uint64_t, std::unique_ptr<Stream>>::iterator it);
  // Register adds a stream's socket to the epoll set (or resets it).
  void Register(Stream& s);
  void Emit(agent::v1::EgressFrame f);
  void Flush();

  Send send_;
  const uint64_t widen_to_;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  // The wake-up descriptor was written since the loop last looked.
  std::atomic<bool> nudged_{false};

  // Commands from other threads, applied by the loop.
  std::mutex cmd_mu_;
  std::deque<Command> commands_;
  size_t queued_bytes_ = 0;
  bool stopping_ = false;

  // Loop thread only.
  std::map<uint64_t, std::unique_ptr<Stream>> streams_;
  bool closed_ = false;
  size_t sockets_ = 0;  // streams on a socket (in the epoll set), not a pipe
  // The owner's watch (Watch): its descriptors, in the epoll set, and
  // what runs when one is readable. `watch_polled_`: the set did not take
  // them, so `watch_ready_` runs every turn and a turn waits at most
  // kWatchPollMs. `watch_pending_`: it stopped with more to take, so it
  // runs in the next turn, which does not wait.
  std::vector<int> watch_fds_;
  std::function<Watched()> watch_ready_;
  bool watch_polled_ = false;
  bool watch_pending_ = false;
  uint64_t widened_ = 0;      // of kEgressWideningBudget, given to streams
  std::vector<uint64_t> credited_;  // streams with new credit and bytes to read
  std::vector<uint64_t> unwritten_;  // streams with data to write (WriteDue)
  std::vector<uint64_t> piped_;  // pipes whose owner did something (kPipe)
  bool idle_limits_ = false;  // some stream has an idle limit
  std::chrono::milliseconds idle_check_every_{5000};  // at most the least limit
  std::chrono::steady_clock::time_point next_idle_check_;

  // Frames for the transport, sent as one batch at the end of each turn
  // of the loop (or when a batch is full).
  agent::v1::EgressFrames outbox_;
  size_t outbox_bytes_ = 0;
  bool broken_ = false;

  mutable std::mutex count_mu_;
  size_t count_ = 0;

  std::once_flag stopped_;
  EgressMuxRunner runner_;
  std::thread loop_;
  // With a runner: whether its loop runs (or has not yet ended).
  // A loop its owner runs: whether it runs, and its end's signal (an
  // eventfd, readable once it ended) for Stop to wait on.
  std::mutex run_mu_;
  bool running_ = false;
  int ended_fd_ = -1;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_EGRESS_MUX_H_
