#include "secretsd/key_file.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/crypto.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/fd_io.h"

namespace airlock::secretsd {
namespace {

std::string Errno() { return strerror(errno); }

std::string DirOf(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

}  // namespace

absl::StatusOr<SecretKey> LoadKeyFile(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) {
      struct stat link;
      if (lstat(path.c_str(), &link) == 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("key file ", path, " is a symlink to a file that does not exist"));
      }
      return absl::NotFoundError(absl::StrCat("no key file at ", path));
    }
    return absl::InvalidArgumentError(absl::StrCat("cannot open key file ", path, ": ", Errno()));
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0) {
    return absl::InternalError(absl::StrCat("cannot stat key file ", path, ": ", Errno()));
  }
  if (!S_ISREG(st.st_mode)) {
    return absl::InvalidArgumentError(absl::StrCat("key file ", path, " is not a regular file"));
  }
  // The key protects every stored secret: a copy readable by another user
  // (or writable, so it could be swapped) is refused, never "fixed" here.
  if ((st.st_mode & 077) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "key file %s has mode %04o, which lets group or others access it; run chmod 600 %s", path,
        st.st_mode & 07777, path));
  }
  if (static_cast<size_t>(st.st_size) != kKeySize) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key file ", path, " is ", st.st_size, " bytes; it must hold exactly ", kKeySize,
        " raw bytes (e.g. head -c ", kKeySize, " /dev/urandom > FILE; chmod 600 FILE)"));
  }
  char buf[kKeySize + 1];
  size_t got = 0;
  while (got < sizeof(buf)) {
    ssize_t n = read(fd.get(), buf + got, sizeof(buf) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::InvalidArgumentError(absl::StrCat("cannot read key file ", path, ": ", Errno()));
    }
    if (n == 0) break;
    got += n;
  }
  if (got != kKeySize) {
    OPENSSL_cleanse(buf, sizeof(buf));
    return absl::InvalidArgumentError(absl::StrCat("key file ", path, " changed size while read; ",
                                                   "it must hold exactly ", kKeySize, " bytes"));
  }
  auto key = SecretKey::FromBytes(absl::string_view(buf, kKeySize));
  OPENSSL_cleanse(buf, sizeof(buf));
  return key;
}

absl::StatusOr<SecretKey> CreateKeyFile(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) == 0) {
    return absl::AlreadyExistsError(absl::StrCat("key file ", path, " already exists"));
  }
  auto key = SecretKey::Generate();
  if (!key.ok()) return key.status();

  std::string tmp = absl::StrCat(path, ".tmp-", getpid());
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
  if (fd.get() < 0) {
    return absl::InternalError(absl::StrCat("cannot create key file ", tmp, ": ", Errno()));
  }
  // umask can only remove bits; fchmod makes the mode exactly 0600.
  bool ok = fchmod(fd.get(), 0600) == 0 && WriteAll(fd.get(), key->bytes()) && fsync(fd.get()) == 0;
  std::string err = Errno();
  if (close(fd.release()) != 0) ok = false;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = Errno();
    unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat("cannot write key file ", path, ": ", err));
  }
  // The rename is durable only once the directory entry is.
  UniqueFd dir(open(DirOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) fsync(dir.get());
  return key;
}

}  // namespace airlock::secretsd
