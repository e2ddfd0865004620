// Whole-buffer I/O: writing all of a buffer to a descriptor, reading all
// of a file, replacing a file whole; and a descriptor that closes itself.
#ifndef AIRLOCK_COMMON_FD_IO_H_
#define AIRLOCK_COMMON_FD_IO_H_

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
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
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
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

// FileTail is the last `lines` lines of `path` (a final newline does not
// count as a line); "" when it cannot be read.
inline std::string FileTail(const std::string& path, int lines) {
  std::string text = ReadFileToString(path);
  size_t start = text.size();
  int seen = 0;
  while (start > 0) {
    if (text[start - 1] == '\n' && start != text.size() && ++seen == lines) break;
    --start;
  }
  return text.substr(start);
}

// ReplaceFile writes `content` to `path` with `mode` through a temporary
// file beside it and a rename, so readers (and a crash) see the old file
// or the new one, never half of one.
inline absl::Status ReplaceFile(const std::string& path, absl::string_view content, mode_t mode) {
  std::string tmp = path + ".airlock-tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return absl::InternalError(absl::StrCat("cannot write ", tmp, ": ", strerror(errno)));
  bool ok = WriteAll(fd, content) && fchmod(fd, mode) == 0;
  close(fd);
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    std::string err = strerror(errno);
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot replace ", path, ": ", err));
  }
  return absl::OkStatus();
}

}  // namespace airlock

#endif  // AIRLOCK_COMMON_FD_IO_H_
