// Runs the agent service in this process on a real Unix socket and drives it
// with a real gRPC client: exec (pipes and a pty), exit codes and files.
#include "guest/agent_service.h"

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "common/client.h"
#include "common/fd_io.h"
#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock::guest {
namespace {

namespace agentpb = airlock::agent::v1;

// Ended says `pid` is gone or a zombie not yet reaped by init (or the
// sandbox's reaper): kill(pid, 0) would not tell the two apart.
bool Ended(pid_t pid) {
  std::string stat = ReadFileToString("/proc/" + std::to_string(pid) + "/stat");
  return stat.empty() || stat.find(") Z ") != std::string::npos;
}

class AgentServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_.path() + "/agent.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_TRUE(server_);
    stub_ = airlock::agent::v1::Agent::NewStub(DialUnix(dir_.path() + "/agent.sock"));
  }
  void TearDown() override { server_->Shutdown(); }

  struct Result {
    std::string out, err;
    int code = -1;
    int64_t pid = 0;
  };

  // Exec runs a command to completion, sending `input` then EOF on stdin.
  Result Exec(agentpb::ExecStart start, const std::string& input = "",
              const std::vector<agentpb::ExecRequest>& extra = {}) {
    grpc::ClientContext ctx;
    auto stream = stub_->Exec(&ctx);
    agentpb::ExecRequest req;
    *req.mutable_start() = start;
    stream->Write(req);
    for (const auto& e : extra) stream->Write(e);
    if (!input.empty()) {
      req.Clear();
      req.set_stdin(input);
      stream->Write(req);
    }
    if (start.stdin()) {
      req.Clear();
      req.set_stdin_eof(true);
      stream->Write(req);
    }
    Result r;
    agentpb::ExecResponse resp;
    while (stream->Read(&resp)) {
      if (resp.has_started_pid()) r.pid = resp.started_pid();
      r.out += resp.stdout();
      r.err += resp.stderr();
      if (resp.has_exit()) {
        r.code = resp.exit().code();
        stream->WritesDone();
      }
    }
    EXPECT_TRUE(stream->Finish().ok());
    return r;
  }

  // CancelledExec runs `script` (which prints a pid on its first line),
  // reads until its exit or, with `before_exit`, only that first line, then
  // cancels the call as vmmd does and returns the pid printed.
  pid_t CancelledExec(const std::string& script, bool before_exit) {
    grpc::ClientContext ctx;
    auto stream = stub_->Exec(&ctx);
    agentpb::ExecRequest req;
    *req.mutable_start() = Cmd({"sh", "-c", script});
    stream->Write(req);
    std::string out;
    agentpb::ExecResponse resp;
    while (!(before_exit && out.find('\n') != std::string::npos) && stream->Read(&resp)) {
      out += resp.stdout();
      if (resp.has_exit()) break;
    }
    ctx.TryCancel();
    stream->Finish();
    pid_t pid = 0;
    EXPECT_TRUE(absl::SimpleAtoi(absl::StripAsciiWhitespace(out), &pid)) << out;
    return pid;
  }

  static agentpb::ExecStart Cmd(std::vector<std::string> argv) {
    agentpb::ExecStart s;
    for (auto& a : argv) s.add_argv(a);
    return s;
  }

  testing::ShortTempDir dir_;
  AgentService service_{[] {}};
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<airlock::agent::v1::Agent::Stub> stub_;
};

TEST_F(AgentServiceTest, StreamsStdoutStderrAndExitCode) {
  Result r = Exec(Cmd({"sh", "-c", "echo out; echo err >&2; exit 3"}));
  EXPECT_EQ(r.out, "out\n");
  EXPECT_EQ(r.err, "err\n");
  EXPECT_EQ(r.code, 3);
  EXPECT_GT(r.pid, 0);
}

TEST_F(AgentServiceTest, NotFoundIs127AndNotExecutableIs126) {
  Result missing = Exec(Cmd({"no-such-command-xyz"}));
  EXPECT_EQ(missing.code, 127);
  EXPECT_NE(missing.err.find("command not found"), std::string::npos) << missing.err;
  std::string file = dir_.path() + "/plain.txt";
  std::ofstream(file) << "not a program";
  chmod(file.c_str(), 0644);
  Result noexec = Exec(Cmd({file}));
  EXPECT_EQ(noexec.code, 126);
}

TEST_F(AgentServiceTest, StdinEnvAndWorkdir) {
  agentpb::ExecStart s = Cmd({"sh", "-c", "cat; echo \"$GREETING\"; pwd"});
  s.set_stdin(true);
  s.add_env("GREETING=hi there");
  s.set_workdir(dir_.path());
  Result r = Exec(s, "from stdin\n");
  EXPECT_EQ(r.out, "from stdin\nhi there\n" + dir_.path() + "\n");
  EXPECT_EQ(r.code, 0);
}

TEST_F(AgentServiceTest, MissingWorkdirIsAClearError) {
  agentpb::ExecStart s = Cmd({"true"});
  s.set_workdir("/no/such/dir");
  Result r = Exec(s);
  EXPECT_EQ(r.code, 126);
  EXPECT_NE(r.err.find("/no/such/dir"), std::string::npos) << r.err;
}

TEST_F(AgentServiceTest, SignalKillsTheProcessGroup) {
  agentpb::ExecRequest sig;
  sig.set_signal(SIGTERM);
  Result r = Exec(Cmd({"sleep", "30"}), "", {sig});
  EXPECT_EQ(r.code, 128 + SIGTERM);
}

TEST_F(AgentServiceTest, ACancelAfterTheExitLeavesWhatTheProcessLeftRunning) {
  // vmmd ends the agent's stream with a cancel once it has the exit.
  pid_t left = CancelledExec("sleep 30 >/dev/null 2>&1 & echo $!", false);
  ASSERT_GT(left, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(Ended(left)) << "the background sleep was killed by the late cancel";
  kill(left, SIGKILL);
}

TEST_F(AgentServiceTest, ACancelBeforeTheExitEndsTheProcessGroup) {
  pid_t sleeper = CancelledExec("sleep 30 & echo $!; wait", true);
  ASSERT_GT(sleeper, 0);
  bool gone = false;
  for (int i = 0; i < 100 && !(gone = Ended(sleeper)); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "the exec's process group outlived a cancel before its exit";
}

TEST_F(AgentServiceTest, TtyHasTerminalSizeAndResizes) {
  agentpb::ExecStart s =
      Cmd({"sh", "-c", "test -t 0 && test -t 1 && echo is-a-tty; read x; stty size"});
  s.set_tty(true);
  s.set_stdin(true);
  s.mutable_size()->set_rows(40);
  s.mutable_size()->set_cols(100);
  // The resize is applied before the line that lets the shell go on.
  agentpb::ExecRequest resize;
  resize.mutable_resize()->set_rows(50);
  resize.mutable_resize()->set_cols(132);
  Result r = Exec(s, "\n", {resize});
  EXPECT_NE(r.out.find("is-a-tty"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("50 132"), std::string::npos) << r.out;
  EXPECT_EQ(r.code, 0);
}

TEST_F(AgentServiceTest, TtyStartsWithRequestedSize) {
  agentpb::ExecStart s = Cmd({"stty", "size"});
  s.set_tty(true);
  s.mutable_size()->set_rows(40);
  s.mutable_size()->set_cols(100);
  Result r = Exec(s);
  EXPECT_NE(r.out.find("40 100"), std::string::npos) << r.out;
}

TEST_F(AgentServiceTest, DetachReturnsAtOnce) {
  agentpb::ExecStart s = Cmd({"sleep", "5"});
  s.set_detach(true);
  auto t0 = std::chrono::steady_clock::now();
  Result r = Exec(s);
  EXPECT_EQ(r.code, 0);
  EXPECT_GT(r.pid, 0);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(4));
  kill(r.pid, SIGKILL);
}

TEST_F(AgentServiceTest, FilesRoundTrip) {
  std::string path = dir_.path() + "/sub/dir";
  grpc::ClientContext c1;
  agentpb::MakeDirRequest mk;
  mk.set_path(path);
  mk.set_parents(true);
  agentpb::Empty empty;
  ASSERT_TRUE(stub_->MakeDir(&c1, mk, &empty).ok());

  grpc::ClientContext c2;
  agentpb::WriteFileResponse wr;
  auto writer = stub_->WriteFile(&c2, &wr);
  agentpb::WriteFileRequest w;
  w.set_path(path + "/f.sh");
  w.set_mode(0750);
  w.set_data("#!/bin/sh\n");
  writer->Write(w);
  w.Clear();
  w.set_data("echo ok\n");
  writer->Write(w);
  writer->WritesDone();
  ASSERT_TRUE(writer->Finish().ok());
  EXPECT_EQ(wr.bytes_written(), 18u);

  grpc::ClientContext c3;
  agentpb::StatRequest st;
  st.set_path(path + "/f.sh");
  agentpb::FileInfo info;
  ASSERT_TRUE(stub_->Stat(&c3, st, &info).ok());
  EXPECT_EQ(info.mode() & 0777, 0750u);
  EXPECT_EQ(info.size(), 18u);

  grpc::ClientContext c4;
  agentpb::ReadFileRequest rd;
  rd.set_path(path + "/f.sh");
  auto reader = stub_->ReadFile(&c4, rd);
  std::string content;
  agentpb::FileChunk chunk;
  while (reader->Read(&chunk)) content += chunk.data();
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_EQ(content, "#!/bin/sh\necho ok\n");

  grpc::ClientContext c5;
  agentpb::ListDirRequest ls;
  ls.set_path(path);
  agentpb::ListDirResponse listing;
  ASSERT_TRUE(stub_->ListDir(&c5, ls, &listing).ok());
  ASSERT_EQ(listing.entries_size(), 1);

  grpc::ClientContext c6;
  agentpb::RemovePathRequest rm;
  rm.set_path(dir_.path() + "/sub");
  rm.set_recursive(true);
  ASSERT_TRUE(stub_->RemovePath(&c6, rm, &empty).ok());
  EXPECT_NE(access((dir_.path() + "/sub").c_str(), F_OK), 0);

  grpc::ClientContext c7;
  agentpb::StatRequest rel;
  rel.set_path("relative/path");
  EXPECT_EQ(stub_->Stat(&c7, rel, &info).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(AgentServiceTest, WriteFilePlacementAndOwner) {
  auto write = [&](agentpb::WriteFileRequest req, agentpb::WriteFileResponse* resp) {
    grpc::ClientContext ctx;
    auto writer = stub_->WriteFile(&ctx, resp);
    writer->Write(req);
    writer->WritesDone();
    return writer->Finish();
  };
  std::string path = dir_.path() + "/kept.txt";
  std::ofstream(path) << "mine";
  agentpb::WriteFileRequest req;
  req.set_path(path);
  req.set_data("theirs");
  req.set_placement(agentpb::WRITE_IF_ABSENT);
  agentpb::WriteFileResponse resp;
  ASSERT_TRUE(write(req, &resp).ok());
  EXPECT_TRUE(resp.kept_existing());
  EXPECT_EQ(resp.bytes_written(), 0u);
  EXPECT_EQ(ReadFileToString(path), "mine");

  req.set_placement(agentpb::WRITE_REPLACE);
  req.set_owner("0");
  ASSERT_TRUE(write(req, &resp).ok());
  EXPECT_FALSE(resp.kept_existing());
  EXPECT_EQ(resp.bytes_written(), 6u);
  EXPECT_EQ(ReadFileToString(path), "theirs");

  // An unknown owner writes nothing.
  req.set_path(dir_.path() + "/nobody.txt");
  req.set_owner("no-such-user-xyz");
  EXPECT_EQ(write(req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(access(req.path().c_str(), F_OK), 0);
  grpc::ClientContext ctx;
  agentpb::MakeDirRequest mk;
  mk.set_path(dir_.path() + "/nodir");
  mk.set_owner("no-such-user-xyz");
  agentpb::Empty empty;
  EXPECT_EQ(stub_->MakeDir(&ctx, mk, &empty).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(access(mk.path().c_str(), F_OK), 0);
}

TEST_F(AgentServiceTest, ClaimIsRefusedByAnAgentThatIsNotAGuestsInit) {
  agentpb::ClaimRequest claim;
  claim.set_hostname("box");
  claim.set_machine_id("0123456789abcdef0123456789abcdef");
  claim.set_seed(std::string(32, 's'));
  claim.set_unix_time_ns(1);
  grpc::ClientContext ctx;
  agentpb::Empty empty;
  grpc::Status s = stub_->Claim(&ctx, claim, &empty);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
  EXPECT_NE(s.error_message().find("not a guest's init"), std::string::npos);
  // A malformed claim is refused as such, before the agent looks further.
  claim.set_seed("short");
  grpc::ClientContext ctx2;
  s = stub_->Claim(&ctx2, claim, &empty);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
}

TEST(AgentServiceClaimTest, AValidClaimReachesTheGuestAndAMalformedOneDoesNot) {
  std::vector<std::string> applied;
  AgentService service([] {}, [&](const agentpb::ClaimRequest& c) {
    applied.push_back(c.hostname());
    return absl::OkStatus();
  });
  agentpb::ClaimRequest claim;
  claim.set_hostname("box-2");
  claim.set_machine_id("0123456789abcdef0123456789abcdef");
  claim.set_seed(std::string(32, 's'));
  claim.set_unix_time_ns(1);
  agentpb::Empty empty;
  grpc::ServerContext ctx;
  EXPECT_TRUE(service.Claim(&ctx, &claim, &empty).ok());
  claim.set_hostname("bad name");
  EXPECT_EQ(service.Claim(&ctx, &claim, &empty).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(applied, std::vector<std::string>{"box-2"});
}

}  // namespace
}  // namespace airlock::guest
