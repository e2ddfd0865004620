#include "common/egress_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace airlock {

namespace {

// Bytes asked of one read: a whole batch in a few calls.
constexpr size_t kReadChunk = 256 * 1024;
// The write buffer kept between messages: above a mux batch (about 1 MiB),
// so a bulk transfer reuses it instead of allocating one per batch.
constexpr size_t kKeptWriteBuffer = 2 << 20;

// ReadVarint reads a base-128 varint at `*p` (before `end`); false when it
// runs past `end` or over 10 bytes.
bool ReadVarint(const uint8_t** p, const uint8_t* end, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 70 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    *v |= uint64_t{b & 0x7fu} << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

int CountEgressFrames(const char* data, size_t n) {
  const auto* p = reinterpret_cast<const uint8_t*>(data);
  const uint8_t* end = p + n;
  int frames = 0;
  while (p < end) {
    uint64_t tag, len;
    if (!ReadVarint(&p, end, &tag)) return -1;
    switch (tag & 7) {
      case 0:
        if (!ReadVarint(&p, end, &len)) return -1;
        break;
      case 1:
        if (end - p < 8) return -1;
        p += 8;
        break;
      case 2:
        if (!ReadVarint(&p, end, &len) || len > static_cast<uint64_t>(end - p)) return -1;
        p += len;
        if ((tag >> 3) == 2) ++frames;
        break;
      case 5:
        if (end - p < 4) return -1;
        p += 4;
        break;
      default:
        return -1;  // groups and unknown wire types: not a message of ours
    }
  }
  return frames;
}

bool EncodeEgressMessage(const agent::v1::EgressFrames& message, std::string* out) {
  size_t n = message.ByteSizeLong();
  if (n > kEgressMaxMessage || message.frames_size() > kEgressMaxFramesPerMessage) return false;
  size_t at = out->size();
  out->resize(at + 4 + n);
  auto* p = reinterpret_cast<uint8_t*>(&(*out)[at]);
  p[0] = static_cast<uint8_t>(n >> 24);
  p[1] = static_cast<uint8_t>(n >> 16);
  p[2] = static_cast<uint8_t>(n >> 8);
  p[3] = static_cast<uint8_t>(n);
  message.SerializeWithCachedSizesToArray(p + 4);
  return true;
}

EgressTransport::EgressTransport(int fd, std::string pending)
    : fd_(fd), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
  int flags = fcntl(fd_, F_GETFL);
  if (flags >= 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  struct stat st;
  socket_ = fstat(fd_, &st) == 0 && S_ISSOCK(st.st_mode);
  if (wake_ < 0) Fail(absl::StrCat("eventfd: ", strerror(errno)));
  Reserve(std::max(pending.size(), kReadChunk));
  memcpy(in_.get(), pending.data(), pending.size());
  in_end_ = pending.size();
}

EgressTransport::~EgressTransport() {
  if (fd_ >= 0) close(fd_);
  if (wake_ >= 0) close(wake_);
}

void EgressTransport::Reserve(size_t n) {
  if (in_cap_ - in_start_ >= n) return;
  // Compact first; grow only when the data does not fit.
  size_t have = in_end_ - in_start_;
  if (in_cap_ >= n) {
    memmove(in_.get(), in_.get() + in_start_, have);
  } else {
    std::unique_ptr<char[]> bigger(new char[n]);
    if (have > 0) memcpy(bigger.get(), in_.get() + in_start_, have);
    in_ = std::move(bigger);
    in_cap_ = n;
  }
  in_start_ = 0;
  in_end_ = have;
}

void EgressTransport::Fail(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_.empty()) error_ = why;
  }
  down_ = true;
}

std::string EgressTransport::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void EgressTransport::Shutdown() {
  Fail("shut down");
  // A socket's peer learns at once (its end closes even while this object
  // lives on); a virtio port has no such end, and fails here harmlessly.
  shutdown(fd_, SHUT_RDWR);
  if (wake_ >= 0) {
    uint64_t one = 1;
    ssize_t unused = write(wake_, &one, sizeof(one));
    (void)unused;
  }
}

bool EgressTransport::Wait(short events, std::chrono::steady_clock::time_point deadline) {
  while (!down_) {
    int timeout = -1;
    if (deadline != std::chrono::steady_clock::time_point::max()) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        Fail("the peer did not answer in time");
        return false;
      }
      timeout = static_cast<int>(std::min<int64_t>(left.count() + 1, 1 << 30));
    }
    pollfd p[2] = {{fd_, events, 0}, {wake_, POLLIN, 0}};
    int r = poll_(p, 2, timeout);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      Fail(absl::StrCat("poll: ", strerror(errno)));
      return false;
    }
    if (r == 0) continue;  // the deadline is checked above
    if (p[1].revents != 0) return false;
    // Readable data is taken before a hang-up is believed.
    if (p[0].revents & events) return true;
    if (p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) {
      Fail("the peer hung up");
      return false;
    }
  }
  return false;
}

bool EgressTransport::Write(const agent::v1::EgressFrames& message) {
  if (down_) return false;
  out_.clear();
  if (!EncodeEgressMessage(message, &out_)) {
    Fail(absl::StrCat("a message of ", message.ByteSizeLong(), " bytes and ",
                      message.frames_size(), " frames is over the limits (", kEgressMaxMessage,
                      " bytes, ", kEgressMaxFramesPerMessage, " frames)"));
    return false;
  }
  size_t off = 0;
  while (off < out_.size()) {
    if (down_) return false;
    // A socket whose peer left must fail the write, not signal the process.
    ssize_t n = socket_ ? send(fd_, out_.data() + off, out_.size() - off, MSG_NOSIGNAL)
                        : write(fd_, out_.data() + off, out_.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!Wait(POLLOUT, std::chrono::steady_clock::time_point::max())) return false;
      continue;
    }
    Fail(n == 0 ? "the peer stopped reading" : absl::StrCat("write: ", strerror(errno)));
    return false;
  }
  // Only an unusually large message's buffer is given back.
  if (out_.capacity() > kKeptWriteBuffer) std::string().swap(out_);
  return true;
}

bool EgressTransport::Read(agent::v1::EgressFrames* message,
                           std::chrono::steady_clock::time_point deadline) {
  while (!down_) {
    size_t have = in_end_ - in_start_;
    size_t need = 4;
    if (have >= 4) {
      const auto* p = reinterpret_cast<const uint8_t*>(in_.get() + in_start_);
      size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
      if (n > kEgressMaxMessage) {
        Fail(absl::StrCat("the peer sent a message of ", n, " bytes, over the limit of ",
                          kEgressMaxMessage));
        return false;
      }
      need = 4 + n;
      if (have >= need) {
        const char* body = in_.get() + in_start_ + 4;
        in_start_ += need;
        // Counted before parsing: 4 MiB of empty frames would otherwise be
        // two million objects.
        int frames = CountEgressFrames(body, n);
        if (frames < 0) {
          Fail("the peer sent a message that does not parse");
          return false;
        }
        if (frames > kEgressMaxFramesPerMessage) {
          Fail(absl::StrCat("the peer sent a message of ", frames, " frames, over the limit of ",
                            kEgressMaxFramesPerMessage));
          return false;
        }
        if (!message->ParseFromArray(body, static_cast<int>(n))) {
          Fail("the peer sent a message that does not parse");
          return false;
        }
        if (in_start_ == in_end_) in_start_ = in_end_ = 0;
        return true;
      }
    }
    // Room for the rest of this message, and a chunk more when it is short.
    Reserve(std::max(need, kReadChunk));
    ssize_t r = read(fd_, in_.get() + in_end_, in_cap_ - in_end_);
    if (r > 0) {
      in_end_ += static_cast<size_t>(r);
      continue;
    }
    if (r == 0) {
      Fail("the peer closed the tunnel");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      ++read_waits_;
      if (!Wait(POLLIN, deadline)) return false;
      continue;
    }
    Fail(absl::StrCat("read: ", strerror(errno)));
    return false;
  }
  return false;
}

}  // namespace airlock
