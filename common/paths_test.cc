#include "common/paths.h"

#include <sys/stat.h>
#include <unistd.h>

#include "gtest/gtest.h"

namespace airlock {
namespace {

std::string TmpPath(const std::string& leaf) {
  return std::string(getenv("TEST_TMPDIR")) + "/" + leaf;
}

TEST(EnsurePrivateDirTest, CreatesMissingDirWith0700EvenUnderPermissiveUmask) {
  mode_t old = umask(0);
  std::string dir = TmpPath("a/b/runtime");
  ASSERT_TRUE(EnsurePrivateDir(dir).ok());
  umask(old);
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700);
}

TEST(EnsurePrivateDirTest, AcceptsExistingPrivateDir) {
  std::string dir = TmpPath("ok");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  EXPECT_TRUE(EnsurePrivateDir(dir).ok());
}

TEST(EnsurePrivateDirTest, RefusesGroupReadableDirAndLeavesItAlone) {
  std::string dir = TmpPath("open");
  ASSERT_EQ(mkdir(dir.c_str(), 0700), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0750), 0);
  absl::Status s = EnsurePrivateDir(dir);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_NE(s.message().find("chmod 700"), std::string::npos) << s;
  struct stat st;
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0750);
}

TEST(EnsurePrivateDirTest, RefusesSymlinkAndFile) {
  std::string target = TmpPath("target");
  ASSERT_EQ(mkdir(target.c_str(), 0700), 0);
  std::string link = TmpPath("link");
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  EXPECT_FALSE(EnsurePrivateDir(link).ok());
  std::string file = TmpPath("file");
  FILE* f = fopen(file.c_str(), "w");
  fclose(f);
  EXPECT_FALSE(EnsurePrivateDir(file).ok());
}

TEST(DefaultDirsTest, EnvironmentOverridesWin) {
  setenv("AIRLOCK_RUNTIME_DIR", "/x/run", 1);
  setenv("AIRLOCK_STATE_DIR", "/x/state", 1);
  EXPECT_EQ(DefaultRuntimeDir(), "/x/run");
  EXPECT_EQ(DefaultStateDir(), "/x/state");
  unsetenv("AIRLOCK_RUNTIME_DIR");
  unsetenv("AIRLOCK_STATE_DIR");
  if (geteuid() == 0) {
    EXPECT_EQ(DefaultRuntimeDir(), "/run/airlock");
    EXPECT_EQ(DefaultStateDir(), "/var/lib/airlock");
  } else {
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    EXPECT_EQ(DefaultRuntimeDir(), "/run/user/1234/airlock");
  }
}

}  // namespace
}  // namespace airlock
