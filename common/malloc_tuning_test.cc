// KeepBulkBuffersMapped, seen from glibc's own counters: a freed 1 MiB
// buffer stays in the heap (it was neither its own mapping nor trimmed),
// so the next one reuses its pages. Without the call the first buffer is
// an mmap of its own (glibc's default threshold is 128 KiB).
#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstring>

#include "gtest/gtest.h"

namespace airlock {
namespace {

TEST(MallocTuningTest, AFreedMegabyteBufferStaysInTheHeap) {
  // In a fresh process (gtest runs this in its own), before the call:
  // the default sends a 1 MiB buffer to a mapping of its own.
  char* before = static_cast<char*>(malloc(1 << 20));
  ASSERT_NE(before, nullptr);
  memset(before, 1, 1 << 20);
  EXPECT_GE(mallinfo2().hblkhd, size_t{1} << 20) << "the default would have mapped it";
  free(before);

  ASSERT_TRUE(KeepBulkBuffersMapped());
  size_t arena_before = mallinfo2().arena;
  char* a = static_cast<char*>(malloc(1 << 20));
  ASSERT_NE(a, nullptr);
  memset(a, 2, 1 << 20);
  EXPECT_EQ(mallinfo2().hblkhd, 0u) << "mapped on its own despite the threshold";
  EXPECT_GE(mallinfo2().arena, arena_before + (1 << 20));
  free(a);
  // Still in the heap after the free: free space, not returned.
  struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, arena_before + (1 << 20));
  EXPECT_GE(after.fordblks, size_t{1} << 20);
  // The next buffer of that size takes the same memory.
  char* b = static_cast<char*>(malloc(1 << 20));
  EXPECT_EQ(b, a);
  free(b);
}

}  // namespace
}  // namespace airlock
