// EgressPipe is the local end of one mux stream (egress_mux.h) when that
// end's owner lives in the mux's own process: proxyd's connection
// handlers. The stream's bytes pass between the mux and the owner in
// memory, where a socket pair cost each request four system calls and two
// wake-ups through the kernel.
//
// The owner reads and writes it like a non-blocking socket: Read says
// EAGAIN when nothing has come yet, Write takes what fits (at most
// kEgressPipeBytes wait for the mux) and says EAGAIN when full. Each time
// the owner may go on (bytes, room, the end) the mux runs the owner's
// wake (SetOwnerWake); the owner checks Readable or Writable before it
// waits, so a wake that comes while it does not wait is not needed.
//
// Flow control is the mux's, as for a socket: the peer may send a
// stream's window beyond what the owner has read, and the owner's bytes
// leave the pipe as the peer gives credit.
//
// Where it stops: it decides nothing, and it is no socket. A stream the
// mux resets (or a mux that stops) looks to the owner like a socket pair
// whose other end closed: Read ends (0), Write fails (EPIPE). Both sides
// may run on different threads (each call takes the pipe's lock), but
// the owner's wake runs on the mux's thread, under that lock: it must
// only signal, never call the pipe nor take a lock its owner holds while
// calling the pipe (proxyd's wakes a fiber of the loop both share).
#ifndef AIRLOCK_COMMON_EGRESS_PIPE_H_
#define AIRLOCK_COMMON_EGRESS_PIPE_H_

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>

namespace airlock {

// Bytes the owner may have written that the mux has not taken: about a
// socket pair's buffer.
inline constexpr size_t kEgressPipeBytes = 256 * 1024;

class EgressMux;

class EgressPipe {
 public:
  EgressPipe() = default;
  EgressPipe(const EgressPipe&) = delete;
  EgressPipe& operator=(const EgressPipe&) = delete;

  // The owner's side.
  //
  // Read takes up to `n` bytes the peer sent: > 0; 0 at the end (the
  // peer's end of stream, or the stream ended here); -1 with errno EAGAIN
  // when nothing has come yet.
  ssize_t Read(char* buf, size_t n);
  // Peek is Read without taking the bytes.
  ssize_t Peek(char* buf, size_t n) const;
  // Write queues up to `n` bytes for the peer: how many it took; -1 with
  // errno EAGAIN when kEgressPipeBytes wait already, EPIPE when the owner
  // shut its writing or the stream ended.
  ssize_t Write(const char* data, size_t n);
  // ShutdownWrite sends the owner's end of stream after what it wrote.
  void ShutdownWrite();
  // Readable: Read would not say EAGAIN. Writable: Write would not.
  bool Readable() const;
  bool Writable() const;
  // SetOwnerWake sets (or, empty, clears) what runs each time the owner
  // may go on.
  void SetOwnerWake(std::function<void()> wake);
  // Close says the owner is gone (its end closed): what it wrote is still
  // sent, then the end of stream; what comes for it is dropped. The owner
  // makes no call after it.
  void Close();

 private:
  friend class EgressMux;

  // The mux's side (EgressMux, on its thread).
  //
  // Attach connects the pipe to stream `notify`'s mux: `notify` runs
  // (under the lock) when the owner wrote, read or ended, once until the
  // mux looks (Look).
  void Attach(std::function<void()> notify);
  // Look clears the notice, so the owner's next change notifies again,
  // and returns the bytes the owner read since the last Look (what the
  // mux credits back to the peer).
  uint64_t Look();
  // Deliver adds the peer's bytes, taking `data`'s buffer when nothing
  // waits. PeerEof: the peer's end of stream, after them.
  void Deliver(std::string&& data);
  void PeerEof();
  // Take moves up to `max` of the owner's bytes into `into` (cleared
  // first); `ended` says whether the owner's end of stream follows what
  // is left (nothing left: it is the next thing to send).
  void Take(size_t max, std::string* into, bool* ended);
  // OwnerGone: the owner closed (Close).
  bool OwnerGone() const;
  // End ends the stream for the owner (a reset, or the mux's stop):
  // Read ends, Write fails, and the mux is not notified again.
  void End();
  // Detach is End after a Replace: the unread bytes of each way move out
  // (the peer's to `unread`, the owner's to `unsent`).
  void Detach(std::string* unread, std::string* unsent);

  // CopyLocked is Peek under the lock.
  ssize_t CopyLocked(char* buf, size_t n) const;
  void WakeOwnerLocked();
  void NotifyMuxLocked();

  mutable std::mutex mu_;
  // The peer's bytes: read up to in_off_.
  std::string in_;
  size_t in_off_ = 0;
  bool in_eof_ = false;
  uint64_t consumed_ = 0;  // read since the mux's last Look
  // The owner's bytes, not yet taken by the mux.
  std::string out_;
  bool out_eof_ = false;
  bool owner_gone_ = false;
  bool ended_ = false;
  bool noticed_ = false;  // the mux was notified and has not looked
  bool owner_full_ = false;  // a Write found no room
  std::function<void()> owner_wake_;
  std::function<void()> notify_;
};

}  // namespace airlock

#endif  // AIRLOCK_COMMON_EGRESS_PIPE_H_
