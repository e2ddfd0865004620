#include "vmmd/memory_image.h"

#include <errno.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

namespace airlock::vmmd {

int CopyToMemfd(int image_fd) {
  struct stat st {};
  if (fstat(image_fd, &st) != 0) return -errno;
  if (!S_ISREG(st.st_mode)) return -EINVAL;
  int mem = memfd_create("airlock-guest-ram", MFD_CLOEXEC);
  if (mem < 0) return -errno;
  auto fail = [mem](int e) {
    close(mem);
    return -e;
  };
  if (ftruncate(mem, st.st_size) != 0) return fail(errno);
  off_t pos = 0;
  while (pos < st.st_size) {
    off_t data = lseek(image_fd, pos, SEEK_DATA);
    if (data < 0) {
      if (errno == ENXIO) break;  // only a hole is left
      return fail(errno);
    }
    off_t hole = lseek(image_fd, data, SEEK_HOLE);
    if (hole < 0) return fail(errno);
    // sendfile writes at the memfd's own offset and advances `from`.
    if (lseek(mem, data, SEEK_SET) != data) return fail(errno);
    off_t from = data;
    while (from < hole) {
      ssize_t n = sendfile(mem, image_fd, &from, static_cast<size_t>(hole - from));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return fail(errno);
      if (n == 0) return fail(EIO);  // the file shrank under us
    }
    pos = hole;
  }
  return mem;
}

}  // namespace airlock::vmmd
