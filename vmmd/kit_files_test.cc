// WriteKitFile and MakeKitVolume against a fake agent on a real gRPC
// socket: what reaches the agent (the stream's chunks, the first message's
// path, mode, owner and placement; the execs' argv), without a VM.
#include "vmmd/kit_files.h"

#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "common/testing/harness.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "protos/agent/v1/agent.grpc.pb.h"

namespace airlock::vmmd {
namespace {

namespace agentpb = airlock::agent::v1;
namespace pb = airlock::policy::v1;
using Argv = std::vector<std::string>;

// FakeAgent records the file calls and execs it gets and answers them as
// it is told.
class FakeAgent final : public agentpb::Agent::Service {
 public:
  grpc::Status MakeDir(grpc::ServerContext*, const agentpb::MakeDirRequest* req,
                       agentpb::Empty*) override {
    std::lock_guard<std::mutex> lock(mu);
    dirs.push_back(*req);
    return grpc::Status::OK;
  }
  grpc::Status WriteFile(grpc::ServerContext*,
                         grpc::ServerReader<agentpb::WriteFileRequest>* reader,
                         agentpb::WriteFileResponse* resp) override {
    std::vector<agentpb::WriteFileRequest> messages;
    agentpb::WriteFileRequest req;
    uint64_t bytes = 0;
    while (reader->Read(&req)) {
      bytes += req.data().size();
      messages.push_back(req);
    }
    std::lock_guard<std::mutex> lock(mu);
    writes.push_back(messages);
    if (!write_error.ok()) return write_error;
    if (!messages.empty() && messages[0].placement() == agentpb::WRITE_IF_ABSENT && path_taken) {
      resp->set_kept_existing(true);
      return grpc::Status::OK;
    }
    resp->set_bytes_written(bytes);
    return grpc::Status::OK;
  }
  grpc::Status Stat(grpc::ServerContext*, const agentpb::StatRequest* req,
                    agentpb::FileInfo* out) override {
    std::lock_guard<std::mutex> lock(mu);
    auto it = stats.find(req->path());
    if (it != stats.end()) {
      *out = it->second;
    } else {
      out->set_path(req->path());
      out->set_is_dir(true);
    }
    return grpc::Status::OK;
  }
  grpc::Status Exec(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<agentpb::ExecResponse, agentpb::ExecRequest>* stream) override {
    agentpb::ExecRequest first;
    if (!stream->Read(&first)) return grpc::Status::OK;
    Argv argv(first.start().argv().begin(), first.start().argv().end());
    int code;
    {
      std::lock_guard<std::mutex> lock(mu);
      execs.push_back(argv);
      users.push_back(first.start().user());
      code = exit_code(argv);
    }
    agentpb::ExecResponse resp;
    resp.mutable_exit()->set_code(code);
    stream->Write(resp);
    agentpb::ExecRequest ignored;
    while (stream->Read(&ignored)) {
    }
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::vector<agentpb::MakeDirRequest> dirs;
  std::vector<std::vector<agentpb::WriteFileRequest>> writes;
  std::vector<Argv> execs;
  std::vector<std::string> users;
  std::map<std::string, agentpb::FileInfo> stats;
  std::function<int(const Argv&)> exit_code = [](const Argv&) { return 0; };
  grpc::Status write_error = grpc::Status::OK;
  bool path_taken = false;
};

class KitFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_.path() + "/agent.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&agent_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    channel_ = grpc::CreateChannel("unix:" + dir_.path() + "/agent.sock",
                                   grpc::InsecureChannelCredentials());
  }
  void TearDown() override { server_->Shutdown(); }

  static pb::KitFile File(const std::string& path, const std::string& content,
                          const std::string& mode = "", bool overwrite = true) {
    pb::KitFile f;
    f.set_path(path);
    f.set_content(content);
    f.set_mode(mode);
    f.set_overwrite(overwrite);
    return f;
  }

  testing::ShortTempDir dir_;
  FakeAgent agent_;
  std::unique_ptr<grpc::Server> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(KitFilesTest, ALargeFileIsStreamedInBoundedChunksAndArrivesWhole) {
  // Over 1 MiB, not a multiple of the chunk size, with multi-byte UTF-8
  // that the chunk boundaries cut through.
  std::string content;
  while (content.size() < (3 << 19) + 123) content += "kit \xc3\xa9t\xc3\xa9 \xe2\x9c\x93 line\n";
  ASSERT_TRUE(
      WriteKitFile(channel_, File("/home/agent/.config/tool/big.txt", content, "0600")).ok());

  ASSERT_EQ(agent_.dirs.size(), 1u);
  EXPECT_EQ(agent_.dirs[0].path(), "/home/agent/.config/tool");
  EXPECT_TRUE(agent_.dirs[0].parents());
  EXPECT_TRUE(agent_.dirs[0].has_owner());
  EXPECT_EQ(agent_.dirs[0].owner(), "");

  ASSERT_EQ(agent_.writes.size(), 1u);
  const auto& messages = agent_.writes[0];
  EXPECT_EQ(messages.size(), (content.size() + kKitFileChunkBytes - 1) / kKitFileChunkBytes);
  const agentpb::WriteFileRequest& first = messages[0];
  EXPECT_EQ(first.path(), "/home/agent/.config/tool/big.txt");
  EXPECT_EQ(first.mode(), 0600u);
  EXPECT_TRUE(first.has_owner());
  EXPECT_EQ(first.owner(), "") << "the agent's own default: agent, else root";
  EXPECT_EQ(first.placement(), agentpb::WRITE_REPLACE);
  std::string received;
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_LE(messages[i].data().size(), kKitFileChunkBytes);
    if (i > 0) {
      EXPECT_TRUE(messages[i].path().empty());
    }
    received += messages[i].data();
  }
  EXPECT_TRUE(received == content)
      << "content differs (" << received.size() << " of " << content.size() << " bytes)";
  EXPECT_TRUE(agent_.execs.empty()) << "no shell, no exec for a file";
}

TEST_F(KitFilesTest, AnEmptyFileIsStillWrittenWithTheDefaultMode) {
  ASSERT_TRUE(WriteKitFile(channel_, File("/etc/tool.conf", "")).ok());
  ASSERT_EQ(agent_.writes.size(), 1u);
  ASSERT_EQ(agent_.writes[0].size(), 1u);
  EXPECT_EQ(agent_.writes[0][0].mode(), 0644u);
  EXPECT_EQ(agent_.dirs[0].path(), "/etc");
}

TEST_F(KitFilesTest, AFileAtTheRootHasTheRootAsItsDirectory) {
  ASSERT_TRUE(WriteKitFile(channel_, File("/tool.conf", "x")).ok());
  EXPECT_EQ(agent_.dirs[0].path(), "/");
}

TEST_F(KitFilesTest, WithoutOverwriteAnExistingFileIsKept) {
  agent_.path_taken = true;
  absl::Status s = WriteKitFile(channel_, File("/home/agent/keep.txt", "new", "", false));
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(agent_.writes[0][0].placement(), agentpb::WRITE_IF_ABSENT);
}

TEST_F(KitFilesTest, ABadModeSendsNothing) {
  absl::Status s = WriteKitFile(channel_, File("/home/agent/x", "x", "0x1"));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("kit file /home/agent/x"), std::string::npos) << s;
  EXPECT_TRUE(agent_.dirs.empty());
  EXPECT_TRUE(agent_.writes.empty());
  EXPECT_EQ(ParseKitMode("755", 0).value(), 0755u);
  EXPECT_EQ(ParseKitMode("", 0644).value(), 0644u);
  EXPECT_FALSE(ParseKitMode("08", 0).ok());
  EXPECT_FALSE(ParseKitMode("-R", 0).ok());
}

TEST_F(KitFilesTest, TheAgentsRefusalNamesTheFile) {
  agent_.write_error = grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                                    "cannot write /etc/x: Read-only file system");
  absl::Status s = WriteKitFile(channel_, File("/etc/x", "x"));
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "kit file /etc/x: cannot write /etc/x: Read-only file system");
}

TEST_F(KitFilesTest, ATmpfsVolumeIsMountedOnceAndGivenToTheAgentUser) {
  const std::string path = "/home/agent/.cache/scratch";
  pb::KitVolume v;
  v.set_path(path);
  v.set_tmpfs(true);
  v.set_size("16m");
  v.set_mode("0700");
  agent_.exit_code = [](const Argv& argv) { return argv[0] == "mountpoint" ? 1 : 0; };
  ASSERT_TRUE(MakeKitVolume(channel_, v).ok());
  ASSERT_EQ(agent_.dirs.size(), 1u);
  EXPECT_EQ(agent_.dirs[0].path(), path);
  EXPECT_TRUE(agent_.dirs[0].parents());
  EXPECT_EQ(agent_.execs,
            (std::vector<Argv>{
                {"mountpoint", "-q", path},
                {"mount", "-t", "tmpfs", "-o", "nosuid,nodev,size=16m", "tmpfs", path},
                {"chown", "-h", "agent:agent", path},
                {"chmod", "0700", path},
            }));
  for (const auto& u : agent_.users) EXPECT_EQ(u, "root");

  // Mounted already (vmmd restarted under a live guest): not again.
  agent_.execs.clear();
  agent_.exit_code = [](const Argv&) { return 0; };
  ASSERT_TRUE(MakeKitVolume(channel_, v).ok());
  EXPECT_EQ(agent_.execs, (std::vector<Argv>{
                              {"mountpoint", "-q", path},
                              {"chown", "-h", "agent:agent", path},
                              {"chmod", "0700", path},
                          }));
}

TEST_F(KitFilesTest, ADiskVolumeWithoutAModeIsOnlyChownedAndAMissingAgentUserIsNoError) {
  pb::KitVolume v;
  v.set_path("/home/agent/.history");
  agent_.exit_code = [](const Argv& argv) { return argv[0] == "chown" ? 1 : 0; };
  ASSERT_TRUE(MakeKitVolume(channel_, v).ok());
  EXPECT_EQ(agent_.execs,
            (std::vector<Argv>{{"chown", "-h", "agent:agent", "/home/agent/.history"}}));
}

TEST_F(KitFilesTest, AVolumeThatIsASymlinkIsRefused) {
  agentpb::FileInfo link;
  link.set_is_symlink(true);
  agent_.stats["/home/agent/.cache"] = link;
  pb::KitVolume v;
  v.set_path("/home/agent/.cache");
  v.set_tmpfs(true);
  absl::Status s = MakeKitVolume(channel_, v);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("symbolic link"), std::string::npos) << s;
  EXPECT_TRUE(agent_.execs.empty());
}

TEST_F(KitFilesTest, AFailedMountFailsTheVolume) {
  pb::KitVolume v;
  v.set_path("/scratch");
  v.set_tmpfs(true);
  agent_.exit_code = [](const Argv& argv) { return argv[0] == "chown" ? 0 : 32; };
  absl::Status s = MakeKitVolume(channel_, v);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("kit volume /scratch: mount -t tmpfs exited with 32"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace airlock::vmmd
