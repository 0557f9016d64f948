#include "jinja_value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

namespace tandem::tok::jinja {

Value* Object::find(std::string_view key) {
  for (auto& [k, v] : items)
    if (k == key) return &v;
  return nullptr;
}
const Value* Object::find(std::string_view key) const { return const_cast<Object*>(this)->find(key); }
void Object::set(const std::string& key, Value v) {
  if (Value* e = find(key))
    *e = std::move(v);
  else
    items.emplace_back(key, std::move(v));
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value::Value(bool b) : kind_(Kind::kBool), b_(b) {}
Value::Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
Value::Value(double f) : kind_(Kind::kFloat), f_(f) {}
Value::Value(std::string s) : kind_(Kind::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
Value Value::array(Array items) {
  Value v;
  v.kind_ = Kind::kArray;
  for (const auto& x : items) v.depth_ = std::max(v.depth_, x.depth_ + 1);
  if (items.empty()) v.depth_ = 1;
  v.a_ = std::make_shared<Array>(std::move(items));
  return v;
}
Value Value::object(Object o) {
  Value v;
  v.kind_ = Kind::kObject;
  v.depth_ = 1;
  for (const auto& [k, x] : o.items) v.depth_ = std::max(v.depth_, x.depth_ + 1);
  v.o_ = std::make_shared<Object>(std::move(o));
  return v;
}
Value Value::callable(Callable fn) {
  Value v;
  v.kind_ = Kind::kCallable;
  v.fn_ = std::make_shared<const Callable>(std::move(fn));
  return v;
}

Value Value::from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float:
      return Value(j.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return Value(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      for (const auto& e : j) a.push_back(from_json(e));
      return array(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Object o;
      for (auto it = j.begin(); it != j.end(); ++it) o.items.emplace_back(it.key(), from_json(it.value()));
      return object(std::move(o));
    }
    default:
      return Value();
  }
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0.0;
    case Kind::kString:
      return !s_->empty();
    case Kind::kArray:
      return !a_->empty();
    case Kind::kObject:
      return o_->is_namespace || !o_->items.empty();
    case Kind::kCallable:
      return true;
  }
  return false;
}

std::string format_float(double f) {
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof(buf), f);
  std::string s(buf, r.ptr);
  // Python repr switches to exponent form outside [1e-4, 1e16).
  double a = std::fabs(f);
  if (a != 0 && (a >= 1e16 || a < 1e-4)) {
    r = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::scientific);
    s.assign(buf, r.ptr);
    size_t e = s.find('e');
    std::string mant = s.substr(0, e), exp = s.substr(e + 1);
    char sign = exp[0] == '-' ? '-' : '+';
    size_t d = exp.find_first_not_of("+-0");
    std::string digits = d == std::string::npos ? "0" : exp.substr(d);
    if (digits.size() < 2) digits = "0" + digits;
    return mant + "e" + sign + digits;
  }
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return s;
}

namespace {

std::string py_quote(const std::string& s) {
  char q = s.find('\'') != std::string::npos && s.find('"') == std::string::npos ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c == q) out.push_back('\\');
        out.push_back(c);
    }
  }
  out.push_back(q);
  return out;
}

void json_string(std::string& out, const std::string& s) {
  out.push_back('"');
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      default:
        if (u < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", u);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

}  // namespace

std::string Value::repr() const { return repr_at(0); }
std::string Value::str() const { return str_at(0); }

std::string Value::repr_at(int depth) const {
  if (kind_ == Kind::kString) return py_quote(*s_);
  return str_at(depth);
}

// Containers nested deeper than kMaxPrintDepth (or cyclic, through a mutated
// namespace) print as "[...]"/"{...}" instead of recursing without bound.
std::string Value::str_at(int depth) const {
  if (depth > kMaxPrintDepth && (kind_ == Kind::kArray || kind_ == Kind::kObject))
    return kind_ == Kind::kArray ? "[...]" : "{...}";
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return b_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return format_float(f_);
    case Kind::kString:
      return *s_;
    case Kind::kArray: {
      std::string out = "[";
      for (size_t k = 0; k < a_->size(); ++k) out += (k ? ", " : "") + (*a_)[k].repr_at(depth + 1);
      return out + "]";
    }
    case Kind::kObject: {
      std::string out = "{";
      for (size_t k = 0; k < o_->items.size(); ++k)
        out += (k ? ", " : "") + py_quote(o_->items[k].first) + ": " + o_->items[k].second.repr_at(depth + 1);
      return out + "}";
    }
    case Kind::kCallable:
      return "<function>";
  }
  return "";
}

void Value::json_into(std::string& out, int indent, int depth) const {
  if (depth > kMaxPrintDepth && (kind_ == Kind::kArray || kind_ == Kind::kObject)) {
    out += "null";  // see str_at()
    return;
  }
  auto newline = [&](int d) {
    if (indent < 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent) * d, ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      out += "null";
      break;
    case Kind::kBool:
      out += b_ ? "true" : "false";
      break;
    case Kind::kInt:
      out += std::to_string(i_);
      break;
    case Kind::kFloat:
      out += format_float(f_);
      break;
    case Kind::kString:
      json_string(out, *s_);
      break;
    case Kind::kArray:
      if (a_->empty()) {
        out += "[]";
        break;
      }
      out.push_back('[');
      for (size_t k = 0; k < a_->size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        (*a_)[k].json_into(out, indent, depth + 1);
      }
      newline(depth);
      out.push_back(']');
      break;
    case Kind::kObject:
      if (o_->items.empty()) {
        out += "{}";
        break;
      }
      out.push_back('{');
      for (size_t k = 0; k < o_->items.size(); ++k) {
        if (k) out += item_sep;
        newline(depth + 1);
        json_string(out, o_->items[k].first);
        out += ": ";
        o_->items[k].second.json_into(out, indent, depth + 1);
      }
      newline(depth);
      out.push_back('}');
      break;
    case Kind::kCallable:
      out += "null";
      break;
  }
}

std::string Value::to_json(int indent) const {
  std::string out;
  json_into(out, indent, 0);
  return out;
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "bool";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kArray:
      return "list";
    case Kind::kObject:
      return "dict";
    case Kind::kCallable:
      return "callable";
  }
  return "?";
}

bool Value::equal_at(const Value& a, const Value& b, int depth) {
  if (depth > kMaxPrintDepth) return a.a_ == b.a_ && a.o_ == b.o_;  // deep/cyclic: identity
  if (a.is_number() || a.is_bool()) {
    if (!(b.is_number() || b.is_bool())) return false;
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.kind_ != b.kind_) return false;
  switch (a.kind_) {
    case Value::Kind::kUndefined:
    case Value::Kind::kNone:
      return true;
    case Value::Kind::kString:
      return *a.s_ == *b.s_;
    case Value::Kind::kArray:
      if (a.a_->size() != b.a_->size()) return false;
      for (size_t k = 0; k < a.a_->size(); ++k)
        if (!equal_at((*a.a_)[k], (*b.a_)[k], depth + 1)) return false;
      return true;
    case Value::Kind::kObject:
      if (a.o_->items.size() != b.o_->items.size()) return false;
      for (const auto& [k, v] : a.o_->items) {
        const Value* o = b.o_->find(k);
        if (!o || !equal_at(v, *o, depth + 1)) return false;
      }
      return true;
    default:
      return a.fn_ == b.fn_;
  }
}

bool operator==(const Value& a, const Value& b) { return Value::equal_at(a, b, 0); }

Expected<bool> less_than(const Value& a, const Value& b) {
  if ((a.is_number() || a.is_bool()) && (b.is_number() || b.is_bool())) {
    if (a.is_float() || b.is_float()) return a.as_float() < b.as_float();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.as_string() < b.as_string();
  if (a.is_array() && b.is_array()) {
    const auto &x = a.as_array(), &y = b.as_array();
    for (size_t k = 0; k < x.size() && k < y.size(); ++k) {
      if (x[k] == y[k]) continue;
      return less_than(x[k], y[k]);
    }
    return x.size() < y.size();
  }
  return invalid_argument(std::string("'<' not supported between ") + a.type_name() + " and " +
                          b.type_name());
}

Value Args::get(size_t i, std::string_view name) const {
  if (i < positional.size()) return positional[i];
  for (const auto& [k, v] : keyword)
    if (k == name) return v;
  return Value();
}

}  // namespace tandem::tok::jinja
