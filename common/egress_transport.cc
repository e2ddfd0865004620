#include "common/egress_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <climits>
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

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  for (; v >= 0x80; v >>= 7) ++n;
  return n;
}

void PutVarint(std::string* out, uint64_t v) {
  for (; v >= 0x80; v >>= 7) out->push_back(static_cast<char>(v | 0x80));
  out->push_back(static_cast<char>(v));
}

void PutLength(uint8_t* p, size_t n) {
  p[0] = static_cast<uint8_t>(n >> 24);
  p[1] = static_cast<uint8_t>(n >> 16);
  p[2] = static_cast<uint8_t>(n >> 8);
  p[3] = static_cast<uint8_t>(n);
}

// Wire tags of agent.v1.EgressFrames and EgressFrame (field << 3 | type).
constexpr char kStartTag = 1 << 3 | 2;
constexpr char kFrameTag = 2 << 3 | 2;
constexpr char kIdTag = 1 << 3 | 0;
constexpr char kDataTag = 3 << 3 | 2;

// AppendSerialized appends `m`, whose size was cached, as field `tag`.
void AppendSerialized(char tag, const google::protobuf::MessageLite& m, std::string* out) {
  size_t n = m.GetCachedSize();
  out->push_back(tag);
  PutVarint(out, n);
  size_t at = out->size();
  out->resize(at + n);
  m.SerializeWithCachedSizesToArray(reinterpret_cast<uint8_t*>(&(*out)[at]));
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
  PutLength(p, n);
  message.SerializeWithCachedSizesToArray(p + 4);
  return true;
}

bool EncodeEgressPieces(const agent::v1::EgressFrames& message, std::string* out,
                        std::vector<EgressDataRef>* refs) {
  // The fields in the order the serializer writes them (start, then the
  // frames); ByteSizeLong has cached every frame's size.
  size_t n = message.ByteSizeLong();
  if (n > kEgressMaxMessage || message.frames_size() > kEgressMaxFramesPerMessage) return false;
  size_t at = out->size();
  size_t first_ref = refs->size();
  size_t referenced = 0;
  out->resize(at + 4);
  if (message.has_start()) AppendSerialized(kStartTag, message.start(), out);
  for (const agent::v1::EgressFrame& f : message.frames()) {
    size_t size = f.GetCachedSize();
    if (f.kind_case() == agent::v1::EgressFrame::kData &&
        f.data().size() >= kEgressReferencedData) {
      size_t d = f.data().size();
      size_t own = (f.id() != 0 ? 1 + VarintSize(f.id()) : 0) + 1 + VarintSize(d);
      // Only the id and the data: anything else (unknown fields) takes
      // the serializer's way.
      if (own + d == size) {
        out->push_back(kFrameTag);
        PutVarint(out, size);
        if (f.id() != 0) {
          out->push_back(kIdTag);
          PutVarint(out, f.id());
        }
        out->push_back(kDataTag);
        PutVarint(out, d);
        refs->push_back({out->size(), &f.data()});
        referenced += d;
        continue;
      }
    }
    AppendSerialized(kFrameTag, f, out);
  }
  if (out->size() - at - 4 + referenced != n) {
    // Fields the walk above does not know (a message with unknown fields):
    // the serializer's bytes, whole.
    out->resize(at);
    refs->resize(first_ref);
    return EncodeEgressMessage(message, out);
  }
  PutLength(reinterpret_cast<uint8_t*>(&(*out)[at]), n);
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
  bool sent = WriteGathered(message);
  // What pointed into `message` is not kept past the call.
  refs_.clear();
  iov_.clear();
  return sent;
}

bool EgressTransport::WriteGathered(const agent::v1::EgressFrames& message) {
  if (down_) return false;
  out_.clear();
  refs_.clear();
  // A socket's write gathers the bytes of large data frames from where
  // they are; a virtio port takes every write as a buffer of its own (and
  // a notice to the host), so it gets one copy, in one write.
  bool encoded =
      socket_ ? EncodeEgressPieces(message, &out_, &refs_) : EncodeEgressMessage(message, &out_);
  if (!encoded) {
    Fail(absl::StrCat("a message of ", message.ByteSizeLong(), " bytes and ",
                      message.frames_size(), " frames is over the limits (", kEgressMaxMessage,
                      " bytes, ", kEgressMaxFramesPerMessage, " frames)"));
    return false;
  }
  iov_.clear();
  size_t from = 0;
  for (const EgressDataRef& r : refs_) {
    if (r.at > from) iov_.push_back({&out_[from], r.at - from});
    iov_.push_back({const_cast<char*>(r.data->data()), r.data->size()});
    from = r.at;
  }
  if (from < out_.size()) iov_.push_back({&out_[from], out_.size() - from});
  size_t next = 0;  // the first iovec not yet written whole
  while (next < iov_.size()) {
    if (down_) return false;
    // A socket whose peer left must fail the write, not signal the process.
    ssize_t n;
    if (socket_) {
      msghdr m{};
      m.msg_iov = &iov_[next];
      m.msg_iovlen = std::min<size_t>(iov_.size() - next, IOV_MAX);
      n = sendmsg(fd_, &m, MSG_NOSIGNAL);
    } else {
      n = write(fd_, iov_[next].iov_base, iov_[next].iov_len);
    }
    if (n > 0) {
      for (size_t left = static_cast<size_t>(n); left > 0;) {
        size_t k = std::min(left, iov_[next].iov_len);
        iov_[next].iov_base = static_cast<char*>(iov_[next].iov_base) + k;
        iov_[next].iov_len -= k;
        left -= k;
        if (iov_[next].iov_len == 0) ++next;
      }
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

int EgressTransport::TakeMessage(agent::v1::EgressFrames* message, size_t* need) {
  size_t have = in_end_ - in_start_;
  *need = 4;
  if (have < 4) return 0;
  const auto* p = reinterpret_cast<const uint8_t*>(in_.get() + in_start_);
  size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
  if (n > kEgressMaxMessage) {
    Fail(absl::StrCat("the peer sent a message of ", n, " bytes, over the limit of ",
                      kEgressMaxMessage));
    return -1;
  }
  *need = 4 + n;
  if (have < *need) return 0;
  const char* body = in_.get() + in_start_ + 4;
  in_start_ += *need;
  // Counted before parsing: 4 MiB of empty frames would otherwise be
  // two million objects.
  int frames = CountEgressFrames(body, n);
  if (frames < 0) {
    Fail("the peer sent a message that does not parse");
    return -1;
  }
  if (frames > kEgressMaxFramesPerMessage) {
    Fail(absl::StrCat("the peer sent a message of ", frames, " frames, over the limit of ",
                      kEgressMaxFramesPerMessage));
    return -1;
  }
  if (!message->ParseFromArray(body, static_cast<int>(n))) {
    Fail("the peer sent a message that does not parse");
    return -1;
  }
  if (in_start_ == in_end_) in_start_ = in_end_ = 0;
  return 1;
}

int EgressTransport::ReadMore(size_t need) {
  // Room for the rest of this message, and a chunk more when it is short.
  Reserve(std::max(need, kReadChunk));
  ssize_t r = read(fd_, in_.get() + in_end_, in_cap_ - in_end_);
  if (r > 0) {
    in_end_ += static_cast<size_t>(r);
    return 1;
  }
  if (r == 0) {
    Fail("the peer closed the tunnel");
    return -1;
  }
  if (errno == EINTR) return 1;
  if (errno == EAGAIN) return 0;
  Fail(absl::StrCat("read: ", strerror(errno)));
  return -1;
}

bool EgressTransport::Read(agent::v1::EgressFrames* message,
                           std::chrono::steady_clock::time_point deadline) {
  while (!down_) {
    size_t need;
    int took = TakeMessage(message, &need);
    if (took != 0) return took > 0;
    int got = ReadMore(need);
    if (got < 0) return false;
    if (got == 0) {
      ++read_waits_;
      if (!Wait(POLLIN, deadline)) return false;
    }
  }
  return false;
}

EgressTransport::Got EgressTransport::TryRead(agent::v1::EgressFrames* message) {
  while (!down_) {
    size_t need;
    int took = TakeMessage(message, &need);
    if (took != 0) return took > 0 ? Got::kMessage : Got::kEnded;
    int got = ReadMore(need);
    if (got < 0) return Got::kEnded;
    if (got == 0) return Got::kNothing;
  }
  return Got::kEnded;
}

}  // namespace airlock
