#include "vmmd/store/layer_apply.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace airlock::vmmd {
namespace {

constexpr absl::string_view kWhiteoutPrefix = ".wh.";
constexpr absl::string_view kOpaqueMarker = ".wh..wh..opq";

struct ReadCloser {
  void operator()(archive* a) const { archive_read_free(a); }
};
struct WriteCloser {
  void operator()(archive* a) const { archive_write_free(a); }
};

std::string Parent(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? "" : rel.substr(0, slash);
}

std::string Base(const std::string& rel) {
  size_t slash = rel.rfind('/');
  return slash == std::string::npos ? rel : rel.substr(slash + 1);
}

std::string Join(const std::string& root, const std::string& rel) {
  return rel.empty() ? root : absl::StrCat(root, "/", rel);
}

// CheckParents refuses `rel` when a directory on its way inside `root` is a
// symlink: writing there would land wherever the link points.
absl::Status CheckParents(const std::string& root, const std::string& rel,
                          const std::string& entry) {
  std::string prefix;
  std::vector<std::string> parts = absl::StrSplit(rel, '/');
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    prefix = prefix.empty() ? parts[i] : absl::StrCat(prefix, "/", parts[i]);
    struct stat st;
    if (lstat(Join(root, prefix).c_str(), &st) != 0) return absl::OkStatus();
    if (S_ISLNK(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer entry \"", entry, "\" would be written through the symlink \"", prefix,
          "\" (outside the image's root); the image is refused"));
    }
  }
  return absl::OkStatus();
}

// DirFix is a directory's metadata, applied after the whole layer: the
// mode may forbid writing into it, and its times change as it fills.
struct DirFix {
  mode_t mode = 0755;
  uid_t uid = 0;
  gid_t gid = 0;
  struct timespec mtime{};
  std::vector<std::pair<std::string, std::string>> xattrs;
};

// IsPlainDirPath says every component of `rel` under `root` is a real
// directory (no symlink anywhere), so acting on the path stays inside.
bool IsPlainDirPath(const std::string& root, const std::string& rel) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    struct stat st;
    if (lstat(Join(root, prefix).c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return false;
  }
  return true;
}

// MakeDirAll creates `rel` and its missing parents under `root` (0755
// until their own entries say otherwise); CheckParents has refused any
// symlink on the way.
absl::Status MakeDirAll(const std::string& root, const std::string& rel) {
  std::string prefix;
  for (absl::string_view part : absl::StrSplit(rel, '/')) {
    prefix = prefix.empty() ? std::string(part) : absl::StrCat(prefix, "/", part);
    std::string path = Join(root, prefix);
    if (mkdir(path.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot create ", prefix, ": ", strerror(errno)));
    }
    struct stat st;
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer directory \"", rel, "\" would be made through \"", prefix,
          "\", which is not a directory; the image is refused"));
    }
  }
  return absl::OkStatus();
}

int RemoveOne(const char* path, const struct stat*, int, struct FTW*) {
  return remove(path) == 0 || errno == ENOENT ? 0 : -1;
}

}  // namespace

absl::StatusOr<std::string> NormalizeEntryPath(absl::string_view name) {
  if (absl::StartsWith(name, "/")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "layer entry \"", name, "\" has an absolute path; the image is refused"));
  }
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(name, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      return absl::InvalidArgumentError(absl::StrCat(
          "layer entry \"", name, "\" points outside the image's root (\"..\"); the image is "
          "refused"));
    }
    out.emplace_back(part);
  }
  return absl::StrJoin(out, "/");
}

absl::Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return absl::OkStatus();
  if (!S_ISDIR(st.st_mode)) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", strerror(errno)));
    }
    return absl::OkStatus();
  }
  // FTW_PHYS: symlinks are removed, never followed; FTW_DEPTH: children
  // before their directory.
  if (nftw(path.c_str(), RemoveOne, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) != 0) {
    return absl::InternalError(absl::StrCat("cannot remove ", path, ": ", strerror(errno)));
  }
  return absl::OkStatus();
}

absl::StatusOr<LayerStats> ApplyLayer(const std::string& layer, const std::string& root_in) {
  char resolved[PATH_MAX];
  if (realpath(root_in.c_str(), resolved) == nullptr) {
    return absl::InternalError(absl::StrCat("cannot resolve ", root_in, ": ", strerror(errno)));
  }
  const std::string root = resolved;
  std::unique_ptr<archive, ReadCloser> in(archive_read_new());
  archive_read_support_filter_all(in.get());
  archive_read_support_format_tar(in.get());
  archive_read_support_format_gnutar(in.get());
  if (archive_read_open_filename(in.get(), layer.c_str(), 1 << 16) != ARCHIVE_OK) {
    return absl::InvalidArgumentError(absl::StrCat("cannot read layer ", layer, ": ",
                                                   archive_error_string(in.get())));
  }
  std::unique_ptr<archive, WriteCloser> out(archive_write_disk_new());
  int flags = ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_XATTR |
              ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
              ARCHIVE_EXTRACT_UNLINK;
  if (geteuid() == 0) flags |= ARCHIVE_EXTRACT_OWNER;
  archive_write_disk_set_options(out.get(), flags);

  LayerStats stats;
  // Paths this layer writes: an opaque directory keeps only these.
  std::set<std::string> written;
  std::map<std::string, DirFix> dirs;
  archive_entry* e = nullptr;
  for (;;) {
    int r = archive_read_next_header(in.get(), &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      return absl::InvalidArgumentError(absl::StrCat("layer ", Base(layer), " is corrupt: ",
                                                     archive_error_string(in.get())));
    }
    const char* raw = archive_entry_pathname(e);
    std::string entry = raw ? raw : "";
    auto rel = NormalizeEntryPath(entry);
    if (!rel.ok()) return rel.status();
    ++stats.entries;
    if (rel->empty()) continue;  // the root directory itself
    if (absl::Status s = CheckParents(root, *rel, entry); !s.ok()) return s;
    std::string base = Base(*rel);
    if (absl::StartsWith(base, kWhiteoutPrefix)) {
      ++stats.whiteouts;
      std::string dir = Parent(*rel);
      if (base == kOpaqueMarker) {
        // Now, while the directory is checked: it hides what lower layers
        // put there (what this layer wrote before the marker stays).
        std::string path = Join(root, dir);
        struct stat st;
        if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        std::vector<std::string> doomed;
        if (DIR* d = opendir(path.c_str())) {
          while (dirent* de = readdir(d)) {
            std::string n = de->d_name;
            if (n == "." || n == "..") continue;
            std::string child = Join(dir, n);
            auto below = written.lower_bound(child + "/");
            bool kept = written.count(child) > 0 ||
                        (below != written.end() && absl::StartsWith(*below, child + "/"));
            if (!kept) doomed.push_back(Join(root, child));
          }
          closedir(d);
        }
        for (const auto& p : doomed) {
          if (absl::Status s = RemoveTree(p); !s.ok()) return s;
        }
      } else if (!absl::StartsWith(base, ".wh..wh.")) {
        std::string name = base.substr(kWhiteoutPrefix.size());
        if (name.empty() || name == "." || name == "..") {
          return absl::InvalidArgumentError(absl::StrCat(
              "layer entry \"", entry, "\" is a whiteout of \"", name,
              "\", which is not a name; the image is refused"));
        }
        if (absl::Status s = RemoveTree(Join(root, Join(dir, name))); !s.ok()) return s;
      }
      continue;
    }
    mode_t type = archive_entry_filetype(e);
    if (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK) {
      ++stats.skipped_devices;
      continue;
    }
    const char* link = archive_entry_hardlink(e);
    if (link != nullptr) {
      auto target = NormalizeEntryPath(link);
      if (!target.ok() || target->empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "layer entry \"", entry, "\" is a hard link to \"", link,
            "\", outside the image's root; the image is refused"));
      }
      if (absl::Status s = CheckParents(root, *target, entry); !s.ok()) return s;
      archive_entry_set_hardlink(e, Join(root, *target).c_str());
    }
    // A directory replaces a file and a file replaces a directory.
    std::string dest = Join(root, *rel);
    struct stat st;
    if (lstat(dest.c_str(), &st) == 0) {
      bool want_dir = type == AE_IFDIR && link == nullptr;
      if (S_ISDIR(st.st_mode) != want_dir) {
        if (absl::Status s = RemoveTree(dest); !s.ok()) return s;
      }
    }
    written.insert(*rel);
    if (type == AE_IFDIR && link == nullptr) {
      // Made here, and given their metadata after the layer (see DirFix):
      // libarchive would apply it by path at close, through whatever a
      // later entry of the layer made of that path.
      if (absl::Status s = MakeDirAll(root, *rel); !s.ok()) return s;
      DirFix fix;
      fix.mode = archive_entry_perm(e);
      fix.uid = static_cast<uid_t>(archive_entry_uid(e));
      fix.gid = static_cast<gid_t>(archive_entry_gid(e));
      fix.mtime.tv_sec = archive_entry_mtime(e);
      fix.mtime.tv_nsec = archive_entry_mtime_nsec(e);
      archive_entry_xattr_reset(e);
      const char* xname;
      const void* xvalue;
      size_t xsize;
      while (archive_entry_xattr_next(e, &xname, &xvalue, &xsize) == ARCHIVE_OK) {
        fix.xattrs.emplace_back(xname, std::string(static_cast<const char*>(xvalue), xsize));
      }
      dirs[*rel] = fix;
      continue;
    }
    archive_entry_set_pathname(e, dest.c_str());
    r = archive_write_header(out.get(), e);
    if (r < ARCHIVE_WARN) {
      return absl::InvalidArgumentError(absl::StrCat("cannot apply layer entry \"", entry,
                                                     "\": ", archive_error_string(out.get())));
    }
    if (archive_entry_size(e) > 0 && link == nullptr) {
      const void* buf;
      size_t size;
      la_int64_t offset;
      for (;;) {
        r = archive_read_data_block(in.get(), &buf, &size, &offset);
        if (r == ARCHIVE_EOF) break;
        if (r < ARCHIVE_WARN) {
          return absl::InvalidArgumentError(absl::StrCat(
              "layer ", Base(layer), " is corrupt at \"", entry, "\": ",
              archive_error_string(in.get())));
        }
        if (archive_write_data_block(out.get(), buf, size, offset) < ARCHIVE_WARN) {
          return absl::ResourceExhaustedError(absl::StrCat(
              "cannot write \"", entry, "\": ", archive_error_string(out.get())));
        }
        stats.bytes += size;
      }
    }
    if (archive_write_finish_entry(out.get()) < ARCHIVE_WARN) {
      return absl::ResourceExhaustedError(absl::StrCat("cannot write \"", entry, "\": ",
                                                       archive_error_string(out.get())));
    }
  }
  if (archive_write_close(out.get()) < ARCHIVE_WARN) {
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot finish layer ", Base(layer), ": ", archive_error_string(out.get())));
  }
  // Directory metadata last, on paths checked to be directories all the
  // way down (a later entry may have replaced one with a symlink: then the
  // entry no longer names a directory of the image and is skipped).
  bool owner = geteuid() == 0;
  for (const auto& [rel, fix] : dirs) {
    if (!IsPlainDirPath(root, rel)) continue;
    std::string path = Join(root, rel);
    if (owner && lchown(path.c_str(), fix.uid, fix.gid) != 0) {
      return absl::InternalError(absl::StrCat("cannot chown ", rel, ": ", strerror(errno)));
    }
    for (const auto& [name, value] : fix.xattrs) {
      (void)lsetxattr(path.c_str(), name.c_str(), value.data(), value.size(), 0);
    }
    if (chmod(path.c_str(), fix.mode) != 0) {
      return absl::InternalError(absl::StrCat("cannot chmod ", rel, ": ", strerror(errno)));
    }
    struct timespec times[2] = {fix.mtime, fix.mtime};
    (void)utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }
  return stats;
}

}  // namespace airlock::vmmd
