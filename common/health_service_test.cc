// HealthService on a real in-process gRPC server over a Unix socket.
#include "common/health_service.h"

#include <thread>

#include "common/testing/harness.h"
#include "gtest/gtest.h"

namespace airlock {
namespace {

namespace health = grpc::health::v1;

class HealthServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    b.AddListeningPort("unix:" + dir_.path() + "/h.sock", grpc::InsecureServerCredentials());
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    stub_ = health::Health::NewStub(
        grpc::CreateChannel("unix:" + dir_.path() + "/h.sock", grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    service_.Shutdown();
    server_->Shutdown();
  }

  grpc::Status Check(const std::string& service, health::HealthCheckResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    health::HealthCheckRequest req;
    req.set_service(service);
    return stub_->Check(&ctx, req, resp);
  }

  testing::ShortTempDir dir_;
  HealthService service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<health::Health::Stub> stub_;
};

TEST_F(HealthServiceTest, CheckFollowsSetServing) {
  health::HealthCheckResponse resp;
  ASSERT_TRUE(Check("", &resp).ok());
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::NOT_SERVING);
  service_.SetServing(true);
  ASSERT_TRUE(Check("", &resp).ok());
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVING);
  grpc::Status other = Check("some.Other", &resp);
  EXPECT_EQ(other.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(other.error_message(), "this daemon serves no service named \"some.Other\"");
}

TEST_F(HealthServiceTest, WatchSendsEachChangeAndEndsAtShutdown) {
  service_.SetServing(true);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  auto reader = stub_->Watch(&ctx, health::HealthCheckRequest());
  health::HealthCheckResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVING);
  service_.SetServing(false);
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::NOT_SERVING);
  service_.SetServing(true);
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVING);
  // The server going away says NOT_SERVING last, then ends the stream.
  service_.Shutdown();
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(reader->Read(&resp));
  EXPECT_TRUE(reader->Finish().ok());
}

TEST_F(HealthServiceTest, WatchOfAnUnknownServiceSaysSo) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(20));
  health::HealthCheckRequest req;
  req.set_service("some.Other");
  auto reader = stub_->Watch(&ctx, req);
  health::HealthCheckResponse resp;
  ASSERT_TRUE(reader->Read(&resp));
  EXPECT_EQ(resp.status(), health::HealthCheckResponse::SERVICE_UNKNOWN);
  ctx.TryCancel();
}

}  // namespace
}  // namespace airlock
