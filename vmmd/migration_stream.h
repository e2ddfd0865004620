// QEMU's migration stream, as saved for a snapshot: just enough of its
// format (QEMU 7.2: a "ram" iterable section, then device sections) to drop
// what a restore does not need.
//
// A restore writes every page the stream names. A zero page costs the
// destination a page fault all the same (QEMU reads the page to see that it
// is zero), and a freshly booted 1 GiB guest is mostly zero pages. Guest
// RAM starts zeroed in the destination, so a zero-page record of it can be
// left out unless an earlier record of the same stream gave that page
// content.
#ifndef AIRLOCK_VMMD_MIGRATION_STREAM_H_
#define AIRLOCK_VMMD_MIGRATION_STREAM_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::vmmd {

struct StrippedStream {
  std::string data;
  uint64_t zero_pages_dropped = 0;
  uint64_t zero_pages_kept = 0;
  uint64_t pages = 0;
};

// StripZeroPages returns `stream` without the zero-page records of its
// largest RAM block (the guest's memory; ROM blocks have content from the
// start, so theirs stay) that no earlier record of the stream gave content.
// Anything it does not know (compression, XBZRLE, another iterable
// section, a truncated stream) is INVALID_ARGUMENT, and the caller keeps
// the stream as it was.
absl::StatusOr<StrippedStream> StripZeroPages(absl::string_view stream);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_MIGRATION_STREAM_H_
