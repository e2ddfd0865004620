#include "common/kit/references.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace airlock::kit {
namespace {

std::vector<std::string> ArgNames(const std::string& s) {
  std::vector<std::string> out;
  for (const Reference& r : FindArgRefs(s)) out.push_back(r.name);
  return out;
}

TEST(FindArgRefsTest, Grammar) {
  EXPECT_EQ(ArgNames("${{ kit.args.a }}"), std::vector<std::string>{"a"});
  EXPECT_EQ(ArgNames("${{kit.args.a_1}}x${{\tkit.args._b\n}}"),
            (std::vector<std::string>{"a_1", "_b"}));
  EXPECT_TRUE(ArgNames("${{ kit.args.1a }}").empty());
  EXPECT_TRUE(ArgNames("${{ kit.args.a-b }}").empty());
  EXPECT_TRUE(ArgNames("${ kit.args.a }").empty());
  EXPECT_TRUE(ArgNames("$VAR ${VAR} ~/x").empty());
  EXPECT_TRUE(ArgNames("${{ kit.env.A }}").empty());
  EXPECT_TRUE(HasArgRef("a${{ kit.args.x }}b"));
  EXPECT_FALSE(HasArgRef("a${{ kit.args.x }b"));
}

TEST(FindEnvRefsTest, WellFormedAndMalformed) {
  absl::StatusOr<std::vector<Reference>> refs = FindEnvRefs("${{ kit.env.HOME }}/x:${{kit.env.P}}");
  ASSERT_TRUE(refs.ok());
  ASSERT_EQ(refs->size(), 2u);
  EXPECT_EQ((*refs)[0].name, "HOME");
  EXPECT_EQ((*refs)[1].name, "P");

  EXPECT_TRUE(HasEnvOpener("x ${{ kit.env"));
  EXPECT_FALSE(HasEnvOpener("${{ kit.environment }}"));
  for (const char* bad :
       {"${{ kit.env }}", "${{ kit.env.1X }}", "${{ kit.env.A", "${{ kit.env-A }}"}) {
    absl::StatusOr<std::vector<Reference>> r = FindEnvRefs(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().message(), "malformed kit.env reference");
  }
}

ArgLookup Values(std::map<std::string, std::string> values) {
  return [values](absl::string_view name) -> absl::StatusOr<std::optional<std::string>> {
    auto it = values.find(std::string(name));
    if (it == values.end()) return std::nullopt;
    return it->second;
  };
}

TEST(SubstituteArgRefsTest, WholeEmbeddedAndUnowned) {
  auto whole = SubstituteArgRefs("${{ kit.args.port }}", Values({{"port", "8080"}}));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->text, "8080");
  EXPECT_TRUE(whole->whole);

  auto embedded = SubstituteArgRefs("v${{ kit.args.port }}", Values({{"port", "8080"}}));
  ASSERT_TRUE(embedded.ok());
  EXPECT_EQ(embedded->text, "v8080");
  EXPECT_FALSE(embedded->whole);

  // A reference another pass owns stays as written.
  auto unowned = SubstituteArgRefs("${{ kit.args.a }}-${{ kit.args.b }}", Values({{"b", "B"}}));
  ASSERT_TRUE(unowned.ok());
  EXPECT_EQ(unowned->text, "${{ kit.args.a }}-B");
  EXPECT_FALSE(unowned->whole);

  auto none = SubstituteArgRefs("plain", Values({}));
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->changed);

  // Quotes and backslashes in values survive as data.
  auto quoted = SubstituteArgRefs("'${{ kit.args.q }}'", Values({{"q", "a'\"\\b"}}));
  ASSERT_TRUE(quoted.ok());
  EXPECT_EQ(quoted->text, "'a'\"\\b'");
}

TEST(SubstituteArgRefsTest, LookupErrorsPropagate) {
  ArgLookup fail = [](absl::string_view) -> absl::StatusOr<std::optional<std::string>> {
    return absl::InvalidArgumentError("no value");
  };
  EXPECT_EQ(SubstituteArgRefs("${{ kit.args.a }}", fail).status().message(), "no value");
}

TEST(SubstituteArgRefsTest, NeverIntroducesAnEnvironmentReference) {
  // Joining a substituted "$" with the literal rest forms a reference the
  // descriptor never contained.
  auto joined = SubstituteArgRefs("${{ kit.args.d }}{{ kit.env.SECRET }}", Values({{"d", "$"}}));
  ASSERT_FALSE(joined.ok());
  EXPECT_EQ(joined.status().message(), "argument substitution introduces an environment reference");
  // An empty value splicing two literal halves together is refused too.
  auto spliced = SubstituteArgRefs("${{ kit.en${{ kit.args.e }}v.SECRET }}", Values({{"e", ""}}));
  EXPECT_FALSE(spliced.ok());
  // An environment reference the author wrote survives untouched.
  auto authored = SubstituteArgRefs("${{ kit.args.a }}:${{ kit.env.HOME }}", Values({{"a", "x"}}));
  ASSERT_TRUE(authored.ok()) << authored.status();
  EXPECT_EQ(authored->text, "x:${{ kit.env.HOME }}");
}

TEST(HasKitPlaceholderTest, OnlyKitOpeners) {
  EXPECT_TRUE(HasKitPlaceholder("a ${{ kit.args.x }}"));
  EXPECT_TRUE(HasKitPlaceholder("${{kit.env"));
  EXPECT_TRUE(HasKitPlaceholder("${{ kit.anything"));
  EXPECT_FALSE(HasKitPlaceholder("${{ github.token }}"));
  EXPECT_FALSE(HasKitPlaceholder("$HOME ${HOME} {{.Prompt}}"));
}

TEST(SubstituteEnvRefsTest, ValuesStayStrings) {
  EnvLookup env = [](absl::string_view name) -> absl::StatusOr<std::string> {
    if (name == "PORT") return std::string("8080");
    return absl::NotFoundError("missing");
  };
  auto s = SubstituteEnvRefs("${{ kit.env.PORT }}", env);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->text, "8080");
  EXPECT_TRUE(s->whole);
  EXPECT_FALSE(SubstituteEnvRefs("${{ kit.env.NOPE }}", env).ok());
  EXPECT_EQ(SubstituteEnvRefs("${{ kit.env }}", env).status().message(),
            "malformed kit.env reference");
}

TEST(TypeWholeValueTest, SpecTypingRule) {
  struct Case {
    const char* in;
    Value::Kind kind;
  };
  for (const Case& c : std::vector<Case>{{"true", Value::Kind::kBool},
                                         {"false", Value::Kind::kBool},
                                         {"True", Value::Kind::kString},
                                         {"8080", Value::Kind::kInt},
                                         {"-12", Value::Kind::kInt},
                                         {"007", Value::Kind::kString},
                                         {"+5", Value::Kind::kString},
                                         {"1.5", Value::Kind::kFloat},
                                         {"0.25", Value::Kind::kFloat},
                                         {"1.0", Value::Kind::kString},
                                         {"1e5", Value::Kind::kString},
                                         {".5", Value::Kind::kString},
                                         {"NaN", Value::Kind::kString},
                                         {"Inf", Value::Kind::kString},
                                         {"99999999999999999999", Value::Kind::kString},
                                         {"", Value::Kind::kString},
                                         {"2g", Value::Kind::kString}}) {
    Value v = TypeWholeValue(c.in);
    EXPECT_EQ(v.kind, c.kind) << c.in;
    EXPECT_EQ(v.text, c.in) << c.in;
  }
  EXPECT_EQ(TypeWholeValue("8080").int_value, 8080);
}

}  // namespace
}  // namespace airlock::kit
