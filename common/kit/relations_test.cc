#include "common/kit/relations.h"

#include <string>

#include "gtest/gtest.h"

namespace airlock::kit {
namespace {

TEST(NormalizeNameTest, BareNamesJoinTheDefaultNamespace) {
  EXPECT_EQ(*NormalizeName("gh"), "com.docker.kit/gh");
  EXPECT_EQ(*NormalizeName(" com.docker.kit/gh "), "com.docker.kit/gh");
  EXPECT_EQ(*NormalizeName("com.example/gh"), "com.example/gh");
  EXPECT_EQ(*NormalizeName("libstdc++6"), "com.docker.kit/libstdc++6");
  EXPECT_EQ(*NormalizeName("python-3.14"), "com.docker.kit/python-3.14");
  EXPECT_EQ(*NormalizeName("deb/containerd.io"), "deb/containerd.io");
  EXPECT_EQ(ShortName("com.docker.kit/gh"), "gh");
  EXPECT_EQ(ShortName("com.example/gh"), "com.example/gh");
  EXPECT_TRUE(IsReservedNamespace("apk/musl"));
  EXPECT_FALSE(IsReservedNamespace("com.example/deb"));
}

TEST(NormalizeNameTest, Refusals) {
  struct Case {
    const char* name;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {"", "missing capability name"},
           {"GH", "is not a valid name"},
           {"-gh", "is not a valid name"},
           {"gh.", "is not a valid name"},
           {"gh tool", "is not a valid name"},
           {"example/gh", "namespace \"example\" in \"example/gh\" is a single label"},
           {"com..example/gh", "is not a valid namespace"},
           {"com.-x/gh", "is not a valid namespace"},
           {"a.b/c/d", "is not a valid name"},
       }) {
    absl::StatusOr<std::string> n = NormalizeName(c.name);
    ASSERT_FALSE(n.ok()) << c.name;
    EXPECT_NE(n.status().message().find(c.error), absl::string_view::npos)
        << c.name << ": " << n.status();
  }
  EXPECT_TRUE(NormalizeName(std::string(64, 'a')).ok());
  EXPECT_FALSE(NormalizeName(std::string(65, 'a')).ok());
}

TEST(VersionTest, Shape) {
  for (const char* v : {"0", "1.2.3", "2.0-rc1", "1.07.1", "10.a-b.C"})
    EXPECT_TRUE(IsVersion(v)) << v;
  for (const char* v : {"", "v1", "1.", "1..2", ".1", "1.2_3", "a.1", "1.2+b"}) {
    EXPECT_FALSE(IsVersion(v)) << v;
  }
}

TEST(VersionTest, Order) {
  EXPECT_LT(CompareVersions("1.2", "1.10"), 0);
  EXPECT_LT(CompareVersions("1.2", "1.2.0"), 0);  // a missing segment sorts lowest
  EXPECT_GT(CompareVersions("2.0-rc1", "2.0"), 0);
  EXPECT_EQ(CompareVersions("1.02", "1.2"), 0);
  EXPECT_GT(CompareVersions("1.123456789012345678901234567890", "1.99999999999999999999"), 0);
  EXPECT_LT(CompareVersions("1.a", "1.b"), 0);
  EXPECT_GT(CompareVersions("1.0.-", "1.0"), 0);
  EXPECT_LT(CompareVersions("1.0.-", "1.0.0"), 0);
}

TEST(ParseProvideTest, Forms) {
  absl::StatusOr<Provide> p = ParseProvide(" gh@2.1.0 ");
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->name, "com.docker.kit/gh");
  EXPECT_EQ(p->version, "2.1.0");
  EXPECT_EQ(ParseProvide("com.example/gh")->version, "");
  EXPECT_FALSE(ParseProvide("gh@").ok());
  EXPECT_FALSE(ParseProvide("gh@v2").ok());
  EXPECT_FALSE(ParseProvide("@1.0").ok());
}

TEST(ParseRequirementTest, Grammar) {
  absl::StatusOr<Requirement> r = ParseRequirement("gh >= 2.0, < 3");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->name, "com.docker.kit/gh");
  ASSERT_EQ(r->constraints.size(), 2u);
  EXPECT_EQ(r->constraints[0].Text(), ">=2.0");
  EXPECT_EQ(r->constraints[1].Text(), "<3");

  EXPECT_EQ(ParseRequirement("shell>=1.0.0")->constraints.size(), 1u);
  EXPECT_EQ(ParseRequirement("shell")->constraints.size(), 0u);
  EXPECT_EQ(ParseRequirement("a=1")->constraints[0].op, Op::kEq);
  EXPECT_EQ(ParseRequirement("a<=1")->constraints[0].op, Op::kLe);
  EXPECT_EQ(ParseRequirement("a>1")->constraints[0].op, Op::kGt);
}

TEST(ParseRequirementTest, Refusals) {
  struct Case {
    const char* text;
    const char* error;
  };
  for (const Case& c : std::vector<Case>{
           {">= 1", "missing capability name"},
           {"gh >=", "constraint \">=\": missing version"},
           {"gh >= 1,", "trailing comma in constraints"},
           {"gh >= 1,, < 2", "empty constraints"},
           {"gh >= 1, ~2", "expected version operator, got \"~2\""},
           {"gh >= v1", "constraint \">= v1\": \"v1\" is not a version"},
           {"gh = 1, = 2", "unsatisfiable constraints: = 1 and = 2"},
           {"gh = 3, < 2", "unsatisfiable constraints: = 3 and < 2"},
           {"gh = 1, >= 2", "unsatisfiable constraints: >= 2 and = 1"},
           {"gh >= 3, < 2", "unsatisfiable constraints: >= 3 and < 2"},
           {"gh >= 2, < 2", "unsatisfiable constraints: >= 2 and < 2"},
           {"gh > 2, <= 2", "unsatisfiable constraints: > 2 and <= 2"},
           {"gh < 0", "unsatisfiable constraints: >= 0 and < 0"},
           {"gh > 0, < 0.-", "unsatisfiable constraints: > 0 and < 0.-"},
       }) {
    absl::StatusOr<Requirement> r = ParseRequirement(c.text);
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.error), absl::string_view::npos)
        << c.text << ": " << r.status();
  }
  // Satisfiable neighbours of the refusals above.
  for (const char* ok : {"gh = 1.0, = 1.00", "gh >= 2, <= 2", "gh = 2, >= 1, < 3", "gh <= 0"}) {
    EXPECT_TRUE(ParseRequirement(ok).ok()) << ok << ": " << ParseRequirement(ok).status();
  }
}

TEST(SatisfiesTest, Matching) {
  Provide v21 = *ParseProvide("gh@2.1.0");
  Provide bare = *ParseProvide("gh");
  EXPECT_TRUE(Satisfies(v21, *ParseRequirement("gh")));
  EXPECT_TRUE(Satisfies(v21, *ParseRequirement("com.docker.kit/gh >= 2, < 3")));
  EXPECT_FALSE(Satisfies(v21, *ParseRequirement("gh >= 3")));
  EXPECT_FALSE(Satisfies(v21, *ParseRequirement("com.example/gh")));
  EXPECT_TRUE(Satisfies(bare, *ParseRequirement("gh")));
  EXPECT_FALSE(Satisfies(bare, *ParseRequirement("gh >= 0")));
  EXPECT_TRUE(Satisfies(v21, *ParseRequirement("gh > 2.1")));
  EXPECT_FALSE(Satisfies(v21, *ParseRequirement("gh = 2.1")));
}

TEST(ParseConflictTest, BareNamesOnly) {
  EXPECT_EQ(*ParseConflict("forge-legacy"), "com.docker.kit/forge-legacy");
  EXPECT_FALSE(ParseConflict("forge@1").ok());
  EXPECT_FALSE(ParseConflict("forge < 2").ok());
  EXPECT_FALSE(ParseConflict("Forge").ok());
}

}  // namespace
}  // namespace airlock::kit
