#include "common/egress_pipe.h"

#include <errno.h>
#include <string.h>

#include <algorithm>
#include <utility>

#include "common/egress_mux.h"

namespace airlock {

namespace {

// Bytes read by the owner after which the mux is told (to credit them
// back): the mux credits in steps of a quarter of a window, so telling it
// sooner would only wake it for nothing.
constexpr uint64_t kCreditNotice = kEgressWindow / 4;

}  // namespace

void EgressPipe::WakeOwnerLocked() {
  if (owner_wake_) owner_wake_();
}

void EgressPipe::NotifyMuxLocked() {
  if (noticed_ || !notify_) return;
  noticed_ = true;
  notify_();
}

ssize_t EgressPipe::CopyLocked(char* buf, size_t n) const {
  size_t have = in_.size() - in_off_;
  if (have == 0) {
    if (in_eof_ || ended_) return 0;
    errno = EAGAIN;
    return -1;
  }
  size_t k = std::min(n, have);
  memcpy(buf, in_.data() + in_off_, k);
  return static_cast<ssize_t>(k);
}

ssize_t EgressPipe::Read(char* buf, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  ssize_t r = CopyLocked(buf, n);
  if (r <= 0) return r;
  size_t k = static_cast<size_t>(r);
  in_off_ += k;
  if (in_off_ == in_.size()) {
    in_.clear();
    in_off_ = 0;
  }
  consumed_ += k;
  if (consumed_ >= kCreditNotice) NotifyMuxLocked();
  return static_cast<ssize_t>(k);
}

ssize_t EgressPipe::Peek(char* buf, size_t n) const {
  std::lock_guard<std::mutex> lock(mu_);
  return CopyLocked(buf, n);
}

ssize_t EgressPipe::Write(const char* data, size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (ended_ || out_eof_ || owner_gone_) {
    errno = EPIPE;
    return -1;
  }
  if (n == 0) return 0;
  if (out_.size() >= kEgressPipeBytes) {
    owner_full_ = true;
    errno = EAGAIN;
    return -1;
  }
  size_t k = std::min(n, kEgressPipeBytes - out_.size());
  out_.append(data, k);
  NotifyMuxLocked();
  return static_cast<ssize_t>(k);
}

void EgressPipe::ShutdownWrite() {
  std::lock_guard<std::mutex> lock(mu_);
  if (out_eof_) return;
  out_eof_ = true;
  NotifyMuxLocked();
}

bool EgressPipe::Readable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return in_off_ < in_.size() || in_eof_ || ended_;
}

bool EgressPipe::Writable() const {
  std::lock_guard<std::mutex> lock(mu_);
  return out_.size() < kEgressPipeBytes || ended_ || out_eof_;
}

void EgressPipe::SetOwnerWake(std::function<void()> wake) {
  std::lock_guard<std::mutex> lock(mu_);
  owner_wake_ = std::move(wake);
}

void EgressPipe::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  owner_wake_ = nullptr;
  owner_gone_ = true;
  out_eof_ = true;
  in_.clear();
  in_off_ = 0;
  NotifyMuxLocked();
}

void EgressPipe::Attach(std::function<void()> notify) {
  std::lock_guard<std::mutex> lock(mu_);
  notify_ = std::move(notify);
  noticed_ = false;
}

uint64_t EgressPipe::Look() {
  std::lock_guard<std::mutex> lock(mu_);
  noticed_ = false;
  uint64_t c = consumed_;
  consumed_ = 0;
  return c;
}

void EgressPipe::Deliver(std::string&& data) {
  std::lock_guard<std::mutex> lock(mu_);
  if (owner_gone_ || ended_) return;
  if (in_off_ == in_.size()) {
    in_.swap(data);
    in_off_ = 0;
  } else {
    in_.append(data);
  }
  WakeOwnerLocked();
}

void EgressPipe::PeerEof() {
  std::lock_guard<std::mutex> lock(mu_);
  in_eof_ = true;
  WakeOwnerLocked();
}

void EgressPipe::Take(size_t max, std::string* into, bool* ended) {
  std::lock_guard<std::mutex> lock(mu_);
  into->clear();
  if (max >= out_.size()) {
    into->swap(out_);
  } else {
    into->assign(out_, 0, max);
    out_.erase(0, max);
  }
  *ended = out_eof_ && out_.empty();
  if (owner_full_ && out_.size() < kEgressPipeBytes) {
    owner_full_ = false;
    WakeOwnerLocked();
  }
}

bool EgressPipe::OwnerGone() const {
  std::lock_guard<std::mutex> lock(mu_);
  return owner_gone_;
}

void EgressPipe::End() {
  std::lock_guard<std::mutex> lock(mu_);
  ended_ = true;
  notify_ = nullptr;
  out_.clear();
  WakeOwnerLocked();
}

void EgressPipe::Detach(std::string* unread, std::string* unsent) {
  std::lock_guard<std::mutex> lock(mu_);
  unread->assign(in_, in_off_, std::string::npos);
  unsent->swap(out_);
  in_.clear();
  in_off_ = 0;
  out_.clear();
  ended_ = true;
  notify_ = nullptr;
  owner_wake_ = nullptr;
}

}  // namespace airlock
