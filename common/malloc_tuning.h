// How a process that moves bulk data through short-lived buffers (the
// egress tunnel's batches: up to a MiB each, made and freed many times a
// second) keeps glibc's allocator from giving that memory back to the
// kernel after every use.
//
// By default a free of 128 KiB or more is an munmap, or a trim of the
// heap's top with madvise(MADV_DONTNEED); the next buffer then faults its
// pages in again, and each trim flushes the TLB of every CPU the process
// runs on. On a nested host that is most of the cost of a byte: a CONNECT
// download through proxyd ran at 65 MiB/s with the defaults and 245 MiB/s
// with these bounds (bench/egress_bench.py, case 3).
//
// Where it stops: the memory kept is bounded (kBulkTrimThreshold free at
// the top of each arena) but not returned when idle; a process that needs
// its footprint back does not call this.
#ifndef AIRLOCK_COMMON_MALLOC_TUNING_H_
#define AIRLOCK_COMMON_MALLOC_TUNING_H_

#include <cstddef>

namespace airlock {

// Allocations up to this size come from the heap, never their own mmap.
inline constexpr size_t kBulkMmapThreshold = 2 << 20;
// Free memory at the top of an arena past which it is trimmed.
inline constexpr size_t kBulkTrimThreshold = 8 << 20;

// KeepBulkBuffersMapped sets both bounds for the process. Call it once,
// early in main (before threads make their arenas). False when glibc
// refused either (the process runs on with the defaults).
bool KeepBulkBuffersMapped();

}  // namespace airlock

#endif  // AIRLOCK_COMMON_MALLOC_TUNING_H_
