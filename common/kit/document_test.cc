#include "common/kit/document.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace airlock::kit {
namespace {

Value Decode(const std::string& text) {
  absl::StatusOr<Value> v = DecodeDocument(text);
  EXPECT_TRUE(v.ok()) << v.status() << "\n" << text;
  return v.ok() ? *v : Value();
}

void ExpectError(const std::string& text, const std::string& want) {
  absl::StatusOr<Value> v = DecodeDocument(text);
  ASSERT_FALSE(v.ok()) << "decoded, but want: " << want << "\n" << text;
  EXPECT_NE(v.status().message().find(want), absl::string_view::npos)
      << "want: " << want << "\ngot:  " << v.status().message();
}

TEST(DecodeDocumentTest, PlainScalarsResolveQuotedOnesStayStrings) {
  Value v = Decode(
      "i: 8080\nneg: -3\nhex: 0x1f\nf: 1.5\nb: true\nn: null\ntilde: ~\nempty:\n"
      "s: hello\nqi: '8080'\nqb: \"true\"\nblock: |\n  text\ntag: !!str 3\nver: 1.10\n");
  EXPECT_EQ(v.Find("i")->kind, Value::Kind::kInt);
  EXPECT_EQ(v.Find("i")->int_value, 8080);
  EXPECT_EQ(v.Find("neg")->int_value, -3);
  EXPECT_EQ(v.Find("hex")->int_value, 31);
  EXPECT_EQ(v.Find("f")->kind, Value::Kind::kFloat);
  EXPECT_DOUBLE_EQ(v.Find("f")->float_value, 1.5);
  EXPECT_EQ(v.Find("b")->kind, Value::Kind::kBool);
  EXPECT_TRUE(v.Find("b")->bool_value);
  EXPECT_TRUE(v.Find("n")->is_null());
  EXPECT_TRUE(v.Find("tilde")->is_null());
  EXPECT_TRUE(v.Find("empty")->is_null());
  EXPECT_EQ(v.Find("s")->kind, Value::Kind::kString);
  EXPECT_EQ(v.Find("qi")->kind, Value::Kind::kString);
  EXPECT_EQ(v.Find("qb")->kind, Value::Kind::kString);
  EXPECT_EQ(v.Find("block")->text, "text\n");
  EXPECT_EQ(v.Find("tag")->kind, Value::Kind::kString);
  // The float keeps its spelling for fields read as text.
  EXPECT_EQ(v.Find("ver")->kind, Value::Kind::kFloat);
  EXPECT_EQ(v.Find("ver")->text, "1.10");
}

TEST(DecodeDocumentTest, JsonIsYaml) {
  Value y = Decode("a: [1, x, {b: true}]\nc: \"<&>\"\n");
  Value j = Decode(R"({"c":"\u003c\u0026\u003e","a":[1,"x",{"b":true}]})");
  EXPECT_TRUE(Equal(y, j));
  EXPECT_EQ(j.Find("c")->text, "<&>");
}

TEST(DecodeDocumentTest, KeepsDocumentOrder) {
  Value v = Decode("z: 1\na: 2\nm: 3\n");
  ASSERT_EQ(v.fields.size(), 3u);
  EXPECT_EQ(v.fields[0].first, "z");
  EXPECT_EQ(v.fields[2].first, "m");
}

TEST(DecodeDocumentTest, Refusals) {
  ExpectError("a: 1\nb: 2\na: 3\n", "line 3 column 1: mapping key \"a\" already defined");
  ExpectError("? [a, b]\n: 1\n", "mapping keys must be scalars");
  ExpectError("a: !custom x\n", "unsupported YAML tag \"!custom\"");
  ExpectError("a: !!int abc\n", "\"abc\" is not a valid !!int");
  ExpectError("a: 1\n---\nb: 2\n", "line 2 column 1: expected one YAML document, found another");
  // Found by //fuzz:kit_descriptor: yaml-cpp reads a comma after a flow
  // collection as an endless run of empty documents.
  ExpectError("[],", "line 1 column 3: expected one YAML document, found another");
  ExpectError("{a: {b: []}},", "expected one YAML document, found another");
  ExpectError("", "the document is empty");
  ExpectError("a: .nan\n", "has no JSON spelling");
  ExpectError("a: -.inf\n", "has no JSON spelling");
  ExpectError("a: [1, 2\n", "line ");
  // Found by //fuzz:kit_descriptor: bytes that are not UTF-8 became U+FFFD
  // in the JSON, which then did not decode to the same JSON.
  ExpectError("a: caf\xe9\n", "line 1 column 4: the scalar is not valid UTF-8");
  ExpectError("a: 1\nb\xff: 2\n", "line 2 column 1: the scalar is not valid UTF-8");
  ExpectError("a: \xf8\x88\x80\x80\x80\n", "the scalar is not valid UTF-8");
  EXPECT_EQ(Decode("a: \"caf\\u00e9 \xf0\x9f\x98\x80\"\n").Find("a")->text,
            "caf\xc3\xa9 \xf0\x9f\x98\x80");
  // Found by //fuzz:kit_descriptor: a key whose JSON spelling (escapes
  // and quotes) is over yaml-cpp's 1024 characters for an implicit key
  // could be read but its canonical JSON could not.
  ExpectError(std::string(171, '<') + ": 1\n", "line 1 column 1: mapping key is longer than 1024");
  Value long_key = Decode(std::string(1022, 'k') + ": 1\n");
  EXPECT_TRUE(DecodeDocument(ToCanonicalJson(long_key)).ok());
  // An alias that contains itself would recurse forever.
  ExpectError("a: &x [1, *x]\n", "nests deeper than 64 levels");
  // A billion laughs: a few lines that alias into 10^8 nodes.
  std::string bomb = "l0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 7; ++i) {
    std::string prev = absl::StrCat("*l", i - 1);
    absl::StrAppend(&bomb, "l", i, ": &l", i, " [", prev, ", ", prev, ", ", prev, ", ", prev, ", ",
                    prev, ", ", prev, ", ", prev, ", ", prev, ", ", prev, ", ", prev, "]\n");
  }
  ExpectError(bomb, "more than 524288 nodes through aliases");
}

TEST(DecodeDocumentTest, DeepButFiniteNestingIsFine) {
  std::string text = "a: " + std::string(30, '[') + std::string(30, ']') + "\n";
  Decode(text);
}

TEST(CanonicalJsonTest, MatchesGoEncoding) {
  Value v = Decode(
      "z: 1\na: [true, null, 1.5, 4.0, 1e21, 0.0000001, -2]\n"
      "s: \"<a href='x'>&</a>\\u2028\"\nnested: {b: 1, a: 2}\n");
  EXPECT_EQ(ToCanonicalJson(v), R"({"a":[true,null,1.5,4,1e+21,1e-7,-2],"nested":{"a":2,"b":1},)"
                                R"("s":"\u003ca href='x'\u003e\u0026\u003c/a\u003e\u2028","z":1})");
}

// Found by //fuzz:kit_descriptor: -0.0 was written "-0", which decodes as
// the integer 0 and so wrote "0" the second time.
TEST(CanonicalJsonTest, IsAFixedPointOfDecoding) {
  std::string json = ToCanonicalJson(Decode("[-0.0, -0, 0.0, -1.5e-7, 2.0]\n"));
  EXPECT_EQ(json, "[0,0,0,-1.5e-7,2]");
  EXPECT_EQ(ToCanonicalJson(Decode(json)), json);
}

TEST(CanonicalJsonTest, EscapesControlsAndReplacesInvalidUtf8) {
  Value v = Value::String(std::string("tab\tnl\nq\"bs\\\x01") + "\xff" + "é");
  EXPECT_EQ(ToCanonicalJson(v), "\"tab\\tnl\\nq\\\"bs\\\\\\u0001\\ufffdé\"");
}

TEST(EqualTest, IgnoresKeyOrderNotTypes) {
  EXPECT_TRUE(Equal(Decode("{a: 1, b: [x]}"), Decode("{b: [x], a: 1}")));
  EXPECT_FALSE(Equal(Decode("{a: 1}"), Decode("{a: '1'}")));
  EXPECT_FALSE(Equal(Decode("{a: 1}"), Decode("{a: 1, b: 2}")));
  EXPECT_FALSE(Equal(Decode("[1, 2]"), Decode("[2, 1]")));
}

}  // namespace
}  // namespace airlock::kit
