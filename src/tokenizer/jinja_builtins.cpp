// Filters, tests, methods and global functions of the chat-template
// interpreter: the subset real tokenizer_config.json templates use, with
// Python/Jinja2 semantics.
#include <algorithm>
#include <cmath>

#include "jinja_eval.h"
#include "normalizers.h"
#include "unicode.h"

namespace tandem::tok::jinja {

namespace {

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
Value attribute_path(const Value& v, const std::string& path) {
  Value cur = v;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric =
        !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    cur = get_item(cur,
                   numeric && cur.is_array() ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) break;
    pos = dot + 1;
  }
  return cur;
}

Args tail_args(const Args& a, size_t from) {
  Args out;
  for (size_t k = from; k < a.positional.size(); ++k) out.positional.push_back(a.positional[k]);
  out.keyword = a.keyword;
  return out;
}

Expected<Value> select_items(const Value& input, const Args& args, bool by_attr, bool keep) {
  TANDEM_ASSIGN_OR_RETURN(Value list, to_list(input));
  Array out;
  for (const auto& item : list.as_array()) {
    Value subject = item;
    size_t test_at = 0;
    if (by_attr) {
      subject = attribute_path(item, args.get(0, "attribute").str());
      test_at = 1;
    }
    bool pass;
    if (args.positional.size() <= test_at) {
      pass = subject.truthy();
    } else {
      TANDEM_ASSIGN_OR_RETURN(
          pass, apply_test(args.positional[test_at].str(), subject, tail_args(args, test_at + 1)));
    }
    if (pass == keep) out.push_back(item);
  }
  return Value::array(std::move(out));
}

Expected<Value> sorted(const Value& input, const Args& args) {
  TANDEM_ASSIGN_OR_RETURN(Value list, to_list(input));
  Array a = list.as_array();
  bool reverse = args.get(0, "reverse").truthy();
  bool case_sensitive = args.get(1, "case_sensitive").truthy();
  Value attr = args.get(2, "attribute");
  auto key = [&](const Value& v) {
    Value k = attr.is_undefined() ? v : attribute_path(v, attr.str());
    if (!case_sensitive && k.is_string()) return Value(to_lower(k.as_string()));
    return k;
  };
  Status err;
  std::stable_sort(a.begin(), a.end(), [&](const Value& x, const Value& y) {
    auto lt = reverse ? less_than(key(y), key(x)) : less_than(key(x), key(y));
    if (!lt.ok()) {
      err = lt.status();
      return false;
    }
    return *lt;
  });
  if (!err.ok()) return err;
  return Value::array(std::move(a));
}

std::string indent(const std::string& s, const Value& width, bool first, bool blank) {
  std::string pad = width.is_string()
                        ? width.as_string()
                        : std::string(static_cast<size_t>(width.is_undefined() ? 4 : width.as_int()), ' ');
  std::string out;
  size_t pos = 0;
  bool at_first = true;
  while (pos <= s.size()) {
    size_t nl = s.find('\n', pos);
    std::string line = s.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    bool add = at_first ? first : (blank || !line.empty());
    if (add) out += pad;
    out += line;
    if (nl == std::string::npos) break;
    out += '\n';
    pos = nl + 1;
    at_first = false;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&#34;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

int64_t length_of(const Value& v) {
  if (v.is_string()) return static_cast<int64_t>(code_points(v.as_string()).size());
  if (v.is_array()) return static_cast<int64_t>(v.as_array().size());
  if (v.is_object()) return static_cast<int64_t>(v.as_object().items.size());
  return 0;
}

}  // namespace

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_object() && key.is_string()) {
    const Value* v = obj.as_object().find(key.as_string());
    return v ? *v : Value();
  }
  if ((obj.is_array() || obj.is_string()) && key.is_int()) {
    if (obj.is_array()) {
      int64_t n = static_cast<int64_t>(obj.as_array().size()), k = key.as_int();
      if (k < 0) k += n;
      return k >= 0 && k < n ? obj.as_array()[k] : Value();
    }
    auto cps = code_points(obj.as_string());
    int64_t n = static_cast<int64_t>(cps.size()), k = key.as_int();
    if (k < 0) k += n;
    return k >= 0 && k < n ? Value(cps[k]) : Value();
  }
  return Value();
}

Expected<Value> apply_filter(const std::string& name, const Value& in, const Args& args) {
  if (name == "tojson") {
    Value ind = args.get(0, "indent");
    return Value(in.to_json(ind.is_int() ? static_cast<int>(ind.as_int()) : -1));
  }
  if (name == "trim") return Value(strip(in.str(), args.get(0, "chars"), true, true));
  if (name == "length" || name == "count") return Value(length_of(in));
  if (name == "upper") return Value(to_upper(in.str()));
  if (name == "lower") return Value(to_lower(in.str()));
  if (name == "title") return Value(title(in.str()));
  if (name == "capitalize") {
    auto cps = code_points(in.str());
    std::string out;
    for (size_t k = 0; k < cps.size(); ++k) out += k == 0 ? to_upper(cps[k]) : to_lower(cps[k]);
    return Value(out);
  }
  if (name == "items") return items_of(in);
  if (name == "dictsort") {
    Value pairs = items_of(in);
    return sorted(pairs, Args{});
  }
  if (name == "list") return to_list(in);
  if (name == "string") return Value(in.str());
  if (name == "safe" || name == "pprint") return name == "safe" ? in : Value(in.repr());
  if (name == "escape" || name == "e") return Value(html_escape(in.str()));
  if (name == "default" || name == "d") {
    bool boolean = args.get(1, "boolean").truthy();
    if (in.is_undefined() || (boolean && !in.truthy())) {
      Value d = args.get(0, "default_value");
      return d.is_undefined() ? Value("") : d;
    }
    return in;
  }
  if (name == "join") {
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    std::string sep = args.get(0, "d").is_undefined() ? "" : args.get(0, "d").str();
    Value attr = args.get(1, "attribute");
    std::string out;
    bool first = true;
    for (const auto& v : list.as_array()) {
      if (!first) out += sep;
      first = false;
      out += attr.is_undefined() ? v.str() : attribute_path(v, attr.str()).str();
    }
    return Value(out);
  }
  if (name == "first" || name == "last") {
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    const auto& a = list.as_array();
    if (a.empty()) return Value();
    return name == "first" ? a.front() : a.back();
  }
  if (name == "reverse") {
    if (in.is_string()) {
      auto cps = code_points(in.as_string());
      std::string out;
      for (auto it = cps.rbegin(); it != cps.rend(); ++it) out += *it;
      return Value(out);
    }
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    Array a = list.as_array();
    std::reverse(a.begin(), a.end());
    return Value::array(std::move(a));
  }
  if (name == "map") {
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    Array out;
    Value attr = args.get(99, "attribute");
    for (const auto& v : list.as_array()) {
      if (!attr.is_undefined()) {
        Value x = attribute_path(v, attr.str());
        if (x.is_undefined()) x = args.get(99, "default");
        out.push_back(x);
      } else {
        if (args.positional.empty()) return invalid_argument("map() needs a filter name or attribute=");
        TANDEM_ASSIGN_OR_RETURN(Value x, apply_filter(args.positional[0].str(), v, tail_args(args, 1)));
        out.push_back(x);
      }
    }
    return Value::array(std::move(out));
  }
  if (name == "select") return select_items(in, args, false, true);
  if (name == "reject") return select_items(in, args, false, false);
  if (name == "selectattr") return select_items(in, args, true, true);
  if (name == "rejectattr") return select_items(in, args, true, false);
  if (name == "sort") return sorted(in, args);
  if (name == "unique") {
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    Array out;
    for (const auto& v : list.as_array())
      if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
    return Value::array(std::move(out));
  }
  if (name == "min" || name == "max" || name == "sum") {
    TANDEM_ASSIGN_OR_RETURN(Value list, to_list(in));
    Value attr = args.get(name == "sum" ? 0 : 1, "attribute");
    Value best =
        name == "sum" ? (args.get(1, "start").is_undefined() ? Value(0) : args.get(1, "start")) : Value();
    for (const auto& item : list.as_array()) {
      Value v = attr.is_undefined() ? item : attribute_path(item, attr.str());
      if (name == "sum") {
        best = best.is_float() || v.is_float() ? Value(best.as_float() + v.as_float())
                                               : Value(best.as_int() + v.as_int());
        continue;
      }
      if (best.is_undefined()) {
        best = v;
        continue;
      }
      TANDEM_ASSIGN_OR_RETURN(bool lt, name == "min" ? less_than(v, best) : less_than(best, v));
      if (lt) best = v;
    }
    return best;
  }
  if (name == "int") {
    if (in.is_number() || in.is_bool()) return Value(in.as_int());
    char* end = nullptr;
    std::string s = strip(in.str(), Value(), true, true);
    long long x = std::strtoll(s.c_str(), &end, 10);
    if (!s.empty() && end && *end == '\0') return Value(static_cast<int64_t>(x));
    double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(static_cast<int64_t>(f));
    Value d = args.get(0, "default");
    return d.is_undefined() ? Value(0) : d;
  }
  if (name == "float") {
    if (in.is_number() || in.is_bool()) return Value(in.as_float());
    char* end = nullptr;
    std::string s = strip(in.str(), Value(), true, true);
    double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(f);
    Value d = args.get(0, "default");
    return d.is_undefined() ? Value(0.0) : d;
  }
  if (name == "abs") {
    if (in.is_float()) return Value(std::fabs(in.as_float()));
    if (in.is_int()) return Value(in.as_int() < 0 ? -in.as_int() : in.as_int());
    return invalid_argument("abs() needs a number");
  }
  if (name == "round") {
    int64_t precision = args.get(0, "precision").is_int() ? args.get(0, "precision").as_int() : 0;
    std::string method = args.get(1, "method").is_string() ? args.get(1, "method").as_string() : "common";
    double scale = std::pow(10.0, static_cast<double>(precision));
    double x = in.as_float() * scale;
    double r = method == "floor" ? std::floor(x) : method == "ceil" ? std::ceil(x) : std::round(x);
    return Value(r / scale);
  }
  if (name == "replace") {
    Value count = args.get(2, "count");
    return Value(replace(in.str(), args.get(0, "old").str(), args.get(1, "new").str(),
                         count.is_int() ? count.as_int() : -1));
  }
  if (name == "indent") {
    return Value(
        indent(in.str(), args.get(0, "width"), args.get(1, "first").truthy(), args.get(2, "blank").truthy()));
  }
  if (name == "wordcount") return Value(static_cast<int64_t>(split(in.str(), Value(), -1).as_array().size()));
  return unimplemented("unsupported filter '" + name + "'");
}

Expected<bool> apply_test(const std::string& name, const Value& v, const Args& args) {
  const Value arg = args.get(0, "value");
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.is_bool();
  if (name == "true") return v.is_bool() && v.as_bool();
  if (name == "false") return v.is_bool() && !v.as_bool();
  if (name == "integer") return v.is_int();
  if (name == "float") return v.is_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "sequence") return v.is_array() || v.is_string() || v.is_object();
  if (name == "iterable") return v.is_array() || v.is_string() || v.is_object();
  if (name == "callable") return v.is_callable();
  if (name == "odd") return v.is_int() && (v.as_int() % 2 != 0);
  if (name == "even") return v.is_int() && (v.as_int() % 2 == 0);
  if (name == "divisibleby") return arg.as_int() != 0 && v.as_int() % arg.as_int() == 0;
  if (name == "eq" || name == "equalto" || name == "==") return v == arg;
  if (name == "ne" || name == "!=") return !(v == arg);
  if (name == "lt" || name == "lessthan" || name == "<") return less_than(v, arg);
  if (name == "gt" || name == "greaterthan" || name == ">") return less_than(arg, v);
  if (name == "le" || name == "<=") {
    TANDEM_ASSIGN_OR_RETURN(bool gt, less_than(arg, v));
    return !gt;
  }
  if (name == "ge" || name == ">=") {
    TANDEM_ASSIGN_OR_RETURN(bool lt, less_than(v, arg));
    return !lt;
  }
  if (name == "sameas") return v == arg && v.kind() == arg.kind();
  if (name == "lower") return v.is_string() && to_lower(v.as_string()) == v.as_string();
  if (name == "upper") return v.is_string() && to_upper(v.as_string()) == v.as_string();
  if (name == "in") {
    if (arg.is_string()) return v.is_string() && arg.as_string().find(v.as_string()) != std::string::npos;
    if (arg.is_array())
      return std::find(arg.as_array().begin(), arg.as_array().end(), v) != arg.as_array().end();
    if (arg.is_object()) return v.is_string() && arg.as_object().find(v.as_string()) != nullptr;
    if (arg.is_undefined() || arg.is_none()) return false;
    return invalid_argument(std::string("argument of type '") + arg.type_name() + "' is not iterable");
  }
  return unimplemented("unsupported test '" + name + "'");
}

Expected<Value> call_method(const Value& self, const std::string& name, const Args& args) {
  if (self.is_string()) {
    const std::string& s = self.as_string();
    if (name == "strip") return Value(strip(s, args.get(0, "chars"), true, true));
    if (name == "lstrip") return Value(strip(s, args.get(0, "chars"), true, false));
    if (name == "rstrip") return Value(strip(s, args.get(0, "chars"), false, true));
    if (name == "split") {
      Value maxsplit = args.get(1, "maxsplit");
      return split(s, args.get(0, "sep"), maxsplit.is_int() ? maxsplit.as_int() : -1);
    }
    if (name == "startswith" || name == "endswith") {
      Value p = args.get(0, "prefix");
      Array options = p.is_array() ? p.as_array() : Array{p};
      for (const auto& o : options) {
        const std::string x = o.str();
        bool hit = name == "startswith"
                       ? s.compare(0, x.size(), x) == 0
                       : s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
        if (hit) return Value(true);
      }
      return Value(false);
    }
    if (name == "upper") return Value(to_upper(s));
    if (name == "lower") return Value(to_lower(s));
    if (name == "title") return Value(title(s));
    if (name == "capitalize") return apply_filter("capitalize", self, Args{});
    if (name == "replace") {
      Value count = args.get(2, "count");
      return Value(replace(s, args.get(0, "old").str(), args.get(1, "new").str(),
                           count.is_int() ? count.as_int() : -1));
    }
    if (name == "find") {
      size_t p = s.find(args.get(0, "sub").str());
      return Value(p == std::string::npos ? int64_t{-1}
                                          : static_cast<int64_t>(code_points(s.substr(0, p)).size()));
    }
    if (name == "count") {
      std::string sub = args.get(0, "sub").str();
      int64_t n = 0;
      for (size_t p = 0; !sub.empty() && (p = s.find(sub, p)) != std::string::npos; p += sub.size()) ++n;
      return Value(n);
    }
    if (name == "join") {
      TANDEM_ASSIGN_OR_RETURN(Value list, to_list(args.get(0, "iterable")));
      std::string out;
      for (size_t k = 0; k < list.as_array().size(); ++k) out += (k ? s : "") + list.as_array()[k].str();
      return Value(out);
    }
    if (name == "splitlines") {
      Array out;
      size_t pos = 0;
      while (pos < s.size()) {
        size_t nl = s.find('\n', pos);
        if (nl == std::string::npos) nl = s.size();
        std::string line = s.substr(pos, nl - pos);
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out.push_back(Value(line));
        pos = nl + 1;
      }
      return Value::array(std::move(out));
    }
    if (name == "isdigit" || name == "isalpha" || name == "isspace" || name == "isalnum") {
      if (s.empty()) return Value(false);
      for (unsigned char c : s) {
        bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                  : name == "isalpha" ? is_alpha(static_cast<char>(c))
                  : name == "isspace" ? py_space(c)
                                      : (is_alpha(static_cast<char>(c)) || (c >= '0' && c <= '9'));
        if (!ok) return Value(false);
      }
      return Value(true);
    }
  }
  if (self.is_object()) {
    if (name == "items") return items_of(self);
    if (name == "keys" || name == "values") {
      Array a;
      for (const auto& [k, v] : self.as_object().items) a.push_back(name == "keys" ? Value(k) : v);
      return Value::array(std::move(a));
    }
    if (name == "get") {
      Value v = get_item(self, args.get(0, "key"));
      if (v.is_undefined()) {
        Value d = args.get(1, "default");
        return d.is_undefined() ? Value::none() : d;
      }
      return v;
    }
  }
  if (self.is_array()) {
    if (name == "index") {
      const auto& a = self.as_array();
      auto it = std::find(a.begin(), a.end(), args.get(0, "value"));
      if (it == a.end()) return invalid_argument("list.index(x): x not in list");
      return Value(static_cast<int64_t>(it - a.begin()));
    }
    if (name == "count") {
      const auto& a = self.as_array();
      return Value(static_cast<int64_t>(std::count(a.begin(), a.end(), args.get(0, "value"))));
    }
  }
  return unimplemented(std::string("unsupported method '") + name + "' on " + self.type_name());
}

Object builtin_globals() {
  Object g;
  g.set("range", Value::callable([](Args& a) -> Expected<Value> {
          int64_t start = 0, stop, step = 1;
          if (a.positional.empty()) return invalid_argument("range() needs arguments");
          if (a.positional.size() == 1) {
            stop = a.positional[0].as_int();
          } else {
            start = a.positional[0].as_int();
            stop = a.positional[1].as_int();
            if (a.positional.size() > 2) step = a.positional[2].as_int();
          }
          if (step == 0) return invalid_argument("range() step must not be zero");
          Array out;
          for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) {
            out.push_back(Value(k));
            if (out.size() > 1000000) return invalid_argument("range() too large");
          }
          return Value::array(std::move(out));
        }));
  g.set("namespace", Value::callable([](Args& a) -> Expected<Value> {
          Object o;
          o.is_namespace = true;
          if (!a.positional.empty() && a.positional[0].is_object())
            for (const auto& [k, v] : a.positional[0].as_object().items) o.set(k, v);
          for (const auto& [k, v] : a.keyword) o.set(k, v);
          return Value::object(std::move(o));
        }));
  g.set("dict", Value::callable([](Args& a) -> Expected<Value> {
          Object o;
          for (const auto& [k, v] : a.keyword) o.set(k, v);
          return Value::object(std::move(o));
        }));
  return g;
}

}  // namespace tandem::tok::jinja
