// Whole-buffer I/O: writing all of a buffer to a descriptor, reading all
// of a file; and a descriptor that closes itself.
#ifndef AIRLOCK_COMMON_FD_IO_H_
#define AIRLOCK_COMMON_FD_IO_H_

#include <errno.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

namespace airlock {

// UniqueFd owns a file descriptor and closes it when it goes out of scope.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  // release gives the descriptor up without closing it.
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

// WriteAll writes every byte of `data` to `fd`, retrying short writes and
// EINTR. False when the descriptor fails (the reader is gone).
inline bool WriteAll(int fd, absl::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(n);
  }
  return true;
}

// ReadFileToString returns the whole content of `path`, or "" when it
// cannot be read (a missing /proc entry, a log not written yet).
inline std::string ReadFileToString(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream b;
  b << f.rdbuf();
  return b.str();
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_FD_IO_H_
