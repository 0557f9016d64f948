// Jinja filters (tojson, trim, join, map, selectattr, ...) with Jinja2 semantics.
#include <algorithm>
#include <cmath>
#include <limits>

#include "jinja_eval.h"
#include "jinja_pyops.h"

namespace tandem::tok::jinja {

namespace {

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
  // Python's " " * width: nothing for a negative width; capped at 64 columns.
  std::string pad = width.is_string() ? width.as_string()
                                      : std::string(static_cast<size_t>(std::clamp<int64_t>(
                                                        width.is_undefined() ? 4 : width.as_int(), 0, 64)),
                                                    ' ');
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

Expected<Value> apply_filter(const std::string& name, const Value& in, const Args& args) {
  if (name == "tojson") {
    Value ind = args.get(0, "indent");
    // Capped: an absurd indent would make every line that many bytes.
    return Value(in.to_json(ind.is_int() ? static_cast<int>(std::clamp<int64_t>(ind.as_int(), -1, 64)) : -1));
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
        int64_t sum = 0;  // an int sum that overflows continues as a float
        best = best.is_float() || v.is_float() || __builtin_add_overflow(best.as_int(), v.as_int(), &sum)
                   ? Value(best.as_float() + v.as_float())
                   : Value(sum);
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
    if (in.is_int() && in.as_int() == std::numeric_limits<int64_t>::min()) return Value(-in.as_float());
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

}  // namespace tandem::tok::jinja
