#include "guest/mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "guest/files.h"

namespace airlock::guest {

absl::Status MountShare(const std::string& tag, const std::string& path, bool read_only,
                        bool file, absl::Duration wait) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  if (tag.empty() || tag.find('/') != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("invalid share tag \"", tag, "\""));
  }
  unsigned long flags = MS_NODEV | (read_only ? MS_RDONLY : 0);
  std::string where = file ? absl::StrCat("/run/airlock/shares/", tag) : path;
  if (absl::Status s = MakeDirectory(where, 0755, true); !s.ok()) return s;
  // Monotonic: the guest's clock is set by its Claim.
  auto deadline = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(wait);
  while (mount(tag.c_str(), where.c_str(), "virtiofs", flags, nullptr) != 0) {
    // virtiofs says EINVAL for a tag no device has (yet).
    if (errno == EINVAL && std::chrono::steady_clock::now() < deadline) {
      absl::SleepFor(absl::Milliseconds(2));
      continue;
    }
    std::string why = strerror(errno);
    if (errno == EINVAL && wait > absl::ZeroDuration()) {
      absl::StrAppend(&why, " (no device with this tag appeared within ",
                      absl::FormatDuration(wait), ")");
    }
    return absl::InternalError(absl::StrCat("mount virtiofs ", tag, " on ", where, ": ", why));
  }
  if (!file) return absl::OkStatus();
  std::string parent = path.substr(0, path.rfind('/'));
  if (!parent.empty()) {
    if (absl::Status s = MakeDirectory(parent, 0755, true); !s.ok()) return s;
  }
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0) close(fd);
  std::string source = absl::StrCat(where, path.substr(path.rfind('/')));
  if (mount(source.c_str(), path.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      (read_only &&
       mount(nullptr, path.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY, nullptr) != 0)) {
    return absl::InternalError(absl::StrCat("bind ", source, " on ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace airlock::guest
