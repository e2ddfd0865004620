#include "vmmd/store/image_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/fd_io.h"
#include "common/paths.h"
#include "common/subprocess.h"
#include "vmmd/store/layer_apply.h"

namespace airlock::vmmd {
namespace {

constexpr char kSchema[] =
    "CREATE TABLE IF NOT EXISTS images ("
    "  name TEXT PRIMARY KEY,"
    "  digest TEXT NOT NULL,"
    "  source TEXT NOT NULL,"
    "  description TEXT NOT NULL,"
    "  created INTEGER NOT NULL)";

std::string Hex(absl::string_view digest) {
  absl::ConsumePrefix(&digest, "sha256:");
  return std::string(digest);
}

std::string Finish(EVP_MD_CTX* md) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(md, out, &len);
  return oci::DigestOf(out, len);
}

uint64_t BytesOnDisk(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 ? static_cast<uint64_t>(st.st_blocks) * 512 : 0;
}

std::vector<std::string> ListDir(const std::string& path) {
  std::vector<std::string> out;
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    std::string n = e->d_name;
    if (n != "." && n != "..") out.push_back(n);
  }
  closedir(d);
  return out;
}

// SystemTool finds an administration tool such as mkfs.ext4, which lives in
// sbin: a daemon's PATH (or a test's) often lacks it.
std::string SystemTool(const std::string& name) {
  const char* path = getenv("PATH");
  std::string dirs = absl::StrCat(path ? path : "", ":/usr/sbin:/sbin:/usr/bin:/bin");
  for (absl::string_view dir : absl::StrSplit(dirs, ':', absl::SkipEmpty())) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return name;
}

}  // namespace

uint64_t DiskSizeFor(uint64_t bytes) {
  constexpr uint64_t kGiB = 1ull << 30;
  uint64_t want = bytes * 2 + 4 * kGiB;
  return want < 8 * kGiB ? 8 * kGiB : (want + kGiB - 1) / kGiB * kGiB;
}

BlobWriter::~BlobWriter() {
  if (fd_ >= 0) close(fd_);
  if (!tmp_.empty()) unlink(tmp_.c_str());
  if (md_ != nullptr) EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(md_));
}

absl::Status BlobWriter::Write(absl::string_view data) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(md_), data.data(), data.size());
  while (!data.empty()) {
    ssize_t n = write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "cannot write to the image store (", store_->root(), "): ", strerror(errno)));
    }
    data.remove_prefix(n);
    bytes_ += n;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> BlobWriter::Commit() {
  std::string digest = Finish(static_cast<EVP_MD_CTX*>(md_));
  if (!expected_.empty() && digest != expected_) {
    return absl::InvalidArgumentError(absl::StrCat(
        "blob digest mismatch: expected ", expected_, ", got ", digest,
        " (the source sent different content); nothing was stored"));
  }
  if (fsync(fd_) != 0 || close(fd_) != 0) {
    fd_ = -1;
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot write to the image store: ", strerror(errno)));
  }
  fd_ = -1;
  std::string dest = store_->BlobPath(digest);
  if (rename(tmp_.c_str(), dest.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename into ", dest, ": ", strerror(errno)));
  }
  tmp_.clear();
  return digest;
}

absl::StatusOr<std::unique_ptr<ImageStore>> ImageStore::Open(const std::string& root,
                                                             StateDb* db,
                                                             const std::string& scratch_base) {
  for (const char* sub : {"", "/blobs/sha256", "/disks", "/tmp"}) {
    if (absl::Status s = MakeDirs(root + sub, 0700); !s.ok()) return s;
  }
  // Whatever is in tmp/ belongs to work a previous vmmd did not finish.
  for (const auto& n : ListDir(root + "/tmp")) (void)RemoveTree(root + "/tmp/" + n);
  if (absl::Status s = db->Exec(kSchema); !s.ok()) return s;
  std::unique_ptr<ImageStore> store(new ImageStore(root, db));
  struct stat st;
  if (!scratch_base.empty() && stat(scratch_base.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
    // One directory per store (several vmmds may share a host's /dev/shm),
    // 0700 so nobody else can look at an image being unpacked.
    // The name is predictable and the base is world-writable: a directory
    // that exists is used only when it is a real directory of ours (never
    // through a symlink), emptied, and 0700; else no scratch at all.
    std::string dir = absl::StrCat(scratch_base, "/airlock-vmmd-",
                                   oci::Sha256Digest(root).substr(7, 16));
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) dir.clear();
    struct stat own;
    if (!dir.empty() && lstat(dir.c_str(), &own) == 0 && S_ISDIR(own.st_mode) &&
        own.st_uid == geteuid() && chmod(dir.c_str(), 0700) == 0) {
      for (const auto& n : ListDir(dir)) (void)RemoveTree(dir + "/" + n);
      store->scratch_ = dir;
    }
  }
  return store;
}

ImageStore::~ImageStore() {
  if (!scratch_.empty()) (void)RemoveTree(scratch_);
}

std::string ImageStore::ScratchFor(uint64_t bytes) {
  struct statvfs vfs;
  // Room for the unpacked tree (layers expand) with a margin.
  if (!scratch_.empty() && statvfs(scratch_.c_str(), &vfs) == 0 &&
      static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize > bytes * 4 + (512ull << 20)) {
    std::lock_guard<std::mutex> lock(tmp_mu_);
    return absl::StrCat(scratch_, "/disk-", ++tmp_counter_);
  }
  return TempPath("disk");
}

std::string ImageStore::BlobPath(absl::string_view digest) const {
  return absl::StrCat(root_, "/blobs/sha256/", Hex(digest));
}

bool ImageStore::HasBlob(absl::string_view digest) const {
  if (!oci::ValidDigest(digest)) return false;
  struct stat st;
  return stat(BlobPath(digest).c_str(), &st) == 0;
}

std::string ImageStore::TempPath(const std::string& what) {
  std::lock_guard<std::mutex> lock(tmp_mu_);
  return absl::StrCat(root_, "/tmp/", what, "-", getpid(), "-", ++tmp_counter_, "-", time(nullptr));
}

absl::StatusOr<std::unique_ptr<BlobWriter>> ImageStore::NewBlob(const std::string& expected) {
  if (!expected.empty() && !oci::ValidDigest(expected)) {
    return absl::InvalidArgumentError(absl::StrCat("invalid digest \"", expected, "\""));
  }
  std::unique_ptr<BlobWriter> w(new BlobWriter());
  w->store_ = this;
  w->expected_ = expected;
  w->tmp_ = TempPath("blob");
  w->fd_ = open(w->tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (w->fd_ < 0) {
    w->tmp_.clear();
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot create a blob in ", root_, "/tmp: ", strerror(errno)));
  }
  w->md_ = EVP_MD_CTX_new();
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(w->md_), EVP_sha256(), nullptr);
  return w;
}

absl::StatusOr<std::string> ImageStore::PutBlobFile(const std::string& path,
                                                    const std::string& expected,
                                                    const Progress& progress) {
  if (!expected.empty() && HasBlob(expected)) return expected;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return absl::NotFoundError(absl::StrCat("cannot open ", path, ": ", strerror(errno)));
  }
  struct stat st;
  fstat(fd.get(), &st);
  auto w = NewBlob(expected);
  if (!w.ok()) return w.status();
  std::string buf(1 << 20, '\0');
  for (;;) {
    ssize_t n = read(fd.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::InternalError(absl::StrCat("cannot read ", path, ": ", strerror(errno)));
    if (n == 0) break;
    if (absl::Status s = (*w)->Write(absl::string_view(buf.data(), n)); !s.ok()) return s;
    if (progress) progress(path, (*w)->bytes(), st.st_size);
  }
  return (*w)->Commit();
}

absl::StatusOr<std::string> ImageStore::PutBlob(absl::string_view data,
                                                const std::string& expected) {
  std::string digest = oci::Sha256Digest(data);
  if (!expected.empty() && digest != expected) {
    return absl::InvalidArgumentError(
        absl::StrCat("blob digest mismatch: expected ", expected, ", got ", digest));
  }
  if (HasBlob(digest)) return digest;
  auto w = NewBlob(digest);
  if (!w.ok()) return w.status();
  if (absl::Status s = (*w)->Write(data); !s.ok()) return s;
  return (*w)->Commit();
}

absl::StatusOr<std::string> ImageStore::ReadBlob(absl::string_view digest, size_t max) const {
  if (!HasBlob(digest)) {
    return absl::NotFoundError(absl::StrCat("blob ", digest, " is not in the image store"));
  }
  std::string path = BlobPath(digest);
  struct stat st;
  if (stat(path.c_str(), &st) != 0 || static_cast<size_t>(st.st_size) > max) {
    return absl::InvalidArgumentError(absl::StrCat("blob ", digest, " is too large to read"));
  }
  return ReadFileToString(path);
}

absl::StatusOr<StoredImage> ImageStore::Load(const std::string& digest) const {
  return LoadNamed("", digest, "", "", 0);
}

absl::StatusOr<StoredImage> ImageStore::LoadNamed(const std::string& name,
                                                  const std::string& digest,
                                                  const std::string& source,
                                                  const std::string& description,
                                                  int64_t created) const {
  auto mtext = ReadBlob(digest);
  if (!mtext.ok()) return mtext.status();
  auto manifest = oci::ParseManifest(*mtext);
  if (!manifest.ok()) return manifest.status();
  auto ctext = ReadBlob(manifest->config.digest);
  if (!ctext.ok()) return ctext.status();
  auto config = oci::ParseConfig(*ctext);
  if (!config.ok()) return config.status();
  StoredImage img;
  img.name = name;
  img.digest = digest;
  img.id = manifest->config.digest;
  img.source = source;
  img.description = description;
  img.created = created;
  img.manifest = std::move(*manifest);
  img.config = std::move(*config);
  return img;
}

absl::Status ImageStore::Tag(const std::string& name, const std::string& manifest_digest,
                             const std::string& source, const std::string& description) {
  auto img = Load(manifest_digest);
  if (!img.ok()) return img.status();
  for (const auto& l : img->manifest.layers) {
    if (!HasBlob(l.digest)) {
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", l.digest, " of ", name, " is not in the image store"));
    }
  }
  if (img->config.diff_ids.size() != img->manifest.layers.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the image has ", img->manifest.layers.size(), " layers but its config lists ",
        img->config.diff_ids.size(), " diff_ids"));
  }
  return db_->Exec(
      "INSERT INTO images(name, digest, source, description, created) VALUES (?, ?, ?, ?, ?) "
      "ON CONFLICT(name) DO UPDATE SET digest = excluded.digest, source = excluded.source, "
      "description = excluded.description, created = excluded.created",
      {name, manifest_digest, source, description, static_cast<int64_t>(time(nullptr))});
}

absl::StatusOr<StoredImage> ImageStore::FindName(const std::string& name) const {
  auto rows = db_->Query(
      "SELECT name, digest, source, description, created FROM images WHERE name = ?", {name});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) {
    return absl::NotFoundError(absl::StrCat("no image named \"", name, "\" in the store"));
  }
  const auto& r = (*rows)[0];
  return LoadNamed(r[0], r[1], r[2], r[3], std::stoll(r[4]));
}

absl::StatusOr<StoredImage> ImageStore::Find(const std::string& ref) const {
  auto named = FindName(ref);
  if (named.ok() || named.status().code() != absl::StatusCode::kNotFound) return named;
  auto rows = db_->Query("SELECT name, digest, source, description, created FROM images ORDER BY name");
  if (!rows.ok()) return rows.status();
  // A digest or a prefix of one, of the manifest or the config.
  std::string hex = Hex(ref);
  bool hexy = hex.size() >= 4 && hex.size() <= 64 &&
              hex.find_first_not_of("0123456789abcdef") == std::string::npos;
  if (!hexy) {
    return absl::NotFoundError(absl::StrCat("no image \"", ref, "\" in the store (`airlock "
                                            "template ls` lists them)"));
  }
  std::vector<StoredImage> matches;
  std::set<std::string> seen;
  for (const auto& r : *rows) {
    auto img = LoadNamed(r[0], r[1], r[2], r[3], std::stoll(r[4]));
    if (!img.ok()) continue;
    if (absl::StartsWith(Hex(img->digest), hex) || absl::StartsWith(Hex(img->id), hex)) {
      if (seen.insert(img->digest).second) matches.push_back(*img);
    }
  }
  if (matches.empty()) {
    return absl::NotFoundError(absl::StrCat("no image \"", ref, "\" in the store"));
  }
  if (matches.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat("\"", ref, "\" matches ", matches.size(),
                                                   " images; give more digits"));
  }
  return matches[0];
}

std::vector<StoredImage> ImageStore::List() const {
  std::vector<StoredImage> out;
  auto rows = db_->Query("SELECT name, digest, source, description, created FROM images ORDER BY name");
  if (!rows.ok()) return out;
  for (const auto& r : *rows) {
    auto img = LoadNamed(r[0], r[1], r[2], r[3], std::stoll(r[4]));
    if (img.ok()) out.push_back(std::move(*img));
  }
  return out;
}

std::vector<std::string> ImageStore::NamesOf(const std::string& digest) const {
  std::vector<std::string> out;
  auto rows = db_->Query("SELECT name FROM images WHERE digest = ? ORDER BY name", {digest});
  if (rows.ok()) {
    for (const auto& r : *rows) out.push_back(r[0]);
  }
  return out;
}

absl::Status ImageStore::Untag(const std::string& name) {
  if (absl::Status s = db_->Exec("DELETE FROM images WHERE name = ?", {name}); !s.ok()) return s;
  if (db_->Changes() == 0) {
    return absl::NotFoundError(absl::StrCat("no image named \"", name, "\""));
  }
  return absl::OkStatus();
}

std::string ImageStore::DiskPath(const std::string& digest) const {
  return absl::StrCat(root_, "/disks/", Hex(digest), "/disk.raw");
}

absl::StatusOr<std::string> ImageStore::BootDisk(const StoredImage& image,
                                                 const Progress& progress) {
  std::lock_guard<std::mutex> lock(build_mu_);
  // By manifest digest: it names every layer blob (each verified), while
  // two images may share a config and differ in their layers.
  std::string disk = DiskPath(image.digest);
  struct stat st;
  if (stat(disk.c_str(), &st) == 0) return disk;
  uint64_t packed = 0;
  for (const auto& l : image.manifest.layers) packed += static_cast<uint64_t>(l.size);
  std::string scratch = ScratchFor(packed);
  std::string tree = scratch + "/root";
  if (absl::Status s = MakeDirs(tree, 0755); !s.ok()) return s;
  auto cleanup = [&] { (void)RemoveTree(scratch); };
  uint64_t bytes = 0;
  size_t n = image.manifest.layers.size();
  for (size_t i = 0; i < n; ++i) {
    const auto& layer = image.manifest.layers[i];
    if (progress) progress(absl::StrCat("unpacking layer ", i + 1, "/", n), i, n);
    auto applied = ApplyLayer(BlobPath(layer.digest), tree);
    if (!applied.ok()) {
      cleanup();
      return absl::Status(applied.status().code(),
                          absl::StrCat("layer ", i + 1, " (", layer.digest.substr(0, 19), "): ",
                                       applied.status().message()));
    }
    bytes += applied->bytes;
  }
  chmod(tree.c_str(), 0755);
  if (progress) progress("making the boot disk", n, n);
  // The disk itself is written on the store's filesystem: it is renamed
  // into disks/ when complete.
  std::string raw = TempPath("disk") + ".raw";
  CommandResult r = RunCommand({SystemTool("mkfs.ext4"), "-q", "-F", "-L", "airlock-root", "-E",
                                "lazy_itable_init=1,lazy_journal_init=1", "-d", tree, raw,
                                absl::StrCat(DiskSizeFor(bytes) >> 20, "M")},
                               {}, "", 1800);
  if (r.exit_code != 0) {
    cleanup();
    unlink(raw.c_str());
    return absl::ResourceExhaustedError(
        absl::StrCat("cannot make the boot disk of ", image.name.empty() ? image.id : image.name,
                     ": mkfs.ext4: ", r.err));
  }
  chmod(raw.c_str(), 0444);
  std::string dir = disk.substr(0, disk.rfind('/'));
  if (absl::Status s = MakeDirs(dir, 0700); !s.ok()) {
    cleanup();
    unlink(raw.c_str());
    return s;
  }
  if (rename(raw.c_str(), disk.c_str()) != 0) {
    cleanup();
    unlink(raw.c_str());
    return absl::InternalError(absl::StrCat("cannot rename into ", disk, ": ", strerror(errno)));
  }
  cleanup();
  return disk;
}

uint64_t ImageStore::SizeOf(const StoredImage& image) const {
  uint64_t total = BytesOnDisk(BlobPath(image.digest)) + BytesOnDisk(BlobPath(image.id));
  for (const auto& l : image.manifest.layers) total += BytesOnDisk(BlobPath(l.digest));
  return total + BytesOnDisk(DiskPath(image.digest));
}

absl::StatusOr<uint64_t> ImageStore::CollectGarbage(const std::set<std::string>& in_use) {
  std::unique_lock<std::shared_mutex> exclusive(ops_mu_);
  std::set<std::string> manifests = in_use;
  auto rows = db_->Query("SELECT digest FROM images");
  if (!rows.ok()) return rows.status();
  for (const auto& r : *rows) manifests.insert(r[0]);
  std::set<std::string> keep_blobs, keep_disks;
  for (const auto& m : manifests) {
    auto img = Load(m);
    if (!img.ok()) {
      // An unreadable manifest still needs its own blob kept.
      keep_blobs.insert(Hex(m));
      continue;
    }
    keep_blobs.insert(Hex(img->digest));
    keep_blobs.insert(Hex(img->id));
    keep_disks.insert(Hex(img->digest));
    for (const auto& l : img->manifest.layers) keep_blobs.insert(Hex(l.digest));
  }
  uint64_t freed = 0;
  std::string blobs = root_ + "/blobs/sha256";
  for (const auto& n : ListDir(blobs)) {
    if (keep_blobs.count(n)) continue;
    freed += BytesOnDisk(blobs + "/" + n);
    unlink((blobs + "/" + n).c_str());
  }
  std::string disks = root_ + "/disks";
  for (const auto& n : ListDir(disks)) {
    if (keep_disks.count(n)) continue;
    freed += BytesOnDisk(disks + "/" + n + "/disk.raw");
    (void)RemoveTree(disks + "/" + n);
  }
  return freed;
}

}  // namespace airlock::vmmd
