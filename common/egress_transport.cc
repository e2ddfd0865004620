#include "common/egress_transport.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cstdint>

#include "absl/strings/str_cat.h"

namespace airlock {

namespace {

// Bytes asked of one read: a whole batch in a few calls.
constexpr size_t kReadChunk = 256 * 1024;

}  // namespace

bool EncodeEgressMessage(const agent::v1::EgressFrames& message, std::string* out) {
  size_t n = message.ByteSizeLong();
  if (n > kEgressMaxMessage) return false;
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
    : fd_(fd), wake_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)), in_(std::move(pending)) {
  int flags = fcntl(fd_, F_GETFL);
  if (flags >= 0) fcntl(fd_, F_SETFL, flags | O_NONBLOCK);
  if (wake_ < 0) Fail(absl::StrCat("eventfd: ", strerror(errno)));
}

EgressTransport::~EgressTransport() {
  if (fd_ >= 0) close(fd_);
  if (wake_ >= 0) close(wake_);
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
  if (wake_ >= 0) {
    uint64_t one = 1;
    ssize_t unused = write(wake_, &one, sizeof(one));
    (void)unused;
  }
}

bool EgressTransport::Wait(short events) {
  while (!down_) {
    pollfd p[2] = {{fd_, events, 0}, {wake_, POLLIN, 0}};
    int r = poll(p, 2, -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) {
      Fail(absl::StrCat("poll: ", strerror(errno)));
      return false;
    }
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
    Fail(absl::StrCat("a message of ", message.ByteSizeLong(), " bytes is over the limit of ",
                      kEgressMaxMessage));
    return false;
  }
  size_t off = 0;
  while (off < out_.size()) {
    if (down_) return false;
    ssize_t n = write(fd_, out_.data() + off, out_.size() - off);
    if (n > 0) {
      off += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      if (!Wait(POLLOUT)) return false;
      continue;
    }
    Fail(n == 0 ? "the peer stopped reading" : absl::StrCat("write: ", strerror(errno)));
    return false;
  }
  return true;
}

bool EgressTransport::Read(agent::v1::EgressFrames* message) {
  while (!down_) {
    size_t have = in_.size() - in_off_;
    if (have >= 4) {
      const auto* p = reinterpret_cast<const uint8_t*>(in_.data() + in_off_);
      size_t n = (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | p[3];
      if (n > kEgressMaxMessage) {
        Fail(absl::StrCat("the peer sent a message of ", n, " bytes, over the limit of ",
                          kEgressMaxMessage));
        return false;
      }
      if (have >= 4 + n) {
        bool parsed = message->ParseFromArray(in_.data() + in_off_ + 4, static_cast<int>(n));
        in_off_ += 4 + n;
        if (!parsed) {
          Fail("the peer sent a message that does not parse");
          return false;
        }
        return true;
      }
    }
    // Room for the rest of this message (or a chunk): what was consumed
    // goes first, so the buffer stays about one message long.
    if (in_off_ > 0) {
      in_.erase(0, in_off_);
      in_off_ = 0;
    }
    size_t at = in_.size();
    in_.resize(at + kReadChunk);
    ssize_t r = read(fd_, &in_[at], kReadChunk);
    in_.resize(at + (r > 0 ? static_cast<size_t>(r) : 0));
    if (r > 0) continue;
    if (r == 0) {
      Fail("the peer closed the tunnel");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno == EAGAIN) {
      if (!Wait(POLLIN)) return false;
      continue;
    }
    Fail(absl::StrCat("read: ", strerror(errno)));
    return false;
  }
  return false;
}

}  // namespace airlock
