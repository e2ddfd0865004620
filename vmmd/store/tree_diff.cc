#include "vmmd/store/tree_diff.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/fd_io.h"
#include "vmmd/store/oci.h"

namespace airlock::vmmd {
namespace {

// Sink is the write side of the layer: it hashes the tar (diff_id) and
// deflates it into the blob.
struct Sink {
  BlobWriter* blob = nullptr;
  EVP_MD_CTX* md = nullptr;
  z_stream z{};
  absl::Status error;
  std::string out;

  bool Deflate(const void* data, size_t n, int flush) {
    z.next_in = static_cast<Bytef*>(const_cast<void*>(data));
    z.avail_in = static_cast<uInt>(n);
    do {
      out.resize(1 << 16);
      z.next_out = reinterpret_cast<Bytef*>(out.data());
      z.avail_out = static_cast<uInt>(out.size());
      int r = deflate(&z, flush);
      if (r == Z_STREAM_ERROR) {
        error = absl::InternalError("deflate failed");
        return false;
      }
      size_t have = out.size() - z.avail_out;
      if (have > 0) {
        error = blob->Write(absl::string_view(out.data(), have));
        if (!error.ok()) return false;
      }
    } while (z.avail_out == 0);
    return true;
  }
};

la_ssize_t OnWrite(archive*, void* user, const void* data, size_t n) {
  auto* s = static_cast<Sink*>(user);
  EVP_DigestUpdate(s->md, data, n);
  if (!s->Deflate(data, n, Z_NO_FLUSH)) return -1;
  return static_cast<la_ssize_t>(n);
}

std::map<std::string, std::string> Xattrs(const std::string& path) {
  std::map<std::string, std::string> out;
  ssize_t n = llistxattr(path.c_str(), nullptr, 0);
  if (n <= 0) return out;
  std::string names(n, '\0');
  n = llistxattr(path.c_str(), names.data(), names.size());
  if (n <= 0) return out;
  for (size_t i = 0; i < static_cast<size_t>(n);) {
    std::string name = names.c_str() + i;
    i += name.size() + 1;
    ssize_t vn = lgetxattr(path.c_str(), name.c_str(), nullptr, 0);
    if (vn < 0) continue;
    std::string value(vn, '\0');
    vn = lgetxattr(path.c_str(), name.c_str(), value.data(), value.size());
    if (vn >= 0) out[name] = value.substr(0, vn);
  }
  return out;
}

std::string LinkTarget(const std::string& path) {
  char buf[4096];
  ssize_t n = readlink(path.c_str(), buf, sizeof(buf));
  return n < 0 ? "" : std::string(buf, n);
}

std::vector<std::string> Children(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

bool Same(const struct stat& a, const struct stat& b, const std::string& pa,
          const std::string& pb) {
  if ((a.st_mode & S_IFMT) != (b.st_mode & S_IFMT)) return false;
  if (a.st_mode != b.st_mode || a.st_uid != b.st_uid || a.st_gid != b.st_gid) return false;
  if (S_ISLNK(a.st_mode)) return LinkTarget(pa) == LinkTarget(pb);
  if (!S_ISDIR(a.st_mode)) {
    if (a.st_size != b.st_size) return false;
    if (a.st_mtim.tv_sec != b.st_mtim.tv_sec || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec) {
      return false;
    }
  } else if (a.st_mtim.tv_sec != b.st_mtim.tv_sec || a.st_mtim.tv_nsec != b.st_mtim.tv_nsec) {
    return false;
  }
  return Xattrs(pa) == Xattrs(pb);
}

class Differ {
 public:
  Differ(std::string lower, std::string upper, std::set<std::string> excluded, archive* a,
         DiffLayer* result)
      : lower_(std::move(lower)),
        upper_(std::move(upper)),
        excluded_(std::move(excluded)),
        a_(a),
        result_(result) {}

  absl::Status Walk(const std::string& rel) {
    std::string up = rel.empty() ? upper_ : upper_ + "/" + rel;
    std::string low = rel.empty() ? lower_ : lower_ + "/" + rel;
    std::vector<std::string> ups = Children(up);
    std::set<std::string> upset(ups.begin(), ups.end());
    // What the lower tree has and the upper lacks: whiteouts.
    struct stat lst;
    if (lstat(low.c_str(), &lst) == 0 && S_ISDIR(lst.st_mode)) {
      for (const auto& n : Children(low)) {
        std::string child = rel.empty() ? n : rel + "/" + n;
        if (upset.count(n) || excluded_.count(child)) continue;
        if (absl::Status s = Whiteout(rel.empty() ? ".wh." + n : rel + "/.wh." + n); !s.ok()) {
          return s;
        }
      }
    }
    for (const auto& n : ups) {
      std::string child = rel.empty() ? n : rel + "/" + n;
      if (excluded_.count(child)) continue;
      std::string pu = upper_ + "/" + child, pl = lower_ + "/" + child;
      struct stat su, sl;
      if (lstat(pu.c_str(), &su) != 0) continue;
      bool in_lower = lstat(pl.c_str(), &sl) == 0;
      bool same = in_lower && Same(su, sl, pu, pl);
      if (!same) {
        // A type change needs the lower entry gone first.
        if (in_lower && (su.st_mode & S_IFMT) != (sl.st_mode & S_IFMT) && S_ISDIR(sl.st_mode)) {
          if (absl::Status s = Whiteout(rel.empty() ? ".wh." + n : rel + "/.wh." + n); !s.ok()) {
            return s;
          }
        }
        if (absl::Status s = Add(child, pu, su); !s.ok()) return s;
      }
      if (S_ISDIR(su.st_mode)) {
        if (!in_lower || !S_ISDIR(sl.st_mode)) {
          // A new directory: everything under it is new.
          if (absl::Status s = AddAll(child); !s.ok()) return s;
        } else if (absl::Status s = Walk(child); !s.ok()) {
          return s;
        }
      }
    }
    return absl::OkStatus();
  }

 private:
  absl::Status AddAll(const std::string& rel) {
    for (const auto& n : Children(upper_ + "/" + rel)) {
      std::string child = rel + "/" + n;
      if (excluded_.count(child)) continue;
      std::string p = upper_ + "/" + child;
      struct stat st;
      if (lstat(p.c_str(), &st) != 0) continue;
      if (absl::Status s = Add(child, p, st); !s.ok()) return s;
      if (S_ISDIR(st.st_mode)) {
        if (absl::Status s = AddAll(child); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  absl::Status Whiteout(const std::string& rel) {
    archive_entry* e = archive_entry_new();
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> owned(e, archive_entry_free);
    archive_entry_set_pathname(e, rel.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0);
    archive_entry_set_size(e, 0);
    ++result_->whiteouts;
    return Header(e, rel);
  }

  absl::Status Header(archive_entry* e, const std::string& rel) {
    if (archive_write_header(a_, e) != ARCHIVE_OK) {
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot write the layer at ", rel, ": ", archive_error_string(a_)));
    }
    return absl::OkStatus();
  }

  absl::Status Add(const std::string& rel, const std::string& path, const struct stat& st) {
    if (S_ISSOCK(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
      return absl::OkStatus();
    }
    archive_entry* e = archive_entry_new();
    std::unique_ptr<archive_entry, void (*)(archive_entry*)> owned(e, archive_entry_free);
    archive_entry_copy_stat(e, &st);
    archive_entry_set_pathname(e, rel.c_str());
    for (const auto& [k, v] : Xattrs(path)) {
      archive_entry_xattr_add_entry(e, k.c_str(), v.data(), v.size());
    }
    bool data = S_ISREG(st.st_mode);
    if (S_ISLNK(st.st_mode)) {
      archive_entry_set_symlink(e, LinkTarget(path).c_str());
    } else if (data && st.st_nlink > 1) {
      auto key = std::make_pair(st.st_dev, st.st_ino);
      auto it = links_.find(key);
      if (it != links_.end()) {
        archive_entry_set_hardlink(e, it->second.c_str());
        archive_entry_set_size(e, 0);
        data = false;
      } else {
        links_[key] = rel;
      }
    }
    if (!S_ISREG(st.st_mode)) archive_entry_set_size(e, 0);
    ++result_->entries;
    if (absl::Status s = Header(e, rel); !s.ok()) return s;
    if (!data || st.st_size == 0) return absl::OkStatus();
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (fd.get() < 0) {
      return absl::InternalError(absl::StrCat("cannot read ", rel, ": ", strerror(errno)));
    }
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = read(fd.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", rel, ": ", strerror(errno)));
      if (n == 0) break;
      if (archive_write_data(a_, buf.data(), n) < 0) {
        return absl::ResourceExhaustedError(
            absl::StrCat("cannot write the layer at ", rel, ": ", archive_error_string(a_)));
      }
      result_->content_bytes += n;
    }
    return absl::OkStatus();
  }

  std::string lower_, upper_;
  std::set<std::string> excluded_;
  archive* a_;
  DiffLayer* result_;
  std::map<std::pair<dev_t, ino_t>, std::string> links_;
};

}  // namespace

absl::StatusOr<DiffLayer> WriteDiffLayer(const std::string& lower, const std::string& upper,
                                         const std::vector<std::string>& excluded,
                                         ImageStore* store) {
  auto blob = store->NewBlob("");
  if (!blob.ok()) return blob.status();
  Sink sink;
  sink.blob = blob->get();
  std::unique_ptr<EVP_MD_CTX, void (*)(EVP_MD_CTX*)> md(EVP_MD_CTX_new(), EVP_MD_CTX_free);
  EVP_DigestInit_ex(md.get(), EVP_sha256(), nullptr);
  sink.md = md.get();
  // gzip framing (windowBits 15 + 16), fast level: layers are written once
  // and read rarely.
  if (deflateInit2(&sink.z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    return absl::InternalError("cannot start gzip");
  }
  std::unique_ptr<z_stream, int (*)(z_stream*)> zowned(&sink.z, deflateEnd);
  archive* a = archive_write_new();
  std::unique_ptr<archive, int (*)(archive*)> owned(a, archive_write_free);
  archive_write_set_format_pax_restricted(a);
  archive_write_set_bytes_in_last_block(a, 1);
  if (archive_write_open2(a, &sink, nullptr, OnWrite, nullptr, nullptr) != ARCHIVE_OK) {
    return absl::InternalError(archive_error_string(a));
  }
  DiffLayer result;
  Differ differ(lower, upper, std::set<std::string>(excluded.begin(), excluded.end()), a,
                &result);
  absl::Status walked = differ.Walk("");
  if (!walked.ok()) return walked;
  if (archive_write_close(a) != ARCHIVE_OK) {
    if (!sink.error.ok()) return sink.error;
    return absl::ResourceExhaustedError(archive_error_string(a));
  }
  if (!sink.Deflate(nullptr, 0, Z_FINISH)) return sink.error;
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned len = 0;
  EVP_DigestFinal_ex(md.get(), out, &len);
  result.diff_id = oci::DigestOf(out, len);
  result.size = (*blob)->bytes();
  auto digest = (*blob)->Commit();
  if (!digest.ok()) return digest.status();
  result.digest = *digest;
  return result;
}

}  // namespace airlock::vmmd
