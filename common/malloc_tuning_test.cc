// KeepBulkBuffersMapped, seen from glibc's own counters: a freed buffer of
// almost 2 MiB stays in the heap (it was neither its own mapping nor
// trimmed), so the next one reuses its pages. With glibc's defaults (an
// mmap threshold of 128 KiB, raised only by freeing a mapped chunk, which
// this process has not done for one this big) it is a mapping of its own.
#include "common/malloc_tuning.h"

#include <malloc.h>

#include <cstdint>
#include <cstring>

#include "gtest/gtest.h"

namespace airlock {
namespace {

constexpr size_t kSize = (2 << 20) - (64 << 10);  // under kBulkMmapThreshold

TEST(MallocTuningTest, AFreedBulkBufferStaysInTheHeap) {
  ASSERT_TRUE(KeepBulkBuffersMapped());
  size_t arena_before = mallinfo2().arena;
  char* a = static_cast<char*>(malloc(kSize));
  ASSERT_NE(a, nullptr);
  memset(a, 2, kSize);
  EXPECT_EQ(mallinfo2().hblkhd, 0u) << "mapped on its own despite the threshold";
  EXPECT_GE(mallinfo2().arena, arena_before + kSize);
  const uintptr_t first = reinterpret_cast<uintptr_t>(a);
  free(a);
  // Still in the heap after the free: free space, not returned.
  struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, arena_before + kSize) << "trimmed";
  EXPECT_GE(after.fordblks, kSize);
  // The next buffer of that size takes the same memory.
  char* b = static_cast<char*>(malloc(kSize));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b), first);
  free(b);
}

}  // namespace
}  // namespace airlock
