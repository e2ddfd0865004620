#include "secretsd/key_file.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::secretsd {
namespace {

void WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream(path, std::ios::binary) << data;
  ASSERT_EQ(chmod(path.c_str(), mode), 0);
}

std::vector<std::string> DirEntries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name != "." && name != "..") out.push_back(name);
  }
  closedir(d);
  return out;
}

class KeyFileTest : public ::testing::Test {
 protected:
  std::string Path(const std::string& leaf) { return dir_.path() + "/" + leaf; }
  testing::ShortTempDir dir_;
};

TEST_F(KeyFileTest, CreatedWithMode0600EvenUnderAPermissiveUmask) {
  mode_t old = umask(0);
  auto key = CreateKeyFile(Path("secrets.key"));
  umask(old);
  ASSERT_TRUE(key.ok()) << key.status();
  struct stat st;
  ASSERT_EQ(stat(Path("secrets.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600);
  EXPECT_EQ(st.st_size, 32);
  EXPECT_EQ(ReadFileToString(Path("secrets.key")), key->bytes());
  // The temporary file was renamed, not left behind.
  EXPECT_EQ(DirEntries(dir_.path()), std::vector<std::string>{"secrets.key"});

  auto loaded = LoadKeyFile(Path("secrets.key"));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->bytes(), key->bytes());
}

TEST_F(KeyFileTest, CreateNeverOverwrites) {
  WriteFile(Path("k"), std::string(32, 'x'), 0600);
  auto again = CreateKeyFile(Path("k"));
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ReadFileToString(Path("k")), std::string(32, 'x'));
}

TEST_F(KeyFileTest, RefusedWhenGroupOrOthersMayAccessIt) {
  for (mode_t mode : {0644, 0640, 0604, 0620, 0602, 0610}) {
    WriteFile(Path("k"), std::string(32, 'x'), mode);
    auto key = LoadKeyFile(Path("k"));
    ASSERT_FALSE(key.ok()) << std::oct << mode;
    EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(key.status().message().find(Path("k")), std::string::npos) << key.status();
    EXPECT_NE(key.status().message().find("chmod 600"), std::string::npos) << key.status();
  }
  WriteFile(Path("k"), std::string(32, 'x'), 0400);
  EXPECT_TRUE(LoadKeyFile(Path("k")).ok());
}

TEST_F(KeyFileTest, RefusedWhenNotExactly32Bytes) {
  for (size_t size : {0, 16, 31, 33, 44}) {
    WriteFile(Path("k"), std::string(size, 'x'), 0600);
    auto key = LoadKeyFile(Path("k"));
    ASSERT_FALSE(key.ok()) << size;
    EXPECT_NE(key.status().message().find(Path("k")), std::string::npos) << key.status();
    EXPECT_NE(key.status().message().find("exactly 32"), std::string::npos) << key.status();
  }
}

TEST_F(KeyFileTest, MissingIsNotFoundAndDirectoriesAreRefused) {
  EXPECT_EQ(LoadKeyFile(Path("none")).status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(mkdir(Path("d").c_str(), 0700), 0);
  EXPECT_EQ(LoadKeyFile(Path("d")).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(KeyFileTest, OperatorKeyBehindASymlinkIsRead) {
  WriteFile(Path("real"), std::string(32, 'o'), 0600);
  ASSERT_EQ(symlink(Path("real").c_str(), Path("link").c_str()), 0);
  auto key = LoadKeyFile(Path("link"));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->bytes(), std::string(32, 'o'));
  ASSERT_EQ(symlink(Path("gone").c_str(), Path("dangling").c_str()), 0);
  EXPECT_EQ(LoadKeyFile(Path("dangling")).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace airlock::secretsd
