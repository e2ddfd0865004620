// QEMU's migration stream, as saved for a snapshot: just enough of its
// format (QEMU 7.2: a "ram" iterable section, then device sections) to take
// the guest's memory out of it.
//
// A restore that reads the guest's pages from the stream writes each one
// into fresh memory, a page fault per page before the guest runs. The
// snapshot keeps them instead as a sparse image of the guest's RAM
// (memory_image.h), and the stream keeps the rest: the small blocks (ROMs,
// ACPI tables) and every device's state.
#ifndef AIRLOCK_VMMD_MIGRATION_STREAM_H_
#define AIRLOCK_VMMD_MIGRATION_STREAM_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::vmmd {

struct SplitStream {
  // The stream without the guest RAM's page records.
  std::string devices;
  // The guest RAM block (the largest) and its size in bytes.
  std::string ram_block;
  uint64_t ram_bytes = 0;
  // Pages handed to the writer, and zero pages left out (RAM starts zeroed
  // and no earlier record of the stream gave them content).
  uint64_t pages = 0;
  uint64_t zero_pages_dropped = 0;
};

// A 4 KiB page of guest RAM at `offset` with its final content so far (a
// later call for the same offset replaces it).
using PageWriter = std::function<absl::Status(uint64_t offset, absl::string_view page)>;

// SplitGuestMemory hands every page of `stream`'s largest RAM block (the
// guest's memory) to `write`, in stream order, and returns the stream
// without them. Anything it does not know (compression, XBZRLE, another
// iterable section, a truncated stream) is INVALID_ARGUMENT; an error from
// `write` is returned as it is.
absl::StatusOr<SplitStream> SplitGuestMemory(absl::string_view stream, const PageWriter& write);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_MIGRATION_STREAM_H_
