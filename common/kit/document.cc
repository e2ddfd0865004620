#include "common/kit/document.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace airlock::kit {
namespace {

constexpr int kMaxDepth = 64;
// A document within the 512 KiB budget spells at most one node per byte
// without aliases; more than that is alias expansion.
constexpr size_t kMaxNodes = 512 * 1024;

constexpr absl::string_view kCoreTagPrefix = "tag:yaml.org,2002:";

// yaml-cpp reads an implicit key, as every key of JSON is, of at most 1024
// characters, quotes included. A key longer than that as JSON is refused,
// so that canonical JSON always decodes: escaping can make it six times
// the length of its YAML spelling.
constexpr size_t kMaxJsonKeyLength = 1024;

void AppendJsonString(absl::string_view s, std::string* out);

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), absl::ascii_isdigit);
}

// The YAML 1.2 core schema's float spelling: [-+]?(.d+|d+(.d*)?)([eE][-+]?d+)?
bool LooksLikeFloat(absl::string_view s) {
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.remove_prefix(1);
  size_t e = s.find_first_of("eE");
  absl::string_view mantissa = s.substr(0, e);
  if (e != absl::string_view::npos) {
    absl::string_view exp = s.substr(e + 1);
    if (!exp.empty() && (exp[0] == '-' || exp[0] == '+')) exp.remove_prefix(1);
    if (!IsDigits(exp)) return false;
  }
  size_t dot = mantissa.find('.');
  if (dot == absl::string_view::npos) return IsDigits(mantissa);
  absl::string_view whole = mantissa.substr(0, dot), frac = mantissa.substr(dot + 1);
  if (whole.empty()) return IsDigits(frac);
  return IsDigits(whole) && (frac.empty() || IsDigits(frac));
}

bool ParseInt(absl::string_view s, int64_t* out) {
  absl::string_view digits = s;
  bool negative = false;
  if (!digits.empty() && (digits[0] == '-' || digits[0] == '+')) {
    negative = digits[0] == '-';
    digits.remove_prefix(1);
  }
  int base = 10;
  if (absl::StartsWith(digits, "0x")) {
    base = 16;
    digits.remove_prefix(2);
  } else if (absl::StartsWith(digits, "0o")) {
    base = 8;
    digits.remove_prefix(2);
  }
  if (digits.empty()) return false;
  uint64_t magnitude = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  if (ec != std::errc() || end != digits.data() + digits.size()) return false;
  if (negative) {
    if (magnitude > static_cast<uint64_t>(INT64_MAX) + 1) return false;
    *out = static_cast<int64_t>(0 - magnitude);
  } else {
    if (magnitude > static_cast<uint64_t>(INT64_MAX)) return false;
    *out = static_cast<int64_t>(magnitude);
  }
  return true;
}

// Utf8Length is the length of the well-formed UTF-8 sequence starting
// at s[i] (shortest form, no surrogate, at most U+10FFFF), setting
// `code_point`; 0 when the bytes there are not one.
size_t Utf8Length(absl::string_view s, size_t i, uint32_t* code_point) {
  unsigned char c = s[i];
  if (c < 0x80) {
    *code_point = c;
    return 1;
  }
  size_t len = c >= 0xf8 ? 0 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : c >= 0xc0 ? 2 : 0;
  if (len == 0 || i + len > s.size()) return 0;
  uint32_t cp = len == 4 ? c & 0x07 : len == 3 ? c & 0x0f : c & 0x1f;
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = s[i + k];
    if ((cc & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return 0;
  *code_point = cp;
  return len;
}

bool IsUtf8(absl::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    size_t len = Utf8Length(s, i, &cp);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

class Decoder {
 public:
  absl::StatusOr<Value> Convert(const YAML::Node& node, int depth) {
    if (depth > kMaxDepth) {
      return Fail(node, absl::StrCat("document nests deeper than ", kMaxDepth,
                                     " levels (or an alias refers to itself)"));
    }
    if (++nodes_ > kMaxNodes) {
      return Fail(node, absl::StrCat("document expands to more than ", kMaxNodes,
                                     " nodes through aliases"));
    }
    switch (node.Type()) {
      case YAML::NodeType::Null:
      case YAML::NodeType::Undefined:
        return Value::Null();
      case YAML::NodeType::Scalar:
        if (!IsUtf8(node.Scalar())) return NotUtf8(node);
        return Scalar(node);
      case YAML::NodeType::Sequence: {
        if (!CollectionTagOk(node.Tag(), "seq")) return BadTag(node);
        Value list = Value::List();
        for (const YAML::Node& item : node) {
          absl::StatusOr<Value> v = Convert(item, depth + 1);
          if (!v.ok()) return v.status();
          list.items.push_back(*std::move(v));
        }
        return list;
      }
      case YAML::NodeType::Map: {
        if (!CollectionTagOk(node.Tag(), "map")) return BadTag(node);
        Value map = Value::Map();
        for (const auto& kv : node) {
          if (kv.first.Type() != YAML::NodeType::Scalar) {
            return Fail(kv.first, "mapping keys must be scalars");
          }
          std::string key = kv.first.Scalar();
          if (!IsUtf8(key)) return NotUtf8(kv.first);
          std::string spelled;
          AppendJsonString(key, &spelled);
          if (spelled.size() > kMaxJsonKeyLength) {
            return Fail(kv.first, absl::StrCat("mapping key is longer than ", kMaxJsonKeyLength,
                                               " characters as JSON"));
          }
          if (map.Find(key) != nullptr) {
            return Fail(kv.first, absl::StrCat("mapping key \"", key, "\" already defined"));
          }
          absl::StatusOr<Value> v = Convert(kv.second, depth + 1);
          if (!v.ok()) return v.status();
          map.fields.emplace_back(std::move(key), *std::move(v));
        }
        return map;
      }
    }
    return Fail(node, "unexpected YAML node");
  }

 private:
  static bool CollectionTagOk(const std::string& tag, absl::string_view core) {
    return tag.empty() || tag == "?" || tag == "!" || tag == absl::StrCat(kCoreTagPrefix, core);
  }

  absl::StatusOr<Value> Scalar(const YAML::Node& node) {
    const std::string& tag = node.Tag();
    const std::string& text = node.Scalar();
    // "!" is how yaml-cpp marks quoted and block scalars: always strings.
    if (tag == "!" || tag == absl::StrCat(kCoreTagPrefix, "str")) return Value::String(text);
    if (tag != "?" && !absl::StartsWith(tag, kCoreTagPrefix)) return BadTag(node);
    absl::StatusOr<Value> v = Resolve(node, text);
    if (!v.ok() || tag == "?") return v;
    // An explicit core tag must agree with what the scalar resolves to.
    absl::string_view want = absl::string_view(tag).substr(kCoreTagPrefix.size());
    static const std::map<absl::string_view, Value::Kind>* kTags =
        new std::map<absl::string_view, Value::Kind>{{"null", Value::Kind::kNull},
                                                     {"bool", Value::Kind::kBool},
                                                     {"int", Value::Kind::kInt},
                                                     {"float", Value::Kind::kFloat}};
    auto it = kTags->find(want);
    if (it == kTags->end()) return BadTag(node);
    if (it->second == Value::Kind::kFloat && v->kind == Value::Kind::kInt) {
      Value f = Value::Float(static_cast<double>(v->int_value));
      f.text = text;
      return f;
    }
    if (it->second != v->kind) {
      return Fail(node, absl::StrCat("\"", text, "\" is not a valid !!", want));
    }
    return v;
  }

  absl::StatusOr<Value> Resolve(const YAML::Node& node, const std::string& text) {
    if (text.empty() || text == "~" || text == "null" || text == "Null" || text == "NULL") {
      return Value::Null();
    }
    if (text == "true" || text == "True" || text == "TRUE") return Spelled(Value::Bool(true), text);
    if (text == "false" || text == "False" || text == "FALSE") {
      return Spelled(Value::Bool(false), text);
    }
    int64_t i;
    if (ParseInt(text, &i)) return Spelled(Value::Int(i), text);
    std::string lower = absl::AsciiStrToLower(text);
    if (lower == ".nan" || lower == ".inf" || lower == "+.inf" || lower == "-.inf") {
      return Fail(node, absl::StrCat("\"", text, "\" has no JSON spelling; quote it"));
    }
    if (LooksLikeFloat(text)) {
      double d;
      if (absl::SimpleAtod(text, &d) && std::isfinite(d)) return Spelled(Value::Float(d), text);
      return Fail(node, absl::StrCat("\"", text, "\" is out of range; quote it"));
    }
    return Value::String(text);
  }

  static Value Spelled(Value v, const std::string& text) {
    v.text = text;
    return v;
  }

  // A YAML stream is Unicode. yaml-cpp passes other bytes through; the
  // spec's decoder refuses them, and so does this one: canonical JSON
  // could only replace them, and the JSON would then not decode to itself.
  static absl::Status NotUtf8(const YAML::Node& node) {
    return Fail(node, "the scalar is not valid UTF-8");
  }

  absl::Status BadTag(const YAML::Node& node) {
    return Fail(node, absl::StrCat("unsupported YAML tag \"", node.Tag(), "\""));
  }

  static absl::Status Fail(const YAML::Node& node, absl::string_view message) {
    const YAML::Mark mark = node.Mark();
    if (mark.is_null()) return absl::InvalidArgumentError(message);
    return absl::InvalidArgumentError(
        absl::StrCat("line ", mark.line + 1, " column ", mark.column + 1, ": ", message));
  }

  size_t nodes_ = 0;
};

// DocumentStarts records where each document of a stream starts and
// ignores the rest of the events.
class DocumentStarts : public YAML::EventHandler {
 public:
  const std::vector<YAML::Mark>& marks() const { return marks_; }

  void OnDocumentStart(const YAML::Mark& mark) override { marks_.push_back(mark); }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}

 private:
  std::vector<YAML::Mark> marks_;
};

// AppendJsonString writes a JSON string, escaping as Go's encoder does.
void AppendJsonString(absl::string_view s, std::string* out) {
  out->push_back('"');
  size_t i = 0;
  while (i < s.size()) {
    unsigned char c = s[i];
    if (c < 0x80) {
      switch (c) {
        case '"':
          *out += "\\\"";
          break;
        case '\\':
          *out += "\\\\";
          break;
        case '\n':
          *out += "\\n";
          break;
        case '\r':
          *out += "\\r";
          break;
        case '\t':
          *out += "\\t";
          break;
        case '\b':
          *out += "\\b";
          break;
        case '\f':
          *out += "\\f";
          break;
        case '<':
        case '>':
        case '&':
          *out += absl::StrFormat("\\u%04x", c);
          break;
        default:
          if (c < 0x20) {
            *out += absl::StrFormat("\\u%04x", c);
          } else {
            out->push_back(static_cast<char>(c));
          }
      }
      ++i;
      continue;
    }
    // Decode one UTF-8 sequence; anything malformed becomes U+FFFD.
    uint32_t cp = 0;
    size_t len = Utf8Length(s, i, &cp);
    if (len == 0) {
      *out += "\\ufffd";
      ++i;
      continue;
    }
    if (cp == 0x2028 || cp == 0x2029) {
      *out += absl::StrFormat("\\u%04x", cp);
    } else {
      out->append(s.data() + i, len);
    }
    i += len;
  }
  out->push_back('"');
}

// AppendGoFloat writes a float as Go's encoding/json does: shortest
// round-trip digits, exponent form only outside [1e-6, 1e21).
void AppendGoFloat(double d, std::string* out) {
  // Negative zero is written 0, where Go writes -0: "-0" decodes back as
  // the integer 0, whose JSON is "0", and canonical JSON has to be a fixed
  // point of decoding (it is the key configs are compared by).
  if (d == 0) d = 0.0;
  char buf[64];
  double a = std::fabs(d);
  bool exp = a != 0 && (a < 1e-6 || a >= 1e21);
  auto res = std::to_chars(buf, buf + sizeof(buf), d,
                           exp ? std::chars_format::scientific : std::chars_format::fixed);
  std::string s(buf, res.ptr);
  if (exp) {
    // Go writes e-7, not e-07.
    size_t n = s.size();
    if (n >= 4 && s[n - 4] == 'e' && s[n - 3] == '-' && s[n - 2] == '0') s.erase(n - 2, 1);
  }
  *out += s;
}

void AppendJson(const Value& v, std::string* out) {
  switch (v.kind) {
    case Value::Kind::kNull:
      *out += "null";
      return;
    case Value::Kind::kBool:
      *out += v.bool_value ? "true" : "false";
      return;
    case Value::Kind::kInt:
      absl::StrAppend(out, v.int_value);
      return;
    case Value::Kind::kFloat:
      AppendGoFloat(v.float_value, out);
      return;
    case Value::Kind::kString:
      AppendJsonString(v.text, out);
      return;
    case Value::Kind::kList:
      out->push_back('[');
      for (size_t i = 0; i < v.items.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJson(v.items[i], out);
      }
      out->push_back(']');
      return;
    case Value::Kind::kMap: {
      std::vector<const std::pair<std::string, Value>*> sorted;
      for (const auto& f : v.fields) sorted.push_back(&f);
      std::sort(sorted.begin(), sorted.end(),
                [](const auto* a, const auto* b) { return a->first < b->first; });
      out->push_back('{');
      for (size_t i = 0; i < sorted.size(); ++i) {
        if (i > 0) out->push_back(',');
        AppendJsonString(sorted[i]->first, out);
        out->push_back(':');
        AppendJson(sorted[i]->second, out);
      }
      out->push_back('}');
      return;
    }
  }
}

}  // namespace

Value Value::Bool(bool b) {
  Value v;
  v.kind = Kind::kBool;
  v.bool_value = b;
  v.text = b ? "true" : "false";
  return v;
}

Value Value::Int(int64_t i) {
  Value v;
  v.kind = Kind::kInt;
  v.int_value = i;
  v.text = absl::StrCat(i);
  return v;
}

Value Value::Float(double d) {
  Value v;
  v.kind = Kind::kFloat;
  v.float_value = d;
  AppendGoFloat(d, &v.text);
  return v;
}

Value Value::String(std::string s) {
  Value v;
  v.kind = Kind::kString;
  v.text = std::move(s);
  return v;
}

Value Value::List(std::vector<Value> items) {
  Value v;
  v.kind = Kind::kList;
  v.items = std::move(items);
  return v;
}

Value Value::Map() {
  Value v;
  v.kind = Kind::kMap;
  return v;
}

const Value* Value::Find(absl::string_view key) const {
  for (const auto& [k, v] : fields) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value* Value::Find(absl::string_view key) {
  return const_cast<Value*>(static_cast<const Value*>(this)->Find(key));
}

void Value::Set(absl::string_view key, Value v) {
  if (Value* existing = Find(key)) {
    *existing = std::move(v);
    return;
  }
  fields.emplace_back(std::string(key), std::move(v));
}

void Value::Erase(absl::string_view key) {
  fields.erase(
      std::remove_if(fields.begin(), fields.end(), [&](const auto& f) { return f.first == key; }),
      fields.end());
}

const char* KindName(Value::Kind kind) {
  switch (kind) {
    case Value::Kind::kNull:
      return "null";
    case Value::Kind::kBool:
      return "a bool";
    case Value::Kind::kInt:
      return "an integer";
    case Value::Kind::kFloat:
      return "a number";
    case Value::Kind::kString:
      return "a string";
    case Value::Kind::kList:
      return "a list";
    case Value::Kind::kMap:
      return "a mapping";
  }
  return "?";
}

bool Equal(const Value& a, const Value& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::kNull:
      return true;
    case Value::Kind::kBool:
      return a.bool_value == b.bool_value;
    case Value::Kind::kInt:
      return a.int_value == b.int_value;
    case Value::Kind::kFloat:
      return a.float_value == b.float_value;
    case Value::Kind::kString:
      return a.text == b.text;
    case Value::Kind::kList:
      if (a.items.size() != b.items.size()) return false;
      for (size_t i = 0; i < a.items.size(); ++i) {
        if (!Equal(a.items[i], b.items[i])) return false;
      }
      return true;
    case Value::Kind::kMap:
      if (a.fields.size() != b.fields.size()) return false;
      for (const auto& [k, v] : a.fields) {
        const Value* other = b.Find(k);
        if (other == nullptr || !Equal(v, *other)) return false;
      }
      return true;
  }
  return false;
}

absl::StatusOr<Value> DecodeDocument(absl::string_view text) {
  YAML::Node doc;
  try {
    // Documents are counted first, two at most: YAML::LoadAll never
    // returns on a flow collection followed by a comma ("[],"), where
    // yaml-cpp 0.7 yields empty documents forever without consuming it.
    std::istringstream in{std::string(text)};
    YAML::Parser parser(in);
    DocumentStarts starts;
    while (starts.marks().size() < 2 && parser.HandleNextDocument(starts)) {
    }
    if (starts.marks().empty()) return absl::InvalidArgumentError("the document is empty");
    if (starts.marks().size() > 1) {
      const YAML::Mark& second = starts.marks()[1];
      return absl::InvalidArgumentError(
          absl::StrCat("line ", second.line + 1, " column ", second.column + 1,
                       ": expected one YAML document, found another"));
    }
    doc = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", e.mark.line + 1, " column ", e.mark.column + 1, ": ", e.msg));
  }
  try {
    return Decoder().Convert(doc, 0);
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("line ", e.mark.line + 1, ": ", e.msg));
  }
}

std::string ToCanonicalJson(const Value& v) {
  std::string out;
  AppendJson(v, &out);
  return out;
}

}  // namespace airlock::kit
