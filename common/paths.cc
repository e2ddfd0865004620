#include "common/paths.h"

#include <errno.h>
#include <pwd.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v != '\0' ? std::string(v) : fallback;
}

std::string HomeDir() {
  const char* home = getenv("HOME");
  if (home != nullptr && *home != '\0') return home;
  struct passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_dir : "/";
}

}  // namespace

std::string DefaultRuntimeDir() {
  if (const char* v = getenv("AIRLOCK_RUNTIME_DIR"); v != nullptr && *v) return v;
  if (geteuid() == 0) return "/run/airlock";
  const char* xdg = getenv("XDG_RUNTIME_DIR");
  if (xdg != nullptr && *xdg) return absl::StrCat(xdg, "/airlock");
  return absl::StrCat("/tmp/airlock-", geteuid());
}

std::string DefaultStateDir() {
  if (const char* v = getenv("AIRLOCK_STATE_DIR"); v != nullptr && *v) return v;
  if (geteuid() == 0) return "/var/lib/airlock";
  return absl::StrCat(EnvOr("XDG_STATE_HOME", HomeDir() + "/.local/state"),
                      "/airlock");
}

std::string DefaultImageDir() {
  if (const char* v = getenv("AIRLOCK_IMAGE_DIR"); v != nullptr && *v) return v;
  return absl::StrCat(EnvOr("XDG_CACHE_HOME", HomeDir() + "/.cache"),
                      "/airlock/images");
}

absl::Status MakeDirs(absl::string_view path, int mode) {
  std::string p(path);
  if (p.empty()) return absl::InvalidArgumentError("empty directory path");
  for (size_t i = 1; i <= p.size(); ++i) {
    if (i != p.size() && p[i] != '/') continue;
    std::string prefix = p.substr(0, i);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return absl::InternalError(
          absl::StrCat("cannot create directory ", prefix, ": ", strerror(errno)));
    }
  }
  struct stat st;
  if (stat(p.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(p, " is not a directory"));
  }
  return absl::OkStatus();
}

absl::Status EnsurePrivateDir(absl::string_view path) {
  std::string p(path);
  struct stat st;
  if (lstat(p.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot stat ", p, ": ", strerror(errno)));
    }
    absl::Status s = MakeDirs(p, 0700);
    if (!s.ok()) return s;
    // mkdir's mode is filtered by the umask; the last component must be
    // exactly 0700 whatever the umask was.
    if (chmod(p.c_str(), 0700) != 0) {
      return absl::InternalError(absl::StrCat("cannot chmod ", p, ": ", strerror(errno)));
    }
    if (lstat(p.c_str(), &st) != 0) {
      return absl::InternalError(absl::StrCat("cannot stat ", p, ": ", strerror(errno)));
    }
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(p, " exists but is not a directory (a symlink is refused too); remove it"));
  }
  if (st.st_uid != geteuid()) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s is owned by uid %d, not by uid %d; use a directory of your own "
        "(--runtime-dir) or fix its owner",
        p, st.st_uid, geteuid()));
  }
  if ((st.st_mode & 077) != 0) {
    return absl::PermissionDeniedError(absl::StrFormat(
        "%s has mode %04o; it must be private (run: chmod 700 %s)", p,
        st.st_mode & 07777, p));
  }
  return absl::OkStatus();
}

}  // namespace airlock
