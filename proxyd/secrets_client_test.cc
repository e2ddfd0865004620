#include "proxyd/secrets_client.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "gtest/gtest.h"
#include "protos/secrets/v1/secrets.grpc.pb.h"

namespace airlock::proxyd {
namespace {

namespace pb = airlock::secrets::v1;
using std::chrono::milliseconds;

// FakeSecretsd answers Resolve with its current value and revision, and
// serves WatchRevisions as the test directs: pings answered (or ignored),
// changes pushed and their acknowledgements awaited.
class FakeSecretsd final : public pb::Secrets::Service {
 public:
  grpc::Status Resolve(grpc::ServerContext*, const pb::ResolveRequest* req,
                       pb::ResolveResponse* resp) override {
    std::lock_guard<std::mutex> lock(mu_);
    ++resolves_;
    pb::Credential* c = resp->add_credentials();
    c->set_id("custom:T@global");
    c->set_value(value_);
    c->mutable_placement()->mutable_replace();
    resp->set_instance(instance_);
    resp->set_revision(revision_);
    return grpc::Status::OK;
  }

  grpc::Status WatchRevisions(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::Revision, pb::WatchRequest>* stream) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stream_ = stream;
      ctx_ = ctx;
    }
    pb::WatchRequest req;
    while (stream->Read(&req)) {
      std::lock_guard<std::mutex> lock(mu_);
      if (req.ack() != 0) {
        acked_ = std::max(acked_, req.ack());
        cv_.notify_all();
      }
      if (req.ping() != 0 && answer_pings_) {
        pb::Revision m;
        m.set_instance(instance_);
        m.set_revision(revision_);
        m.set_ping(req.ping());
        m.set_lease_ms(lease_ms_);
        stream->Write(m);
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    stream_ = nullptr;
    ctx_ = nullptr;
    return grpc::Status::OK;
  }

  // Change sets a new value, pushes the new revision and returns whether
  // the watcher acknowledged it within 5 s.
  bool Change(const std::string& value) {
    std::unique_lock<std::mutex> lock(mu_);
    value_ = value;
    uint64_t r = ++revision_;
    if (stream_ == nullptr) return false;
    pb::Revision m;
    m.set_instance(instance_);
    m.set_revision(r);
    stream_->Write(m);
    return cv_.wait_for(lock, std::chrono::seconds(5), [&] { return acked_ >= r; });
  }
  void EndStream() {
    std::lock_guard<std::mutex> lock(mu_);
    if (ctx_ != nullptr) ctx_->TryCancel();
  }
  void AnswerPings(bool on) {
    std::lock_guard<std::mutex> lock(mu_);
    answer_pings_ = on;
  }
  void SetLease(uint32_t ms) {
    std::lock_guard<std::mutex> lock(mu_);
    lease_ms_ = ms;
  }
  int resolves() {
    std::lock_guard<std::mutex> lock(mu_);
    return resolves_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::string value_ = "v1";
  uint64_t instance_ = 42;
  uint64_t revision_ = 1;
  uint64_t acked_ = 0;
  uint32_t lease_ms_ = 1000;
  bool answer_pings_ = true;
  int resolves_ = 0;
  grpc::ServerReaderWriter<pb::Revision, pb::WatchRequest>* stream_ = nullptr;
  grpc::ServerContext* ctx_ = nullptr;
};

class SecretsClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/airlock-test-secrets-client-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
    std::string address = "unix:" + dir_ + "/secretsd.sock";
    grpc::ServerBuilder builder;
    builder.AddListeningPort(address, grpc::InsecureServerCredentials());
    builder.RegisterService(&fake_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    client_ = std::make_unique<SecretsClient>(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    client_.reset();
    server_->Shutdown(std::chrono::system_clock::now());
    unlink((dir_ + "/secretsd.sock").c_str());
    rmdir(dir_.c_str());
  }
  // Value is what a request to the host gets: kept, or asked for.
  std::string Value() {
    if (auto kept = client_->Cached("s1", "api.example.com", 443)) {
      return kept->empty() ? "" : (*kept)[0].value;
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    auto got = client_->Resolve(&ctx, "s1", "api.example.com", 443);
    if (!got.ok()) return std::string(got.status().message());
    return got->empty() ? "" : (*got)[0].value;
  }
  bool WaitWatching(bool want) {
    for (int i = 0; i < 500; ++i) {
      if (client_->watching() == want) return true;
      std::this_thread::sleep_for(milliseconds(10));
    }
    return false;
  }

  std::string dir_;
  FakeSecretsd fake_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<SecretsClient> client_;
};

TEST_F(SecretsClientTest, WithoutAWatchEveryRequestAsks) {
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(fake_.resolves(), 2);
}

TEST_F(SecretsClientTest, AWatchedAnswerIsAskedForOnce) {
  client_->Start();
  ASSERT_TRUE(WaitWatching(true));
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(fake_.resolves(), 1);
}

TEST_F(SecretsClientTest, AChangeIsAcknowledgedOnlyOnceTheOldAnswerIsDropped) {
  client_->Start();
  ASSERT_TRUE(WaitWatching(true));
  EXPECT_EQ(Value(), "v1");
  ASSERT_TRUE(fake_.Change("v2"));
  // Acknowledged: the very next request must see the change.
  EXPECT_FALSE(client_->Cached("s1", "api.example.com", 443).has_value());
  EXPECT_EQ(Value(), "v2");
  EXPECT_EQ(Value(), "v2");
  EXPECT_EQ(fake_.resolves(), 2);
}

TEST_F(SecretsClientTest, AWatcherThatHearsNothingStopsTrustingAfterItsLease) {
  fake_.SetLease(300);
  client_->Start();
  ASSERT_TRUE(WaitWatching(true));
  EXPECT_EQ(Value(), "v1");
  fake_.AnswerPings(false);
  // The stream stays open, but no ping is answered: within a lease (plus
  // the ping already answered) nothing kept is used.
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_FALSE(client_->Cached("s1", "api.example.com", 443).has_value());
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(fake_.resolves(), 2);
}

TEST_F(SecretsClientTest, AnEndedWatchDropsEverythingAndReconnects) {
  client_->Start();
  ASSERT_TRUE(WaitWatching(true));
  EXPECT_EQ(Value(), "v1");
  fake_.EndStream();
  ASSERT_TRUE(WaitWatching(false));
  EXPECT_FALSE(client_->Cached("s1", "api.example.com", 443).has_value());
  ASSERT_TRUE(WaitWatching(true));  // reopened after a pause
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(Value(), "v1");
  EXPECT_EQ(fake_.resolves(), 2);
}

TEST_F(SecretsClientTest, StopEndsTheWatchPromptly) {
  client_->Start();
  ASSERT_TRUE(WaitWatching(true));
  auto start = std::chrono::steady_clock::now();
  client_->Stop();
  EXPECT_FALSE(client_->watching());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
}

}  // namespace
}  // namespace airlock::proxyd
