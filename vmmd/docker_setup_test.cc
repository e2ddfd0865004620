#include "vmmd/docker_setup.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::vmmd {
namespace {

namespace vmm = airlock::vmm::v1;

TEST(ResolveDockerTest, DefaultIsOnForBuiltInAgentsOnly) {
  vmm::SandboxSpec shell;
  ASSERT_TRUE(ResolveDocker(&shell, false).ok());
  EXPECT_EQ(shell.docker(), vmm::DOCKER_OFF);
  EXPECT_EQ(shell.docker_disk_mib(), 0u);
  vmm::SandboxSpec agent;
  ASSERT_TRUE(ResolveDocker(&agent, true).ok());
  EXPECT_EQ(agent.docker(), vmm::DOCKER_ON);
  EXPECT_EQ(agent.docker_disk_mib(), kDefaultDockerDiskMib);
  vmm::SandboxSpec off;
  off.set_docker(vmm::DOCKER_OFF);
  ASSERT_TRUE(ResolveDocker(&off, true).ok());
  EXPECT_FALSE(HasDocker(off));
  vmm::SandboxSpec on;
  on.set_docker(vmm::DOCKER_ON);
  on.set_docker_disk_mib(512);
  ASSERT_TRUE(ResolveDocker(&on, false).ok());
  EXPECT_TRUE(HasDocker(on));
  EXPECT_EQ(on.docker_disk_mib(), 512u);
}

TEST(ResolveDockerTest, RefusesSizesOutOfRangeOrWithoutDocker) {
  vmm::SandboxSpec small;
  small.set_docker(vmm::DOCKER_ON);
  small.set_docker_disk_mib(511);
  absl::Status s = ResolveDocker(&small, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("give 512M to 16T"), absl::string_view::npos) << s;
  vmm::SandboxSpec huge;
  huge.set_docker(vmm::DOCKER_ON);
  huge.set_docker_disk_mib(kMaxDockerDiskMib + 1);
  EXPECT_EQ(ResolveDocker(&huge, false).code(), absl::StatusCode::kInvalidArgument);
  vmm::SandboxSpec off;
  off.set_docker_disk_mib(1024);
  s = ResolveDocker(&off, false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("add --docker"), absl::string_view::npos) << s;
}

TEST(MakeDockerDiskTest, SparseExt4KeptWhenPresent) {
  testing::ShortTempDir dir;
  std::string path = dir.path() + "/docker.img";
  absl::Status made = MakeDockerDisk(path, 1024);
  ASSERT_TRUE(made.ok()) << made;
  struct stat st;
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, off_t{1024} << 20);
  EXPECT_LT(st.st_blocks * 512, off_t{64} << 20) << "the image is not sparse";
  // The ext4 superblock's magic at 1024 + 0x38.
  char magic[2] = {};
  int fd = open(path.c_str(), O_RDONLY);
  ASSERT_EQ(pread(fd, magic, 2, 1024 + 0x38), 2);
  close(fd);
  EXPECT_EQ(std::string(magic, 2), std::string("\x53\xef", 2));
  EXPECT_NE(stat((path + ".tmp").c_str(), &st), 0);
  // An existing disk is the engine's state: never made again.
  ASSERT_TRUE(ReplaceFile(path, "kept", 0600).ok());
  ASSERT_TRUE(MakeDockerDisk(path, 1024).ok());
  EXPECT_EQ(ReadFileToString(path), "kept");
}

TEST(DockerScriptsTest, WaitScriptCarriesItsTimeout) {
  std::string w = DockerWaitScript(7);
  EXPECT_NE(w.find("+ 7 ))"), std::string::npos) << w;
  EXPECT_NE(w.find("within 7 s"), std::string::npos) << w;
  EXPECT_NE(std::string(kDockerPrepareScript).find("this image has no $tool"),
            std::string::npos);
}

}  // namespace
}  // namespace airlock::vmmd
