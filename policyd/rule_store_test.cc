#include "policyd/rule_store.h"

#include "gtest/gtest.h"

namespace airlock::policyd {
namespace {

class RuleStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = std::string(getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".db";
    db_ = std::move(*StateDb::Open(path_));
    store_ = std::make_unique<RuleStore>(db_.get());
    ASSERT_TRUE(store_->Init().ok());
  }
  RuleSpec Spec(Action a, const std::string& res, const std::string& sandbox = "") {
    RuleSpec s;
    s.action = a;
    s.resource = res;
    s.sandbox = sandbox;
    return s;
  }
  std::string path_;
  std::unique_ptr<StateDb> db_;
  std::unique_ptr<RuleStore> store_;
};

TEST_F(RuleStoreTest, NewInstallStartsOnBalanced) {
  EXPECT_EQ(store_->Preset(), "balanced");
  auto d = store_->Compiled()->Decide(*ParseTarget("api.anthropic.com", ""));
  EXPECT_EQ(d.action, Action::kAllow);
  EXPECT_EQ(store_->Compiled()->Decide(*ParseTarget("example.com", "")).action, Action::kDeny);
}

TEST_F(RuleStoreTest, AddIsAllOrNothingAndSurvivesReopen) {
  size_t before = store_->List("").size();
  auto bad = store_->Add({Spec(Action::kAllow, "ok.example.com"), Spec(Action::kAllow, "a.*.com")});
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("a.*.com"), std::string::npos);
  EXPECT_EQ(store_->List("").size(), before) << "nothing changes on bad input";
  ASSERT_TRUE(store_->Add({Spec(Action::kAllow, "ok.example.com"),
                           Spec(Action::kDeny, "pypi.org", "box1")})
                  .ok());
  RuleStore again(db_.get());
  ASSERT_TRUE(again.Init().ok());
  EXPECT_EQ(again.List("").size(), before + 1);
  EXPECT_EQ(again.List("box1").size(), before + 2);
  Request q = *ParseTarget("pypi.org", "");
  q.sandbox = "box1";
  EXPECT_EQ(again.Compiled()->Decide(q).action, Action::kDeny);
}

TEST_F(RuleStoreTest, RemoveByIdAndResource) {
  auto added = store_->Add({Spec(Action::kAllow, "x.example.com"), Spec(Action::kAllow, "y.example.com")});
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(*store_->Remove((*added)[0].id, "", ""), 1);
  EXPECT_EQ(*store_->Remove("", "Y.example.com", ""), 1);
  EXPECT_EQ(store_->Remove("", "y.example.com", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Remove("r-nope", "", "").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(RuleStoreTest, PresetsReplaceOnlyPresetRules) {
  ASSERT_TRUE(store_->Add({Spec(Action::kAllow, "mine.example.com")}).ok());
  ASSERT_TRUE(store_->InitPreset("deny-all").ok());
  EXPECT_EQ(store_->List("").size(), 1u);
  ASSERT_TRUE(store_->InitPreset("allow-all").ok());
  EXPECT_EQ(store_->Compiled()->Decide(*ParseTarget("anything.net", "")).action, Action::kAllow);
  EXPECT_FALSE(store_->InitPreset("most").ok());
  EXPECT_EQ(store_->Preset(), "allow-all");
}

TEST(ParseTargetTest, Forms) {
  auto url = ParseTarget("https://api.github.com/repos/a/b?x=1", "delete");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->host, "api.github.com");
  EXPECT_EQ(url->port, 443);
  EXPECT_TRUE(url->http);
  EXPECT_EQ(url->method, "DELETE");
  EXPECT_EQ(url->path, "/repos/a/b");
  auto hp = ParseTarget("db.local:5432", "");
  EXPECT_EQ(hp->port, 5432);
  EXPECT_FALSE(hp->http);
  EXPECT_TRUE(ParseTarget("169.254.169.254", "")->has_address);
  EXPECT_TRUE(ParseTarget("[::1]:8080", "")->has_address);
  EXPECT_FALSE(ParseTarget("host:99999", "").ok());
}

}  // namespace
}  // namespace airlock::policyd
