#include "common/fd_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace airlock {
namespace {

bool IsOpen(int fd) { return fcntl(fd, F_GETFD) != -1; }

TEST(UniqueFdTest, AMoveHandsTheDescriptorOverAndClosesItOnce) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  close(p[1]);
  UniqueFd a(p[0]);
  UniqueFd b(std::move(a));
  EXPECT_EQ(a.get(), -1);
  EXPECT_EQ(b.get(), p[0]);
  EXPECT_TRUE(IsOpen(p[0]));
  {
    std::vector<UniqueFd> held;
    held.push_back(std::move(b));  // and a vector may grow and move them
    for (int i = 0; i < 8; ++i) held.emplace_back(-1);
    EXPECT_TRUE(IsOpen(p[0]));
  }
  EXPECT_FALSE(IsOpen(p[0]));
}

TEST(UniqueFdTest, MoveAssignmentClosesWhatItHeldAndSelfAssignmentKeeps) {
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  UniqueFd a(p[0]);
  UniqueFd b(p[1]);
  a = std::move(b);
  EXPECT_FALSE(IsOpen(p[0]));
  EXPECT_EQ(a.get(), p[1]);
  UniqueFd& same = a;
  a = std::move(same);
  EXPECT_EQ(a.get(), p[1]);
  EXPECT_TRUE(IsOpen(p[1]));
}

TEST(FileTailTest, TheLastLinesAFinalNewlineNotCounted) {
  char path[] = "/tmp/airlock-test-tail-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  close(fd);
  ASSERT_TRUE(ReplaceFile(path, "one\ntwo\nthree\n", 0600).ok());
  EXPECT_EQ(FileTail(path, 2), "two\nthree\n");
  EXPECT_EQ(FileTail(path, 1), "three\n");
  EXPECT_EQ(FileTail(path, 9), "one\ntwo\nthree\n");
  ASSERT_TRUE(ReplaceFile(path, "a\nb", 0600).ok());
  EXPECT_EQ(FileTail(path, 1), "b");
  unlink(path);
  EXPECT_EQ(FileTail(path, 3), "");
}

}  // namespace
}  // namespace airlock
