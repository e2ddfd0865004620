#include "guest/files.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace airlock::guest {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  int e = errno;
  std::string msg = absl::StrCat(what, " ", path, ": ", strerror(e));
  switch (e) {
    case ENOENT: return absl::NotFoundError(msg);
    case EEXIST: return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
    case EROFS: return absl::PermissionDeniedError(msg);
    case ENOTDIR:
    case EISDIR:
    case ENOTEMPTY:
    case EINVAL: return absl::FailedPreconditionError(msg);
    default: return absl::InternalError(msg);
  }
}

airlock::agent::v1::FileInfo Describe(const std::string& path, const struct stat& st) {
  airlock::agent::v1::FileInfo info;
  info.set_path(path);
  info.set_size(st.st_size);
  info.set_mode(st.st_mode);
  info.set_is_dir(S_ISDIR(st.st_mode));
  info.set_is_symlink(S_ISLNK(st.st_mode));
  info.set_mtime(st.st_mtime);
  info.set_uid(st.st_uid);
  info.set_gid(st.st_gid);
  return info;
}

}  // namespace

absl::Status CheckGuestPath(absl::string_view path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("path \"", path, "\" must be absolute inside the sandbox"));
  }
  return absl::OkStatus();
}

absl::StatusOr<airlock::agent::v1::FileInfo> StatPath(const std::string& path) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Errno("cannot stat", path);
  return Describe(path, st);
}

absl::StatusOr<std::vector<airlock::agent::v1::FileInfo>> ListDirectory(const std::string& path) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return Errno("cannot list", path);
  std::vector<airlock::agent::v1::FileInfo> out;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == "." || name == "..") continue;
    std::string full = path == "/" ? "/" + name : path + "/" + name;
    struct stat st;
    if (lstat(full.c_str(), &st) == 0) out.push_back(Describe(full, st));
  }
  closedir(d);
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.path() < b.path(); });
  return out;
}

absl::Status ReadFileChunks(const std::string& path,
                            const std::function<bool(absl::string_view)>& chunk) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Errno("cannot read", path);
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, " is a directory"));
  }
  std::string buf(256 << 10, '\0');
  while (true) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      absl::Status s = Errno("cannot read", path);
      close(fd);
      return s;
    }
    if (n == 0 || !chunk(absl::string_view(buf.data(), n))) break;
  }
  close(fd);
  return absl::OkStatus();
}

FileWriter::~FileWriter() {
  if (fd_ >= 0) close(fd_);
  if (!temp_.empty()) unlink(temp_.c_str());
}

absl::Status FileWriter::Open(const std::string& path, unsigned mode, Placement placement,
                              std::optional<FileOwner> owner) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  path_ = path;
  placement_ = placement;
  struct stat st;
  if (placement == Placement::kIfAbsent && lstat(path.c_str(), &st) == 0) {
    kept_existing_ = true;
    return absl::OkStatus();
  }
  if (placement == Placement::kInPlace) {
    fd_ = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode ? mode : 0644);
    if (fd_ < 0) return Errno("cannot write", path);
  } else {
    // A name of our own in the same directory (so the rename stays on one
    // filesystem), created exclusively: nothing planted there is followed.
    std::string temp = path.substr(0, path.rfind('/') + 1) + ".airlock-write.XXXXXX";
    fd_ = mkostemp(temp.data(), O_CLOEXEC);
    if (fd_ < 0) return Errno("cannot write", path);
    temp_ = temp;
    if (mode == 0) mode = 0644;
  }
  // Owner first: a chown may clear set-id bits the mode then restores.
  if (owner && fchown(fd_, owner->uid, owner->gid) != 0) return Errno("cannot chown", path);
  if (mode != 0 && fchmod(fd_, mode) != 0) return Errno("cannot chmod", path);
  return absl::OkStatus();
}

absl::Status FileWriter::Write(absl::string_view data) {
  if (kept_existing_) return absl::OkStatus();
  while (!data.empty()) {
    ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Errno("cannot write", path_);
    data.remove_prefix(n);
    written_ += n;
  }
  return absl::OkStatus();
}

absl::Status FileWriter::Close() {
  if (kept_existing_) return absl::OkStatus();
  int fd = fd_;
  fd_ = -1;
  if (fsync(fd) != 0 || close(fd) != 0) return Errno("cannot write", path_);
  if (placement_ == Placement::kInPlace) return absl::OkStatus();
  if (placement_ == Placement::kReplace) {
    // On failure the destructor removes the temporary file.
    if (rename(temp_.c_str(), path_.c_str()) != 0) return Errno("cannot replace", path_);
    temp_.clear();
  } else {
    // link never replaces: a path taken since Open is kept as well.
    bool taken = link(temp_.c_str(), path_.c_str()) != 0;
    if (taken && errno != EEXIST) return Errno("cannot create", path_);
    unlink(temp_.c_str());
    temp_.clear();
    if (taken) {
      kept_existing_ = true;
      written_ = 0;
      return absl::OkStatus();
    }
  }
  // The new name is on disk before the reply, like the data.
  std::string dir = path_.substr(0, path_.rfind('/') + 1);
  int dfd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    fsync(dfd);
    close(dfd);
  }
  return absl::OkStatus();
}

absl::Status MakeDirectory(const std::string& path, unsigned mode, bool parents,
                           std::optional<FileOwner> owner) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  mode = mode ? mode : 0755;
  // Made claims a directory this call just created for `owner`; lchown,
  // so a symlink swapped in meanwhile is changed itself, not its target.
  auto made = [&](const std::string& dir) -> absl::Status {
    if (owner && lchown(dir.c_str(), owner->uid, owner->gid) != 0) {
      return Errno("cannot chown", dir);
    }
    return absl::OkStatus();
  };
  if (!parents) {
    if (mkdir(path.c_str(), mode) != 0) return Errno("cannot create directory", path);
    return made(path);
  }
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string prefix = path.substr(0, i);
    if (mkdir(prefix.c_str(), mode) == 0) {
      if (absl::Status s = made(prefix); !s.ok()) return s;
    } else if (errno != EEXIST) {
      return Errno("cannot create directory", prefix);
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status RemovePath(const std::string& path, bool recursive) {
  if (absl::Status s = CheckGuestPath(path); !s.ok()) return s;
  if (path == "/") return absl::InvalidArgumentError("refusing to remove /");
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Errno("cannot remove", path);
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path.c_str()) != 0) return Errno("cannot remove", path);
    return absl::OkStatus();
  }
  if (!recursive) {
    if (rmdir(path.c_str()) != 0) return Errno("cannot remove", path);
    return absl::OkStatus();
  }
  int rc = nftw(
      path.c_str(),
      [](const char* p, const struct stat*, int, struct FTW*) { return remove(p); }, 64,
      FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
  if (rc != 0) return Errno("cannot remove", path);
  return absl::OkStatus();
}

}  // namespace airlock::guest
