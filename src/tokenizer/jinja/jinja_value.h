// jinja::Value: the dynamic values of the chat-template interpreter
// (undefined, none, bool, int, float, string, list, dict, callable), with
// Python-like semantics: truthiness, equality, ordering, str() and tojson.
// Lists and dicts are shared by reference like Python objects; dicts keep
// insertion order (tojson output follows it). Not thread-safe: one render
// owns its values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"

namespace tandem::tok::jinja {

class Value;
using Array = std::vector<Value>;
struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  Value* find(std::string_view key);
  const Value* find(std::string_view key) const;
  void set(const std::string& key, Value v);
};
struct Args;
using Callable = std::function<Expected<Value>(Args&)>;

class Value {
 public:
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kCallable };

  Value() = default;  // undefined
  static Value none();
  Value(bool b);                                    // NOLINT(google-explicit-constructor)
  Value(int64_t i);                                 // NOLINT(google-explicit-constructor)
  Value(int i) : Value(static_cast<int64_t>(i)) {}  // NOLINT(google-explicit-constructor)
  Value(double f);                                  // NOLINT(google-explicit-constructor)
  Value(std::string s);                             // NOLINT(google-explicit-constructor)
  Value(const char* s) : Value(std::string(s)) {}   // NOLINT(google-explicit-constructor)
  static Value array(Array items = {});
  static Value object(Object o = {});
  static Value callable(Callable fn);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_bool() const { return kind_ == Kind::kBool; }
  bool is_int() const { return kind_ == Kind::kInt; }
  bool is_float() const { return kind_ == Kind::kFloat; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_array() const { return kind_ == Kind::kArray; }
  bool is_object() const { return kind_ == Kind::kObject; }
  bool is_callable() const { return kind_ == Kind::kCallable; }

  bool as_bool() const { return b_; }
  int64_t as_int() const {
    return kind_ == Kind::kFloat ? static_cast<int64_t>(f_) : (kind_ == Kind::kBool ? b_ : i_);
  }
  double as_float() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(as_int()); }
  const std::string& as_string() const { return *s_; }
  Array& as_array() const { return *a_; }
  Object& as_object() const { return *o_; }
  const Callable& as_callable() const { return *fn_; }

  bool truthy() const;
  // Python str(): None, True, 1.5, ['a', 1], {'k': 'v'}; undefined is "".
  std::string str() const;
  // Python repr() (strings quoted).
  std::string repr() const;
  // json.dumps(ensure_ascii=False); indent < 0 means single-line.
  std::string to_json(int indent = -1) const;
  const char* type_name() const;

  friend bool operator==(const Value& a, const Value& b);
  // Containers nested inside this one, +1 (0 for scalars). Exact for lists and
  // dicts (immutable); a namespace mutated after being stored is not re-counted.
  uint32_t depth() const { return depth_; }
  // Python ordering; returns an error for unorderable types.
  friend Expected<bool> less_than(const Value& a, const Value& b);

 private:
  static constexpr int kMaxPrintDepth = 128;
  static bool equal_at(const Value& a, const Value& b, int depth);
  std::string str_at(int depth) const;
  std::string repr_at(int depth) const;
  void json_into(std::string& out, int indent, int depth) const;
  Kind kind_ = Kind::kUndefined;
  uint32_t depth_ = 0;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;
  std::shared_ptr<Array> a_;
  std::shared_ptr<Object> o_;
  std::shared_ptr<const Callable> fn_;
};

// Call arguments: positional then keyword.
struct Args {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional index `i` or keyword `name`, else undefined.
  Value get(size_t i, std::string_view name) const;
};

// Python float repr (shortest round-trip, always with '.0' or exponent).
std::string format_float(double f);

}  // namespace tandem::tok::jinja
