// Writing a whole buffer to a file descriptor.
#ifndef AIRLOCK_COMMON_FD_IO_H_
#define AIRLOCK_COMMON_FD_IO_H_

#include <errno.h>
#include <unistd.h>

#include "absl/strings/string_view.h"

namespace airlock {

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

}  // namespace airlock

#endif  // AIRLOCK_COMMON_FD_IO_H_
