// FileWriter's placements and owners, and MakeDirectory's owner, on a
// real filesystem. Ownership is checked for uid 1000 when the test runs as
// root (outside Bazel's sandbox, which maps no such uid).
#include "guest/files.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& name) const { return dir_.path() + "/" + name; }

  // Write writes `content` through a FileWriter in pieces of at most 64 KiB.
  absl::Status Write(const std::string& path, const std::string& content, unsigned mode,
                     Placement placement, std::optional<FileOwner> owner = std::nullopt,
                     bool* kept = nullptr) {
    FileWriter w;
    if (absl::Status s = w.Open(path, mode, placement, owner); !s.ok()) return s;
    for (size_t i = 0; i < content.size(); i += 64 << 10) {
      if (absl::Status s = w.Write(absl::string_view(content).substr(i, 64 << 10)); !s.ok()) {
        return s;
      }
    }
    absl::Status s = w.Close();
    if (kept != nullptr) *kept = w.kept_existing();
    if (s.ok() && !w.kept_existing()) {
      EXPECT_EQ(w.written(), content.size());
    }
    return s;
  }

  // Leftovers are the writer's temporary files left in the directory.
  int Leftovers() const {
    int n = 0;
    auto entries = ListDirectory(dir_.path());
    EXPECT_TRUE(entries.ok()) << entries.status();
    if (!entries.ok()) return -1;
    for (const auto& e : *entries) {
      n += e.path().find(".airlock-write.") != std::string::npos;
    }
    return n;
  }

  testing::ShortTempDir dir_;
};

TEST_F(FilesTest, ReplaceSwapsASymlinkForTheFileAndLeavesItsTargetAlone) {
  std::string target = Path("target");
  std::ofstream(target) << "precious";
  ASSERT_EQ(symlink(target.c_str(), Path("link").c_str()), 0);
  // Over 1 MiB, every byte value.
  std::string content;
  for (int i = 0; content.size() < (1 << 20) + 4097; ++i) content += static_cast<char>(i * 7);
  ASSERT_TRUE(Write(Path("link"), content, 0640, Placement::kReplace).ok());
  struct stat st;
  ASSERT_EQ(lstat(Path("link").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_TRUE(ReadFileToString(Path("link")) == content);
  EXPECT_EQ(ReadFileToString(target), "precious");
  EXPECT_EQ(Leftovers(), 0);
}

TEST_F(FilesTest, InPlaceWritesThroughAsBefore) {
  std::string target = Path("target");
  std::ofstream(target) << "old";
  ASSERT_EQ(symlink(target.c_str(), Path("link").c_str()), 0);
  ASSERT_TRUE(Write(Path("link"), "new", 0, Placement::kInPlace).ok());
  EXPECT_EQ(ReadFileToString(target), "new");
}

TEST_F(FilesTest, IfAbsentKeepsAnyExistingEntryAndWritesANewOne) {
  std::ofstream(Path("kept")) << "mine";
  ASSERT_EQ(symlink("/nonexistent", Path("dangling").c_str()), 0);
  bool kept = false;
  ASSERT_TRUE(Write(Path("kept"), "theirs", 0644, Placement::kIfAbsent, std::nullopt, &kept).ok());
  EXPECT_TRUE(kept);
  EXPECT_EQ(ReadFileToString(Path("kept")), "mine");
  ASSERT_TRUE(
      Write(Path("dangling"), "theirs", 0644, Placement::kIfAbsent, std::nullopt, &kept).ok());
  EXPECT_TRUE(kept);
  struct stat st;
  ASSERT_EQ(lstat(Path("dangling").c_str(), &st), 0);
  EXPECT_TRUE(S_ISLNK(st.st_mode));

  ASSERT_TRUE(Write(Path("new"), "fresh", 0, Placement::kIfAbsent, std::nullopt, &kept).ok());
  EXPECT_FALSE(kept);
  EXPECT_EQ(ReadFileToString(Path("new")), "fresh");
  ASSERT_EQ(stat(Path("new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0644u) << "mode 0 is 0644 for a new file";
  EXPECT_EQ(Leftovers(), 0);
}

TEST_F(FilesTest, AnAbandonedWriteLeavesNothingBehind) {
  {
    FileWriter w;
    ASSERT_TRUE(w.Open(Path("half"), 0644, Placement::kReplace).ok());
    ASSERT_TRUE(w.Write("partial").ok());
    EXPECT_EQ(Leftovers(), 1);
  }
  EXPECT_EQ(Leftovers(), 0);
  EXPECT_NE(access(Path("half").c_str(), F_OK), 0);
  // A directory at the path cannot be replaced by a file.
  ASSERT_EQ(mkdir(Path("adir").c_str(), 0755), 0);
  absl::Status s = Write(Path("adir"), "x", 0644, Placement::kReplace);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_EQ(Leftovers(), 0);
  // A missing directory is NOT_FOUND, as for an in-place write.
  EXPECT_EQ(Write(Path("no/such"), "x", 0644, Placement::kReplace).code(),
            absl::StatusCode::kNotFound);
}

TEST_F(FilesTest, OwnersGoToTheFileAndToTheDirectoriesMade) {
  if (geteuid() != 0) GTEST_SKIP() << "chown needs root";
  FileOwner agent{1000, 1000};
  ASSERT_TRUE(Write(Path("owned"), "x", 04755, Placement::kReplace, agent).ok());
  struct stat st;
  ASSERT_EQ(stat(Path("owned").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
  EXPECT_EQ(st.st_gid, 1000u);
  EXPECT_EQ(st.st_mode & 07777, 04755u) << "the mode is set after the owner";

  ASSERT_TRUE(MakeDirectory(Path("a/b/c"), 0, true, agent).ok());
  for (const char* d : {"a", "a/b", "a/b/c"}) {
    ASSERT_EQ(stat(Path(d).c_str(), &st), 0) << d;
    EXPECT_EQ(st.st_uid, 1000u) << d;
  }
  // An existing directory keeps its owner.
  ASSERT_EQ(mkdir(Path("root-owned").c_str(), 0755), 0);
  ASSERT_TRUE(MakeDirectory(Path("root-owned/sub"), 0, true, agent).ok());
  ASSERT_EQ(stat(Path("root-owned").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0u);
  ASSERT_EQ(stat(Path("root-owned/sub").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 1000u);
}

}  // namespace
}  // namespace airlock::guest
