// The descriptor as a document: the value tree every later step works on.
// Authors write YAML and the OCI annotation carries compact JSON; both read
// through one YAML 1.2 decoder (JSON is YAML) into `Value`, and `Value`
// writes back out as the canonical compact JSON the spec publishes.
#ifndef AIRLOCK_COMMON_KIT_DOCUMENT_H_
#define AIRLOCK_COMMON_KIT_DOCUMENT_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace airlock::kit {

// Value is one decoded YAML/JSON node. Scalars keep their source spelling
// in `text` as well as their typed value, because the spec reads some
// scalars as text whatever they resolve to (an unquoted `version: 1.10`
// is the string "1.10", not the float 1.1).
struct Value {
  enum class Kind { kNull, kBool, kInt, kFloat, kString, kList, kMap };

  Kind kind = Kind::kNull;
  // kString: the string. kBool/kInt/kFloat: the source spelling.
  std::string text;
  bool bool_value = false;
  int64_t int_value = 0;
  double float_value = 0;
  std::vector<Value> items;                           // kList
  std::vector<std::pair<std::string, Value>> fields;  // kMap, document order, unique keys

  static Value Null() { return Value(); }
  static Value Bool(bool b);
  static Value Int(int64_t i);
  static Value Float(double d);
  static Value String(std::string s);
  static Value List(std::vector<Value> items = {});
  static Value Map();

  bool is_null() const { return kind == Kind::kNull; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_list() const { return kind == Kind::kList; }
  bool is_map() const { return kind == Kind::kMap; }
  bool is_scalar() const { return !is_list() && !is_map() && !is_null(); }

  // Find returns the value under `key` of a map, or null if absent.
  const Value* Find(absl::string_view key) const;
  Value* Find(absl::string_view key);
  // Set replaces the value under `key` or appends it.
  void Set(absl::string_view key, Value v);
  // Erase removes `key` if present.
  void Erase(absl::string_view key);
};

// KindName names a kind for error messages ("a string", "a list", ...).
const char* KindName(Value::Kind kind);

// Equal compares two values as JSON would: map key order does not matter,
// scalars compare by type and value (not spelling).
bool Equal(const Value& a, const Value& b);

// DecodeDocument reads one YAML (or JSON) document. Plain scalars resolve
// by the YAML 1.2 core schema; quoted and block scalars are strings.
// Refused: duplicate mapping keys, non-scalar keys, tags other than the
// core ones, more than one document, NaN/Inf (no JSON spelling), and
// documents nesting deeper than 64 levels or expanding through aliases to
// more nodes than the 512 KiB budget could spell (the alias bomb and the
// self-referencing alias are both caught there). Errors carry line and column.
absl::StatusOr<Value> DecodeDocument(absl::string_view text);

// ToCanonicalJson writes `v` as Go's json.Marshal writes a decoded
// map[string]any: compact, keys sorted byte-wise, '<' '>' '&' U+2028 U+2029
// escaped, floats in Go's shortest form (negative zero as 0, so that the
// JSON decodes to a document with the same JSON), invalid UTF-8 replaced
// by U+FFFD.
// This is the published descriptor's encoding and the key for comparing
// configs.
std::string ToCanonicalJson(const Value& v);

}  // namespace airlock::kit

#endif  // AIRLOCK_COMMON_KIT_DOCUMENT_H_
