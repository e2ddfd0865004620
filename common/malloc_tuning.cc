#include "common/malloc_tuning.h"

#include <malloc.h>

namespace airlock {

bool KeepBulkBuffersMapped() {
  // Setting either one also ends glibc's sliding of both with the sizes
  // it sees freed, so the bounds stay as set.
  bool mmap_ok = mallopt(M_MMAP_THRESHOLD, static_cast<int>(kBulkMmapThreshold)) == 1;
  bool trim_ok = mallopt(M_TRIM_THRESHOLD, static_cast<int>(kBulkTrimThreshold)) == 1;
  return mmap_ok && trim_ok;
}

}  // namespace airlock
