// File operations inside the guest, for the agent's file API. Paths are
// absolute guest paths.
#ifndef AIRLOCK_GUEST_FILES_H_
#define AIRLOCK_GUEST_FILES_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "protos/agent/v1/agent.pb.h"

namespace airlock::guest {

// CheckGuestPath refuses relative paths and empty paths.
absl::Status CheckGuestPath(absl::string_view path);

// StatPath describes `path` without following a final symlink.
absl::StatusOr<airlock::agent::v1::FileInfo> StatPath(const std::string& path);

// ListDirectory describes each entry of `path` (without "." and ".."),
// sorted by name.
absl::StatusOr<std::vector<airlock::agent::v1::FileInfo>> ListDirectory(const std::string& path);

// ReadFileChunks calls `chunk` with consecutive pieces of the file of at most
// 256 KiB; stops early when `chunk` returns false.
absl::Status ReadFileChunks(const std::string& path,
                            const std::function<bool(absl::string_view)>& chunk);

// FileOwner is the numeric owner given to what the file calls create.
struct FileOwner {
  uid_t uid = 0;
  gid_t gid = 0;
};

// Placement is how FileWriter puts its data at the path (see
// airlock.agent.v1.WritePlacement).
enum class Placement {
  // Open the path itself (a symlink there is followed), create or truncate
  // it, write in place.
  kInPlace,
  // Write a new file in the path's directory and rename it over the path
  // on Close: whatever was at the path is replaced, never written through.
  kReplace,
  // As kReplace, but an entry already at the path (of any type, a dangling
  // symlink included) is kept and the new file discarded.
  kIfAbsent,
};

// FileWriter writes a file: Open creates it (or, in place, truncates it)
// with `mode` (0: 0644 for a new file, an existing file's mode kept in
// place) and `owner` (none: root's, the agent's own); Close syncs it and,
// unless in place, moves it to the path. A writer destroyed before Close
// leaves no temporary file behind.
class FileWriter {
 public:
  ~FileWriter();
  absl::Status Open(const std::string& path, unsigned mode,
                    Placement placement = Placement::kInPlace,
                    std::optional<FileOwner> owner = std::nullopt);
  absl::Status Write(absl::string_view data);
  absl::Status Close();
  uint64_t written() const { return written_; }
  // kept_existing says kIfAbsent found the path taken: nothing was written
  // there (Write discards its data and written() stays 0).
  bool kept_existing() const { return kept_existing_; }

 private:
  int fd_ = -1;
  std::string path_;
  // The file being written when it is not the path itself; removed unless
  // Close moved it to the path.
  std::string temp_;
  Placement placement_ = Placement::kInPlace;
  uint64_t written_ = 0;
  bool kept_existing_ = false;
};

// MakeDirectory creates `path` (and with `parents` its missing parents),
// each directory it creates belonging to `owner` when given.
absl::Status MakeDirectory(const std::string& path, unsigned mode, bool parents,
                           std::optional<FileOwner> owner = std::nullopt);

// RemovePath removes a file, a symlink or an empty directory; with
// `recursive` a whole tree (never following symlinks).
absl::Status RemovePath(const std::string& path, bool recursive);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_FILES_H_
