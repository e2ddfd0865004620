#include "common/kit/internal/fields.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/kit/references.h"

namespace airlock::kit::internal {

bool IsLiteral(absl::string_view s) { return !HasArgRef(s) && !HasEnvOpener(s); }

Fields::Fields(const Value& v, FieldPath path, Problems* problems, bool deferred_ok)
    : path_(std::move(path)), problems_(problems), deferred_ok_(deferred_ok) {
  if (v.is_map()) {
    map_ = &v;
  } else {
    problems_->Error(path_, absl::StrCat("must be a mapping, got ", KindName(v.kind)));
  }
}

bool Fields::Has(absl::string_view key) const { return map_ && map_->Find(key) != nullptr; }

const Value* Fields::Take(absl::string_view key) {
  if (!map_) return nullptr;
  taken_.insert(std::string(key));
  return map_->Find(key);
}

bool Fields::Null(absl::string_view key, const Value& v) {
  if (!v.is_null()) return false;
  problems_->Error(At(key), "is null; omit the field or declare a value");
  return true;
}

bool Fields::Deferred(const Value& v) {
  if (deferred_ok_ && v.is_string() && !IsLiteral(v.text)) {
    deferred_ = true;
    return true;
  }
  return false;
}

bool Fields::String(absl::string_view key, std::string* out) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v)) return false;
  return ScalarText(*v, At(key), problems_, out);
}

bool Fields::StrictString(absl::string_view key, std::string* out) {
  const Value* v = Take(key);
  if (v == nullptr) return false;
  if (!v->is_string()) {
    problems_->Error(At(key), absl::StrCat("must be a string, got ", KindName(v->kind)));
    return false;
  }
  *out = v->text;
  return true;
}

bool Fields::Bool(absl::string_view key, bool* out) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v) || Deferred(*v)) return false;
  if (v->kind != Value::Kind::kBool) {
    problems_->Error(At(key), absl::StrCat("must be true or false, got ", KindName(v->kind)));
    return false;
  }
  *out = v->bool_value;
  return true;
}

bool Fields::Int(absl::string_view key, int64_t* out) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v) || Deferred(*v)) return false;
  if (v->kind != Value::Kind::kInt) {
    problems_->Error(At(key), absl::StrCat("must be an integer, got ", KindName(v->kind)));
    return false;
  }
  *out = v->int_value;
  return true;
}

bool Fields::Number(absl::string_view key, double* out) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v) || Deferred(*v)) return false;
  if (v->kind == Value::Kind::kInt) {
    *out = static_cast<double>(v->int_value);
    return true;
  }
  if (v->kind == Value::Kind::kFloat) {
    *out = v->float_value;
    return true;
  }
  problems_->Error(At(key), absl::StrCat("must be a number, got ", KindName(v->kind)));
  return false;
}

bool Fields::StringList(absl::string_view key, std::vector<std::string>* out) {
  const Value* v = List(key);
  if (v == nullptr) return false;
  bool ok = true;
  out->clear();
  for (size_t i = 0; i < v->items.size(); ++i) {
    std::string s;
    if (ScalarText(v->items[i], At(key).Index(i), problems_, &s)) {
      out->push_back(std::move(s));
    } else {
      ok = false;
    }
  }
  return ok;
}

const Value* Fields::Map(absl::string_view key) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v)) return nullptr;
  if (!v->is_map()) {
    problems_->Error(At(key), absl::StrCat("must be a mapping, got ", KindName(v->kind)));
    return nullptr;
  }
  return v;
}

const Value* Fields::List(absl::string_view key) {
  const Value* v = Take(key);
  if (v == nullptr || Null(key, *v)) return nullptr;
  if (!v->is_list()) {
    problems_->Error(At(key), absl::StrCat("must be a list, got ", KindName(v->kind)));
    return nullptr;
  }
  return v;
}

void Fields::Done() {
  if (!map_) return;
  for (const auto& [key, value] : map_->fields) {
    if (taken_.count(key) == 0) problems_->Error(At(key), "unknown field");
  }
}

bool ScalarText(const Value& v, const FieldPath& path, Problems* problems, std::string* out) {
  if (v.is_null()) {
    problems->Error(path, "is null; omit the field or declare a value");
    return false;
  }
  if (!v.is_scalar()) {
    problems->Error(path, absl::StrCat("must be a string, got ", KindName(v.kind)));
    return false;
  }
  *out = v.text;
  return true;
}

std::string CleanPath(absl::string_view p) {
  if (p.empty()) return ".";
  bool rooted = p[0] == '/';
  std::vector<std::string> out;
  for (absl::string_view part : absl::StrSplit(p, '/')) {
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      if (!out.empty() && out.back() != "..") {
        out.pop_back();
      } else if (!rooted) {
        out.push_back("..");
      }
      continue;
    }
    out.emplace_back(part);
  }
  std::string joined = absl::StrJoin(out, "/");
  if (rooted) return absl::StrCat("/", joined);
  return joined.empty() ? "." : joined;
}

}  // namespace airlock::kit::internal
