#include "vmmd/store/layer_apply.h"

#include <archive.h>
#include <archive_entry.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

// Entry is one member of a test layer.
struct Entry {
  std::string path;
  mode_t type = AE_IFREG;
  std::string data;      // file content, or the symlink target
  std::string hardlink;  // set: a hard link to this path
  mode_t perm = 0644;
  int uid = 0;
};

std::string TempDir() {
  std::string tmpl = ::testing::TempDir() + "/layerXXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  return mkdtemp(buf.data());
}

// WriteLayer writes `entries` as a tar with `filter` ("gzip", "zstd", "").
std::string WriteLayer(const std::string& dir, const std::string& name,
                       const std::vector<Entry>& entries, const std::string& filter = "gzip") {
  std::string path = dir + "/" + name;
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  if (filter == "gzip") archive_write_add_filter_gzip(a);
  if (filter == "zstd") archive_write_add_filter_zstd(a);
  EXPECT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& en : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, en.path.c_str());
    archive_entry_set_uid(e, en.uid);
    archive_entry_set_gid(e, en.uid);
    archive_entry_set_mtime(e, 1700000000, 0);
    if (!en.hardlink.empty()) {
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, en.perm);
      archive_entry_set_hardlink(e, en.hardlink.c_str());
      archive_entry_set_size(e, 0);
    } else {
      archive_entry_set_filetype(e, en.type);
      archive_entry_set_perm(e, en.type == AE_IFDIR && en.perm == 0644 ? 0755 : en.perm);
      if (en.type == AE_IFLNK) archive_entry_set_symlink(e, en.data.c_str());
      if (en.type == AE_IFCHR) archive_entry_set_rdev(e, makedev(1, 3));
      archive_entry_set_size(e, en.type == AE_IFREG ? en.data.size() : 0);
    }
    EXPECT_EQ(archive_write_header(a, e), ARCHIVE_OK) << en.path;
    if (en.type == AE_IFREG && en.hardlink.empty() && !en.data.empty()) {
      archive_write_data(a, en.data.data(), en.data.size());
    }
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
  return path;
}

std::string Read(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

class LayerApplyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir();
    root_ = dir_ + "/root";
    mkdir(root_.c_str(), 0755);
  }
  std::string dir_, root_;
};

TEST_F(LayerApplyTest, AppliesFilesDirsSymlinksAndHardLinks) {
  auto layer = WriteLayer(dir_, "l1.tar.gz",
                          {{"./etc/", AE_IFDIR},
                           {"./etc/hostname", AE_IFREG, "box\n"},
                           {"bin/", AE_IFDIR},
                           {"bin/tool", AE_IFREG, "#!/bin/sh\n", "", 0755},
                           {"bin/alias", AE_IFLNK, "tool"},
                           {"bin/same", AE_IFREG, "", "bin/tool"},
                           {"dev/", AE_IFDIR},
                           {"dev/null", AE_IFCHR}});
  auto stats = ApplyLayer(layer, root_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->skipped_devices, 1u);
  EXPECT_EQ(Read(root_ + "/etc/hostname"), "box\n");
  struct stat tool, same, alias;
  ASSERT_EQ(stat((root_ + "/bin/tool").c_str(), &tool), 0);
  ASSERT_EQ(stat((root_ + "/bin/same").c_str(), &same), 0);
  EXPECT_EQ(tool.st_ino, same.st_ino);
  EXPECT_EQ(tool.st_mode & 07777, 0755u);
  ASSERT_EQ(lstat((root_ + "/bin/alias").c_str(), &alias), 0);
  EXPECT_TRUE(S_ISLNK(alias.st_mode));
  EXPECT_FALSE(Exists(root_ + "/dev/null"));
}

// Extended attributes (file capabilities are one: security.capability)
// travel with their files where the filesystem keeps them.
TEST_F(LayerApplyTest, KeepsExtendedAttributes) {
  std::string probe = dir_ + "/xattr-probe";
  std::ofstream(probe) << "x";
  if (setxattr(probe.c_str(), "user.airlock", "1", 1, 0) != 0) {
    GTEST_SKIP() << "this filesystem keeps no user xattrs: " << strerror(errno);
  }
  std::string path = dir_ + "/x.tar";
  archive* a = archive_write_new();
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, "tool");
  archive_entry_set_filetype(e, AE_IFREG);
  archive_entry_set_perm(e, 0755);
  archive_entry_set_size(e, 2);
  archive_entry_xattr_add_entry(e, "user.origin", "layer", 5);
  ASSERT_EQ(archive_write_header(a, e), ARCHIVE_OK);
  archive_write_data(a, "hi", 2);
  archive_entry_free(e);
  archive_write_close(a);
  archive_write_free(a);
  ASSERT_TRUE(ApplyLayer(path, root_).ok());
  char value[16] = {0};
  ssize_t n = getxattr((root_ + "/tool").c_str(), "user.origin", value, sizeof(value));
  ASSERT_EQ(n, 5) << strerror(errno);
  EXPECT_EQ(std::string(value, n), "layer");
}

TEST_F(LayerApplyTest, ReadsZstdAndUncompressedLayers) {
  auto z = WriteLayer(dir_, "z.tar.zst", {{"a", AE_IFREG, "zstd"}}, "zstd");
  auto t = WriteLayer(dir_, "t.tar", {{"b", AE_IFREG, "plain"}}, "");
  ASSERT_TRUE(ApplyLayer(z, root_).ok());
  ASSERT_TRUE(ApplyLayer(t, root_).ok());
  EXPECT_EQ(Read(root_ + "/a"), "zstd");
  EXPECT_EQ(Read(root_ + "/b"), "plain");
}

TEST_F(LayerApplyTest, WhiteoutDeletesALowerFileAndOpaqueHidesADirectory) {
  auto lower = WriteLayer(dir_, "lower.tar.gz",
                          {{"keep", AE_IFREG, "k"},
                           {"gone", AE_IFREG, "g"},
                           {"tree/", AE_IFDIR},
                           {"tree/sub/", AE_IFDIR},
                           {"tree/sub/deep", AE_IFREG, "d"},
                           {"opq/", AE_IFDIR},
                           {"opq/old", AE_IFREG, "o"},
                           {"opq/old-dir/", AE_IFDIR}});
  auto upper = WriteLayer(dir_, "upper.tar.gz",
                          {{".wh.gone", AE_IFREG},
                           {".wh.tree", AE_IFREG},
                           {"opq/", AE_IFDIR},
                           {"opq/new", AE_IFREG, "n"},
                           {"opq/.wh..wh..opq", AE_IFREG}});
  ASSERT_TRUE(ApplyLayer(lower, root_).ok());
  auto stats = ApplyLayer(upper, root_);
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->whiteouts, 3u);
  EXPECT_TRUE(Exists(root_ + "/keep"));
  EXPECT_FALSE(Exists(root_ + "/gone"));
  EXPECT_FALSE(Exists(root_ + "/tree"));
  EXPECT_FALSE(Exists(root_ + "/.wh.gone"));
  EXPECT_TRUE(Exists(root_ + "/opq/new"));
  EXPECT_FALSE(Exists(root_ + "/opq/old"));
  EXPECT_FALSE(Exists(root_ + "/opq/old-dir"));
  EXPECT_FALSE(Exists(root_ + "/opq/.wh..wh..opq"));
}

TEST_F(LayerApplyTest, AFileReplacesADirectoryAndBack) {
  auto lower = WriteLayer(dir_, "l.tar.gz", {{"x/", AE_IFDIR}, {"x/y", AE_IFREG, "1"},
                                             {"f", AE_IFREG, "2"}});
  auto upper = WriteLayer(dir_, "u.tar.gz", {{"x", AE_IFREG, "now a file"}, {"f/", AE_IFDIR}});
  ASSERT_TRUE(ApplyLayer(lower, root_).ok());
  ASSERT_TRUE(ApplyLayer(upper, root_).ok());
  EXPECT_EQ(Read(root_ + "/x"), "now a file");
  struct stat st;
  ASSERT_EQ(lstat((root_ + "/f").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST_F(LayerApplyTest, DotDotEntryIsRefusedByName) {
  auto layer = WriteLayer(dir_, "evil.tar.gz", {{"ok", AE_IFREG, "1"},
                                                {"a/../../escape", AE_IFREG, "x"}});
  auto r = ApplyLayer(layer, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("\"a/../../escape\""), std::string::npos)
      << r.status();
  EXPECT_FALSE(Exists(dir_ + "/escape"));
}

TEST_F(LayerApplyTest, AbsoluteEntryIsRefused) {
  auto layer = WriteLayer(dir_, "abs.tar.gz", {{"/etc/evil", AE_IFREG, "x"}});
  auto r = ApplyLayer(layer, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("absolute path"), std::string::npos) << r.status();
}

TEST_F(LayerApplyTest, WriteThroughASymlinkOfALowerLayerIsRefused) {
  std::string outside = dir_ + "/outside";
  mkdir(outside.c_str(), 0755);
  auto lower = WriteLayer(dir_, "l.tar.gz", {{"link", AE_IFLNK, outside}});
  auto upper = WriteLayer(dir_, "u.tar.gz", {{"link/planted", AE_IFREG, "x"}});
  ASSERT_TRUE(ApplyLayer(lower, root_).ok());
  auto r = ApplyLayer(upper, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("through the symlink \"link\""), std::string::npos)
      << r.status();
  EXPECT_FALSE(Exists(outside + "/planted"));
}

TEST_F(LayerApplyTest, SymlinkAndWriteInTheSameLayerIsRefused) {
  std::string outside = dir_ + "/outside2";
  mkdir(outside.c_str(), 0755);
  auto layer = WriteLayer(dir_, "s.tar.gz", {{"d", AE_IFLNK, outside},
                                             {"d/planted", AE_IFREG, "x"}});
  auto r = ApplyLayer(layer, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(Exists(outside + "/planted"));
}

TEST_F(LayerApplyTest, WhiteoutThroughASymlinkDeletesNothingOutside) {
  std::string outside = dir_ + "/outside3";
  mkdir(outside.c_str(), 0755);
  std::ofstream(outside + "/precious") << "keep me";
  auto lower = WriteLayer(dir_, "l.tar.gz", {{"link", AE_IFLNK, outside}});
  auto upper = WriteLayer(dir_, "u.tar.gz", {{"link/.wh.precious", AE_IFREG}});
  ASSERT_TRUE(ApplyLayer(lower, root_).ok());
  EXPECT_FALSE(ApplyLayer(upper, root_).ok());
  EXPECT_TRUE(Exists(outside + "/precious"));
}

// A directory's mode and times are set after the layer; a later entry that
// turns the path into a symlink must not carry them outside.
TEST_F(LayerApplyTest, DirectoryModesNeverLandThroughALaterSymlink) {
  std::string outside = dir_ + "/outside-dir";
  mkdir(outside.c_str(), 0700);
  mkdir((outside + "/etc").c_str(), 0700);
  auto layer = WriteLayer(dir_, "chmod.tar.gz",
                          {{"x/", AE_IFDIR}, {"x/etc/", AE_IFDIR, "", "", 0777},
                           {"x", AE_IFLNK, outside}});
  (void)ApplyLayer(layer, root_);
  struct stat st;
  ASSERT_EQ(stat((outside + "/etc").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(outside.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

// An opaque marker acts when it is read; a symlink made afterwards at the
// same path never lets it empty another directory.
TEST_F(LayerApplyTest, OpaqueMarkerNeverEmptiesADirectoryBehindASymlink) {
  std::string outside = dir_ + "/outside-opq";
  mkdir(outside.c_str(), 0755);
  std::ofstream(outside + "/precious") << "keep";
  auto lower = WriteLayer(dir_, "l.tar.gz", {{"x/", AE_IFDIR}, {"x/old", AE_IFREG, "o"}});
  auto upper = WriteLayer(dir_, "u.tar.gz", {{"x/.wh..wh..opq", AE_IFREG},
                                             {"x", AE_IFLNK, outside},
                                             {"y/.wh..wh..opq", AE_IFREG},
                                             {"y", AE_IFLNK, outside}});
  ASSERT_TRUE(ApplyLayer(lower, root_).ok());
  (void)ApplyLayer(upper, root_);
  EXPECT_TRUE(Exists(outside + "/precious"));
}

TEST_F(LayerApplyTest, AWhiteoutOfDotOrDotDotIsRefused) {
  for (const char* name : {"a/.wh...", "a/.wh..", "a/.wh."}) {
    std::string sub = dir_ + "/r" + std::to_string(reinterpret_cast<uintptr_t>(name) % 1000);
    mkdir(sub.c_str(), 0755);
    std::ofstream(sub + "/sibling") << "x";
    auto layer = WriteLayer(dir_, "w.tar", {{"a/", AE_IFDIR}, {name, AE_IFREG}}, "");
    auto r = ApplyLayer(layer, sub);
    ASSERT_FALSE(r.ok()) << name;
    EXPECT_NE(r.status().message().find("which is not a name"), std::string::npos) << r.status();
    EXPECT_TRUE(Exists(sub + "/sibling")) << name;
    EXPECT_TRUE(Exists(dir_ + "/root")) << name;
  }
}

TEST_F(LayerApplyTest, DirectoriesGetTheirModesAfterTheirContents) {
  auto layer = WriteLayer(dir_, "ro.tar.gz", {{"ro/", AE_IFDIR, "", "", 0555},
                                              {"ro/inside", AE_IFREG, "in"}});
  ASSERT_TRUE(ApplyLayer(layer, root_).ok());
  EXPECT_EQ(Read(root_ + "/ro/inside"), "in");
  struct stat st;
  ASSERT_EQ(stat((root_ + "/ro").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0555u);
  EXPECT_EQ(st.st_mtime, 1700000000);
}

TEST_F(LayerApplyTest, HardLinkOutsideTheRootIsRefused) {
  auto layer = WriteLayer(dir_, "h.tar.gz", {{"x", AE_IFREG, "", "../../etc/passwd"}});
  auto r = ApplyLayer(layer, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("hard link"), std::string::npos) << r.status();
}

TEST_F(LayerApplyTest, CorruptLayerIsAClearError) {
  std::string path = dir_ + "/junk.tar.gz";
  std::ofstream(path) << "\x1f\x8b this is not gzip";
  auto r = ApplyLayer(path, root_);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(NormalizeEntryPathTest, Shapes) {
  EXPECT_EQ(*NormalizeEntryPath("./a//b/./c/"), "a/b/c");
  EXPECT_EQ(*NormalizeEntryPath("./"), "");
  EXPECT_FALSE(NormalizeEntryPath("a/../b").ok());
  EXPECT_FALSE(NormalizeEntryPath("/a").ok());
}

}  // namespace
}  // namespace airlock::vmmd
