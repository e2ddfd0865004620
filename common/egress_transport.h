// The egress tunnel's wire form, on the sandbox's egress port after the
// channel's hello (common/channel_hello.h): each message is a 4-byte
// big-endian length and that many bytes of one serialized
// agent.v1.EgressFrames (a batch of common/egress_mux.h's frames). Nothing
// else: no gRPC, no HTTP/2, no thread of its own. The mux already does
// what those would add (per-stream flow control, resets, ordering), and on
// this path each of their thread hand-offs cost more than the bytes.
//
// proxyd's first message holds `start`; the agent answers with an empty
// message once the CA is installed and the tunnel is live. One tunnel at a
// time per port; while there is none, guest connections are reset at once
// and DNS queries get no answer.
//
// Where it stops: the peer is not trusted. A length over kEgressMaxMessage,
// more than kEgressMaxFramesPerMessage frames (counted on the wire, before
// anything is parsed) or bytes that do not parse end the transport
// (error() says which), so one message costs at most about those bounds.
// What the frames mean is the mux's to check.
#ifndef AIRLOCK_COMMON_EGRESS_TRANSPORT_H_
#define AIRLOCK_COMMON_EGRESS_TRANSPORT_H_

#include <poll.h>
#include <sys/uio.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "protos/agent/v1/agent.pb.h"

namespace airlock {

// The largest message either side accepts: well above a mux batch
// (kEgressMaxBatch plus one frame), far below what would hurt.
inline constexpr size_t kEgressMaxMessage = 4 << 20;
// The most frames one message may hold: far above a real batch (the mux
// sends one frame per stream and kind in a turn, with at most a few
// hundred streams), far below what a flood of empty frames would cost.
inline constexpr int kEgressMaxFramesPerMessage = 16384;

// A data frame's bytes that belong in an encoding at offset `at` of its
// own bytes: they are not copied there.
struct EgressDataRef {
  size_t at;
  const std::string* data;
};

class EgressTransport {
 public:
  // Takes `fd` (a connected stream socket, or the guest's virtio port) and
  // closes it when destroyed; `pending` are bytes already read from it
  // past the hello. The fd is made non-blocking; waits are polls that
  // Shutdown ends.
  explicit EgressTransport(int fd, std::string pending = "");
  ~EgressTransport();
  EgressTransport(const EgressTransport&) = delete;
  EgressTransport& operator=(const EgressTransport&) = delete;

  // Write sends one message whole, waiting while the peer does not read.
  // On a socket the bytes of large data frames go from the message itself
  // (no copy into a buffer first).
  // False once the transport broke, was shut down, or the message is over
  // the limits. One writer at a time (a reader may run beside it).
  bool Write(const agent::v1::EgressFrames& message);
  // Read takes the next message. False at the peer's end, on an error, on
  // Shutdown, when the peer broke the framing, or (the transport ended)
  // when nothing whole arrived by `deadline`. One reader at a time.
  bool Read(agent::v1::EgressFrames* message,
            std::chrono::steady_clock::time_point deadline =
                std::chrono::steady_clock::time_point::max());
  // TryRead is Read without waiting: kMessage (in `message`), kNothing
  // (no whole message has come yet: wait for fd() to be readable), or
  // kEnded (as when Read returns false).
  enum class Got { kMessage, kNothing, kEnded };
  Got TryRead(agent::v1::EgressFrames* message);
  // What an owner that waits on its own (TryRead) waits for: the
  // transport's descriptor, readable when bytes came, and one readable
  // once Shutdown was called.
  int fd() const { return fd_; }
  int shutdown_fd() const { return wake_; }
  // Shutdown makes Read and Write return false from now on, from any
  // thread, waking them when they wait; a socket is shut down both ways,
  // so its peer sees the end at once.
  void Shutdown();
  // Why the transport ended ("" while it has not).
  std::string error() const;
  // UsePoll makes every wait of this transport go through `poll_fn` (same
  // contract as poll(2)) instead of poll(2): an owner with an event loop of
  // its own (proxyd's fibers) gives one that does not hold that loop up.
  // Before the first Read or Write.
  void UsePoll(int (*poll_fn)(pollfd*, nfds_t, int)) { poll_ = poll_fn; }
  // How many times Read has waited for the peer so far: a reader that
  // sees it unchanged over many messages is being kept busy. The reader's
  // thread only.
  uint64_t read_waits() const { return read_waits_; }

 private:
  // Wait polls the fd for `events` and the wake-up; false when shut down,
  // the peer hung up or `deadline` passed.
  bool Wait(short events, std::chrono::steady_clock::time_point deadline);
  // Reserve makes room for `n` bytes from in_start_ (compacting, or
  // growing the buffer); nothing is zero-filled.
  void Reserve(size_t n);
  void Fail(const std::string& why);
  // WriteGathered is Write's body: it leaves refs_ and iov_ pointing into
  // `message`, which Write clears.
  bool WriteGathered(const agent::v1::EgressFrames& message);
  // TakeMessage parses the next whole message in the buffer: 1, 0 when it
  // is not whole yet (`need`: the bytes it takes from in_start_), -1 when
  // it broke the framing (the transport ended).
  int TakeMessage(agent::v1::EgressFrames* message, size_t* need);
  // ReadMore reads what the descriptor has: 1 (some, or interrupted), 0
  // (nothing now), -1 (the end or an error: the transport ended).
  int ReadMore(size_t need);

  int fd_;
  int wake_;  // eventfd: Shutdown's wake-up
  int (*poll_)(pollfd*, nfds_t, int) = ::poll;
  bool socket_ = false;  // send with MSG_NOSIGNAL; else write (a virtio port)
  std::unique_ptr<char[]> in_;
  size_t in_cap_ = 0, in_start_ = 0, in_end_ = 0;
  uint64_t read_waits_ = 0;
  // The message being written: its own bytes, and where in them the data
  // of large frames goes (a socket's write gathers those from where they
  // are, EncodeEgressPieces).
  std::string out_;
  std::vector<EgressDataRef> refs_;
  std::vector<iovec> iov_;
  std::atomic<bool> down_{false};
  mutable std::mutex mu_;
  std::string error_;
};

// Encode appends `message`'s wire form (length and bytes) to `out`; false
// when it is over the limits. For tests and fuzzing.
bool EncodeEgressMessage(const agent::v1::EgressFrames& message, std::string* out);

// EncodeEgressPieces is EncodeEgressMessage without copying the bytes of
// data frames of kEgressReferencedData or more: `out` gets everything
// else, `refs` (appended to, in order) where each such frame's bytes go.
// Laid end to end they are exactly EncodeEgressMessage's bytes. The refs
// point into `message`, which must outlive them.
inline constexpr size_t kEgressReferencedData = 4096;
bool EncodeEgressPieces(const agent::v1::EgressFrames& message, std::string* out,
                        std::vector<EgressDataRef>* refs);

// CountEgressFrames counts the `frames` fields of a serialized
// EgressFrames at its top level without parsing them; -1 when the bytes
// are not a well-formed message.
int CountEgressFrames(const char* data, size_t n);

}  // namespace airlock

#endif  // AIRLOCK_COMMON_EGRESS_TRANSPORT_H_
