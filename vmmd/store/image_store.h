// vmmd's content-addressed image store. Blobs (layers, configs, manifests)
// live once under blobs/sha256/<hex>, shared by every image that names
// them; names ("go-agent:v1", "docker.io/library/golang:1.25") map to a
// manifest digest in vmmd's SQLite file; each image's boot disk is built
// once from its layers and cached under disks/<manifest hex>/ (sandboxes
// put their own copy-on-write overlay on it).
//
// Crash safety: every blob and disk is written under tmp/ and renamed into
// place only when complete and verified, and a name is recorded only once
// every blob it needs is in place, so a kill -9 at any point leaves the
// store as it was before the interrupted operation (plus garbage in tmp/,
// swept at Open).
#ifndef AIRLOCK_VMMD_STORE_IMAGE_STORE_H_
#define AIRLOCK_VMMD_STORE_IMAGE_STORE_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <shared_mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/state_db.h"
#include "vmmd/store/oci.h"

namespace airlock::vmmd {

// StoredImage is one named image with its documents.
struct StoredImage {
  std::string name;
  // Manifest digest; the image's id is its config digest.
  std::string digest;
  std::string id;
  // Where it came from: "registry HOST/REPO", "load FILE", "save SANDBOX",
  // "built-in".
  std::string source;
  std::string description;
  int64_t created = 0;
  oci::Manifest manifest;
  oci::ImageConfig config;
};

// Progress reports long work: what is being done and bytes so far.
using Progress = std::function<void(const std::string& what, uint64_t done, uint64_t total)>;

class ImageStore;

// BlobWriter streams one blob into the store; Commit verifies its digest
// and renames it into place. Dropped without Commit, it leaves nothing.
class BlobWriter {
 public:
  ~BlobWriter();
  absl::Status Write(absl::string_view data);
  // Commit finishes the blob: INVALID_ARGUMENT when its digest is not
  // `expected` (when one was given). Returns the digest.
  absl::StatusOr<std::string> Commit();
  uint64_t bytes() const { return bytes_; }

 private:
  friend class ImageStore;
  BlobWriter() = default;
  ImageStore* store_ = nullptr;
  std::string expected_, tmp_;
  int fd_ = -1;
  void* md_ = nullptr;  // EVP_MD_CTX
  uint64_t bytes_ = 0;
};

class ImageStore {
 public:
  // Open prepares the store under `root` (made 0700), its table in `db`,
  // and sweeps leftovers of interrupted work from tmp/. Boot disks are
  // unpacked in a private directory under `scratch_base` (a tmpfs such as
  // /dev/shm: several times faster than a disk for a tree of small files)
  // when it has room, else in tmp/; "" always uses tmp/.
  static absl::StatusOr<std::unique_ptr<ImageStore>> Open(const std::string& root, StateDb* db,
                                                          const std::string& scratch_base = "");

  // The private scratch directory goes with the store (a tmpfs is shared
  // by every vmmd of the host; empty directories would pile up there).
  ~ImageStore();

  const std::string& root() const { return root_; }
  std::string BlobPath(absl::string_view digest) const;
  bool HasBlob(absl::string_view digest) const;
  // NewBlob starts a blob; `expected` may be empty (computed at Commit).
  absl::StatusOr<std::unique_ptr<BlobWriter>> NewBlob(const std::string& expected);
  // PutBlobFile copies the file at `path` in; PutBlob stores bytes.
  absl::StatusOr<std::string> PutBlobFile(const std::string& path, const std::string& expected,
                                          const Progress& progress = nullptr);
  absl::StatusOr<std::string> PutBlob(absl::string_view data, const std::string& expected = "");
  // ReadBlob reads a small blob (a manifest or config), at most `max` bytes.
  absl::StatusOr<std::string> ReadBlob(absl::string_view digest, size_t max = 4 << 20) const;

  // Tag names the image whose manifest is `manifest_digest` (its config and
  // layers must be in the store), replacing what the name meant before.
  absl::Status Tag(const std::string& name, const std::string& manifest_digest,
                   const std::string& source, const std::string& description = "");
  // Find resolves a name, a full digest ("sha256:..." of the manifest or
  // the config) or a unique prefix of at least 4 hex digits of either.
  // NOT_FOUND says so; an ambiguous prefix is INVALID_ARGUMENT.
  absl::StatusOr<StoredImage> Find(const std::string& ref) const;
  // FindName resolves an exact name only.
  absl::StatusOr<StoredImage> FindName(const std::string& name) const;
  // Load reads the image whose manifest is `digest` (name left empty).
  absl::StatusOr<StoredImage> Load(const std::string& digest) const;
  std::vector<StoredImage> List() const;
  // Untag drops a name; NOT_FOUND when it is not there.
  absl::Status Untag(const std::string& name);
  // NamesOf lists the names pointing at manifest `digest`.
  std::vector<std::string> NamesOf(const std::string& digest) const;

  // BootDisk is the raw ext4 disk of `image`, built on first use from its
  // layers (applied in a scratch tree) and cached by manifest digest.
  absl::StatusOr<std::string> BootDisk(const StoredImage& image, const Progress& progress);
  // DiskPath is where the boot disk of the image with manifest `digest` is
  // (it may not be built yet).
  std::string DiskPath(const std::string& digest) const;

  // SizeOf is the bytes on disk of the image's blobs and its boot disk.
  uint64_t SizeOf(const StoredImage& image) const;

  // Writing is held by every pull, load and save from its first blob to
  // its Tag, so garbage collection never takes blobs not yet named.
  std::shared_lock<std::shared_mutex> Writing() { return std::shared_lock<std::shared_mutex>(ops_mu_); }

  // CollectGarbage deletes blobs and boot disks that no named image and no
  // manifest digest in `in_use` needs. Returns the bytes freed.
  absl::StatusOr<uint64_t> CollectGarbage(const std::set<std::string>& in_use);

  // TempPath is a fresh scratch path under tmp/ (swept at Open).
  std::string TempPath(const std::string& what);

 private:
  friend class BlobWriter;
  ImageStore(std::string root, StateDb* db) : root_(std::move(root)), db_(db) {}
  // ScratchFor is where a tree of about `bytes` is unpacked.
  std::string ScratchFor(uint64_t bytes);
  absl::StatusOr<StoredImage> LoadNamed(const std::string& name, const std::string& digest,
                                        const std::string& source, const std::string& description,
                                        int64_t created) const;

  std::string root_;
  StateDb* db_;
  // Private (0700) directory under the scratch base; "" for none.
  std::string scratch_;
  // Boot disks are built one at a time (each is CPU- and disk-bound).
  std::mutex build_mu_;
  std::mutex tmp_mu_;
  std::shared_mutex ops_mu_;
  uint64_t tmp_counter_ = 0;
};

// DiskSizeFor is the (sparse) size of a boot disk holding `bytes` of files:
// at least 8 GiB, with room to grow.
uint64_t DiskSizeFor(uint64_t bytes);

}  // namespace airlock::vmmd

#endif  // AIRLOCK_VMMD_STORE_IMAGE_STORE_H_
