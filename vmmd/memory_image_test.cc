#include "vmmd/memory_image.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

std::string TempFile() {
  std::string path = std::string(getenv("TEST_TMPDIR") ? getenv("TEST_TMPDIR") : "/tmp") +
                     "/image.XXXXXX";
  int fd = mkstemp(path.data());
  close(fd);
  return path;
}

TEST(CopyToMemfdTest, CopiesTheDataAndKeepsTheHoles) {
  std::string path = TempFile();
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  constexpr off_t kSize = 64 << 20;
  ASSERT_EQ(ftruncate(fd, kSize), 0);
  std::string a(4096, 'a'), b(3 * 4096, 'b');
  ASSERT_EQ(pwrite(fd, a.data(), a.size(), 0), static_cast<ssize_t>(a.size()));
  ASSERT_EQ(pwrite(fd, b.data(), b.size(), 40 << 20), static_cast<ssize_t>(b.size()));
  int mem = CopyToMemfd(fd);
  ASSERT_GE(mem, 0) << strerror(-mem);
  struct stat st {};
  ASSERT_EQ(fstat(mem, &st), 0);
  EXPECT_EQ(st.st_size, kSize);
  // Four pages of data (tmpfs counts 512-byte blocks), not 64 MiB.
  EXPECT_EQ(st.st_blocks, 4 * 8);
  std::string got(3 * 4096, '\0');
  ASSERT_EQ(pread(mem, got.data(), 4096, 0), 4096);
  EXPECT_EQ(got.substr(0, 4096), a);
  ASSERT_EQ(pread(mem, got.data(), got.size(), 40 << 20), static_cast<ssize_t>(got.size()));
  EXPECT_EQ(got, b);
  ASSERT_EQ(pread(mem, got.data(), 4096, 20 << 20), 4096);
  EXPECT_EQ(got.substr(0, 4096), std::string(4096, '\0'));
  EXPECT_EQ(fcntl(mem, F_GETFD) & FD_CLOEXEC, FD_CLOEXEC);
  // The copy is the sandbox's own: writing it leaves the image as it was.
  ASSERT_EQ(pwrite(mem, "z", 1, 0), 1);
  char c = 0;
  ASSERT_EQ(pread(fd, &c, 1, 0), 1);
  EXPECT_EQ(c, 'a');
  close(mem);
  close(fd);
  unlink(path.c_str());
}

TEST(CopyToMemfdTest, AnEmptyOrAllHoleImageIsAllZero) {
  std::string path = TempFile();
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_EQ(ftruncate(fd, 1 << 20), 0);
  int mem = CopyToMemfd(fd);
  ASSERT_GE(mem, 0);
  struct stat st {};
  ASSERT_EQ(fstat(mem, &st), 0);
  EXPECT_EQ(st.st_size, 1 << 20);
  EXPECT_EQ(st.st_blocks, 0);
  close(mem);
  close(fd);
  unlink(path.c_str());
}

TEST(CopyToMemfdTest, NotARegularFileIsRefused) {
  int fd = open("/", O_RDONLY | O_DIRECTORY);
  EXPECT_EQ(CopyToMemfd(fd), -EINVAL);
  close(fd);
  EXPECT_EQ(CopyToMemfd(-1), -EBADF);
}

}  // namespace
}  // namespace airlock::vmmd
