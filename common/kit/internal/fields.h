// Strict field-by-field reading of one mapping of a descriptor, shared by
// the top-level decoder and the capability config decoders. Every key a
// decoder does not take is reported as unknown: the spec decodes with
// KnownFields(true) everywhere except inside unknown capability types.
#ifndef AIRLOCK_COMMON_KIT_INTERNAL_FIELDS_H_
#define AIRLOCK_COMMON_KIT_INTERNAL_FIELDS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/kit/document.h"
#include "common/kit/problems.h"

namespace airlock::kit::internal {

// IsLowerAlnum: [a-z0-9], the characters of type and service names.
inline bool IsLowerAlnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'); }

// IsLiteral reports a string without any `${{ kit.args` or `${{ kit.env`
// reference: only literal values get value checks before expansion.
bool IsLiteral(absl::string_view s);

// Fields reads one mapping. Getters return true when the key is present
// and well-typed; an absent key returns false silently, a wrong type
// returns false and records a problem at the key's path.
//
// When `deferred_ok` is set (a capability config that still holds
// references), a string carrying a reference is accepted where a bool or
// number is expected; the getter returns false and `deferred()` turns true,
// and the typed value waits for the effective descriptor.
class Fields {
 public:
  Fields(const Value& v, FieldPath path, Problems* problems, bool deferred_ok = false);

  // is_map is false when the value was not a mapping (already reported).
  bool is_map() const { return map_ != nullptr; }
  const FieldPath& path() const { return path_; }
  FieldPath At(absl::string_view key) const { return path_.Key(key); }
  Problems* problems() const { return problems_; }
  bool deferred() const { return deferred_; }

  bool Has(absl::string_view key) const;
  // Take marks `key` as known and returns its value, or null when absent.
  const Value* Take(absl::string_view key);

  // String accepts any scalar by its source spelling, as the reference
  // decoder does for string fields; null is refused.
  bool String(absl::string_view key, std::string* out);
  // StrictString accepts only a YAML string (capability `name`).
  bool StrictString(absl::string_view key, std::string* out);
  bool Bool(absl::string_view key, bool* out);
  bool Int(absl::string_view key, int64_t* out);
  bool Number(absl::string_view key, double* out);
  // StringList reads a list of scalars (by spelling); null and nested
  // collections are refused per item.
  bool StringList(absl::string_view key, std::vector<std::string>* out);
  // Map returns a present mapping value, or null (absent, or reported).
  const Value* Map(absl::string_view key);
  // List returns a present list value, or null (absent, or reported).
  const Value* List(absl::string_view key);

  // Done reports every key that was never taken, as "unknown field".
  void Done();

 private:
  bool Null(absl::string_view key, const Value& v);
  bool Deferred(const Value& v);

  const Value* map_ = nullptr;
  FieldPath path_;
  Problems* problems_;
  bool deferred_ok_;
  bool deferred_ = false;
  std::set<std::string> taken_;
};

// ScalarText reads a list item as a string the way Fields::String does;
// false (with a problem) for null or a collection.
bool ScalarText(const Value& v, const FieldPath& path, Problems* problems, std::string* out);

// CleanPath is Go's path.Clean: the shortest equivalent slash path.
std::string CleanPath(absl::string_view p);

}  // namespace airlock::kit::internal

#endif  // AIRLOCK_COMMON_KIT_INTERNAL_FIELDS_H_
