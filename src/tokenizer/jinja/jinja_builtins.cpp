// Jinja tests, methods on str/dict/list, attribute access and global
// functions: the subset real chat templates use, with Python semantics.
#include <algorithm>

#include "jinja_eval.h"
#include "jinja_pyops.h"

namespace tandem::tok::jinja {

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
  if (name == "divisibleby")  // (% -1 is always 0; INT64_MIN % -1 would trap)
    return arg.as_int() != 0 && (arg.as_int() == -1 || v.as_int() % arg.as_int() == 0);
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
    if (name == "format") return brace_format(s, args);
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
          for (int64_t k = start; step > 0 ? k < stop : k > stop;) {
            out.push_back(Value(k));
            if (out.size() > 1000000) return invalid_argument("range() too large");
            if (__builtin_add_overflow(k, step, &k)) break;  // past INT64's end: so past stop too
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
