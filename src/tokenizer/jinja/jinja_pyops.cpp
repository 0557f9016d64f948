// Python str/list semantics for the Jinja builtins (see jinja_pyops.h).
#include "jinja_pyops.h"

#include <algorithm>

#include "../normalizers.h"
#include "../unicode.h"

namespace tandem::tok::jinja {

bool py_space(char32_t c) { return is_unicode_whitespace(c) || (c >= 0x1C && c <= 0x1F); }

std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < s.size()) {
    size_t start = i;
    next_code_point(s, i);
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string strip(const std::string& s, const Value& chars, bool left, bool right) {
  std::vector<std::string> cps = code_points(s);
  std::vector<std::string> set;
  bool whitespace = chars.is_undefined() || chars.is_none();
  if (!whitespace) set = code_points(chars.str());
  auto strippable = [&](const std::string& cp) {
    if (whitespace) {
      size_t i = 0;
      return py_space(next_code_point(cp, i));
    }
    return std::find(set.begin(), set.end(), cp) != set.end();
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strippable(cps[b])) ++b;
  if (right)
    while (e > b && strippable(cps[e - 1])) --e;
  std::string out;
  for (size_t k = b; k < e; ++k) out += cps[k];
  return out;
}

std::string to_upper(const std::string& s) { return unicode_upper(s); }
std::string to_lower(const std::string& s) { return unicode_lower(s); }
bool is_alpha(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
std::string title(const std::string& s) {
  std::string out = s;
  bool prev_alpha = false;
  for (char& c : out) {
    if (is_alpha(c)) {
      c = prev_alpha ? to_lower(std::string(1, c))[0] : to_upper(std::string(1, c))[0];
      prev_alpha = true;
    } else {
      prev_alpha = (static_cast<unsigned char>(c) >= 0x80) && prev_alpha;
    }
  }
  return out;
}

Value split(const std::string& s, const Value& sep, int64_t maxsplit) {
  Array out;
  if (sep.is_undefined() || sep.is_none()) {  // runs of Unicode whitespace
    auto space_at = [&](size_t i, size_t* next) {
      *next = i;
      return py_space(next_code_point(s, *next));
    };
    size_t i = 0, n;
    while (i < s.size()) {
      while (i < s.size() && space_at(i, &n)) i = n;
      if (i >= s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) == maxsplit) {
        out.push_back(Value(strip(s.substr(i), Value(), false, true)));
        break;
      }
      size_t j = i;
      while (j < s.size() && !space_at(j, &n)) j = n;
      out.push_back(Value(s.substr(i, j - i)));
      i = j;
    }
    return Value::array(std::move(out));
  }
  const std::string d = sep.str();
  size_t pos = 0, hit;
  while ((maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) && !d.empty() &&
         (hit = s.find(d, pos)) != std::string::npos) {
    out.push_back(Value(s.substr(pos, hit - pos)));
    pos = hit + d.size();
  }
  out.push_back(Value(s.substr(pos)));
  return Value::array(std::move(out));
}

std::string replace(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t pos = 0, hit;
  int64_t n = 0;
  while ((count < 0 || n < count) && (hit = s.find(from, pos)) != std::string::npos) {
    out.append(s, pos, hit - pos);
    out += to;
    pos = hit + from.size();
    ++n;
  }
  out.append(s, pos);
  return out;
}

Expected<Value> to_list(const Value& v) {
  if (v.is_array()) return Value::array(v.as_array());
  if (v.is_string()) {
    Array a;
    for (auto& cp : code_points(v.as_string())) a.push_back(Value(cp));
    return Value::array(std::move(a));
  }
  if (v.is_object()) {
    Array a;
    for (const auto& [k, x] : v.as_object().items) a.push_back(Value(k));
    return Value::array(std::move(a));
  }
  if (v.is_undefined() || v.is_none()) return Value::array();
  return invalid_argument(std::string("'") + v.type_name() + "' is not iterable");
}

Value items_of(const Value& v) {
  Array a;
  if (v.is_object())
    for (const auto& [k, x] : v.as_object().items) a.push_back(Value::array({Value(k), x}));
  return Value::array(std::move(a));
}

// Attribute path "a.b" lookup used by map/selectattr/sort/join.
Expected<Value> percent_format(const std::string& fmt, const Value& args) {
  Array values = args.is_array() ? args.as_array() : Array{args};
  size_t next = 0;
  std::string out;
  for (size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out.push_back(fmt[i]);
      continue;
    }
    if (++i >= fmt.size()) return invalid_argument("incomplete format in '%' string formatting");
    int precision = -1;
    if (fmt[i] == '.') {
      precision = 0;
      while (++i < fmt.size() && fmt[i] >= '0' && fmt[i] <= '9')
        precision = std::min(precision * 10 + (fmt[i] - '0'), 1000);  // the output buffer holds 64 anyway
      if (i >= fmt.size()) return invalid_argument("incomplete format in '%' string formatting");
    }
    char conv = fmt[i];
    if (conv == '%') {
      out.push_back('%');
      continue;
    }
    if (next >= values.size()) return invalid_argument("not enough arguments for format string");
    const Value& v = values[next++];
    switch (conv) {
      case 's':
        out += v.str();
        break;
      case 'r':
        out += v.repr();
        break;
      case 'd':
      case 'i':
        if (!v.is_number() && !v.is_bool()) return invalid_argument("%d format: a number is required");
        out += std::to_string(v.as_int());
        break;
      case 'f': {
        if (!v.is_number() && !v.is_bool()) return invalid_argument("%f format: a number is required");
        char buf[64];
        std::snprintf(buf, sizeof(buf), "%.*f", precision < 0 ? 6 : precision, v.as_float());
        out += buf;
        break;
      }
      default:
        return unimplemented(std::string("unsupported format character '") + conv + "'");
    }
  }
  if (next < values.size()) return invalid_argument("not all arguments converted during string formatting");
  return Value(std::move(out));
}

Expected<Value> brace_format(const std::string& fmt, const Args& args) {
  std::string out;
  size_t auto_index = 0;
  for (size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if ((c == '{' || c == '}') && i + 1 < fmt.size() && fmt[i + 1] == c) {
      out.push_back(c);
      ++i;
      continue;
    }
    if (c != '{') {
      out.push_back(c);
      continue;
    }
    size_t close = fmt.find('}', i);
    if (close == std::string::npos) return invalid_argument("single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    if (field.find_first_of(":!") != std::string::npos)
      return unimplemented("format spec '{" + field + "}' is not supported");
    Value v;
    if (field.empty()) {
      v = args.get(auto_index++, "");
    } else if (field.find_first_not_of("0123456789") == std::string::npos) {
      v = args.get(static_cast<size_t>(std::stoul(field)), "");
    } else {
      v = args.get(static_cast<size_t>(-1), field);
    }
    if (v.is_undefined()) return invalid_argument("format string field '{" + field + "}' has no argument");
    out += v.str();
    i = close;
  }
  return Value(std::move(out));
}

}  // namespace tandem::tok::jinja
