// File operations inside the guest, for the agent's file API. Paths are
// absolute guest paths.
#ifndef AIRLOCK_GUEST_FILES_H_
#define AIRLOCK_GUEST_FILES_H_

#include <functional>
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

// FileWriter writes a file: it is created (or truncated) with `mode` on Open.
class FileWriter {
 public:
  ~FileWriter();
  absl::Status Open(const std::string& path, unsigned mode);
  absl::Status Write(absl::string_view data);
  absl::Status Close();
  uint64_t written() const { return written_; }

 private:
  int fd_ = -1;
  std::string path_;
  uint64_t written_ = 0;
};

// MakeDirectory creates `path` (and with `parents` its missing parents).
absl::Status MakeDirectory(const std::string& path, unsigned mode, bool parents);

// RemovePath removes a file, a symlink or an empty directory; with
// `recursive` a whole tree (never following symlinks).
absl::Status RemovePath(const std::string& path, bool recursive);

}  // namespace airlock::guest

#endif  // AIRLOCK_GUEST_FILES_H_
