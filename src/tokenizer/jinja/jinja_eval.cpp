#include "jinja_eval.h"

#include <cmath>
#include <unordered_map>

#include "jinja_pyops.h"

namespace tandem::tok::jinja {

namespace {

struct Scope {
  std::unordered_map<std::string, Value> vars;
  Scope* parent = nullptr;
  Value* find(const std::string& name) {
    for (Scope* s = this; s; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};

enum class Flow { kNormal, kBreak, kContinue };

Status at_line(const Status& s, int line) {
  if (s.message().rfind("template line ", 0) == 0) return s;
  return Status(s.code(), "template line " + std::to_string(line) + ": " + s.message());
}

class Interpreter {
 public:
  explicit Interpreter(Scope* root) : root_(root) {}

  Expected<Flow> exec_body(const Body& body, Scope& scope, std::string& out) {
    for (const auto& s : body) {
      TANDEM_ASSIGN_OR_RETURN(Flow f, exec(*s, scope, out));
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

 private:
  // Every statement and loop iteration costs a step: a template (say, a macro
  // that calls itself twice, or three nested loops over range(1000)) cannot
  // run for hours.
  Status step(int line) {
    if (++steps_ <= kMaxSteps) return Status::Ok();
    return invalid_argument("template line " + std::to_string(line) + ": the template ran more than " +
                            std::to_string(kMaxSteps) + " statements and loop iterations");
  }
  static Status check_output(const std::string& out, int line) {
    if (out.size() <= kMaxStringBytes) return Status::Ok();
    return invalid_argument("template line " + std::to_string(line) + ": output is larger than " +
                            std::to_string(kMaxStringBytes) + " bytes");
  }

  Expected<Flow> exec(const Stmt& s, Scope& scope, std::string& out) {
    TANDEM_RETURN_IF_ERROR(step(s.line));
    switch (s.kind) {
      case Stmt::Kind::kText:
        out += s.text;
        TANDEM_RETURN_IF_ERROR(check_output(out, s.line));
        return Flow::kNormal;
      case Stmt::Kind::kOutput: {
        TANDEM_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
        out += v.str();
        TANDEM_RETURN_IF_ERROR(check_output(out, s.line));
        return Flow::kNormal;
      }
      case Stmt::Kind::kIf:
        for (const auto& [cond, body] : s.branches) {
          bool take = true;
          if (cond) {
            TANDEM_ASSIGN_OR_RETURN(Value c, eval(*cond, scope));
            take = c.truthy();
          }
          if (take) return exec_body(body, scope, out);
        }
        return Flow::kNormal;
      case Stmt::Kind::kFor:
        return exec_for(s, scope, out);
      case Stmt::Kind::kSet:
        return exec_set(s, scope);
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        Scope inner{{}, &scope};
        TANDEM_ASSIGN_OR_RETURN(Flow f, exec_body(s.body, inner, captured));
        (void)f;
        scope.vars[s.targets[0]] = Value(std::move(captured));
        return Flow::kNormal;
      }
      case Stmt::Kind::kMacro:
        scope.vars[s.macro_name] = make_macro(s);
        return Flow::kNormal;
      case Stmt::Kind::kBreak:
        return Flow::kBreak;
      case Stmt::Kind::kContinue:
        return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Value make_macro(const Stmt& s) {
    const Stmt* def = &s;
    Interpreter* self = this;
    return Value::callable([self, def](Args& args) -> Expected<Value> {
      if (self->call_depth_ >= kMaxCallDepth)
        return invalid_argument("macro '" + def->macro_name + "' recursion deeper than " +
                                std::to_string(kMaxCallDepth));
      ++self->call_depth_;
      struct Leave {
        int& d;
        ~Leave() { --d; }
      } leave{self->call_depth_};
      Scope local{{}, self->root_};
      size_t pos = 0;
      for (const auto& [name, dflt] : def->params) {
        Value v = args.get(pos++, name);
        if (v.is_undefined() && dflt) {
          TANDEM_ASSIGN_OR_RETURN(v, self->eval(*dflt, local));
        }
        local.vars[name] = v;
      }
      std::string out;
      TANDEM_ASSIGN_OR_RETURN(Flow f, self->exec_body(def->body, local, out));
      (void)f;
      return Value(std::move(out));
    });
  }

  Status assign(Scope& scope, const std::vector<std::string>& targets, const Value& v, int line) {
    if (targets.size() == 1) {
      scope.vars[targets[0]] = v;
      return Status::Ok();
    }
    if (!v.is_array() || v.as_array().size() != targets.size())
      return invalid_argument("template line " + std::to_string(line) + ": cannot unpack " + v.type_name() +
                              " into " + std::to_string(targets.size()) + " names");
    for (size_t k = 0; k < targets.size(); ++k) scope.vars[targets[k]] = v.as_array()[k];
    return Status::Ok();
  }

  Expected<Flow> exec_set(const Stmt& s, Scope& scope) {
    TANDEM_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
    if (!s.attr.empty()) {
      Value* ns = scope.find(s.targets[0]);
      if (!ns || !ns->is_object() || !ns->as_object().is_namespace)
        return invalid_argument("template line " + std::to_string(s.line) + ": cannot set attribute '" +
                                s.attr + "' on '" + s.targets[0] + "' (not a namespace)");
      ns->as_object().set(s.attr, v);
      return Flow::kNormal;
    }
    TANDEM_RETURN_IF_ERROR(assign(scope, s.targets, v, s.line));
    return Flow::kNormal;
  }

  Expected<Flow> exec_for(const Stmt& s, Scope& scope, std::string& out) {
    TANDEM_ASSIGN_OR_RETURN(Value seq, eval(*s.expr, scope));
    Array items;
    if (seq.is_array()) {
      items = seq.as_array();
    } else if (seq.is_object()) {
      for (const auto& [k, v] : seq.as_object().items) items.push_back(Value(k));
    } else if (seq.is_string()) {
      TANDEM_ASSIGN_OR_RETURN(Value chars, apply_filter("list", seq, Args{}));
      items = chars.as_array();
    } else if (!seq.is_undefined() && !seq.is_none()) {
      return invalid_argument("template line " + std::to_string(s.line) + ": cannot iterate over " +
                              seq.type_name());
    }
    if (s.filter) {
      Array kept;
      for (const auto& item : items) {
        Scope probe{{}, &scope};
        TANDEM_RETURN_IF_ERROR(assign(probe, s.targets, item, s.line));
        TANDEM_ASSIGN_OR_RETURN(Value keep, eval(*s.filter, probe));
        if (keep.truthy()) kept.push_back(item);
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Scope inner{{}, &scope};
      TANDEM_ASSIGN_OR_RETURN(Flow f, exec_body(s.else_body, inner, out));
      (void)f;
      return Flow::kNormal;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t k = 0; k < n; ++k) {
      TANDEM_RETURN_IF_ERROR(step(s.line));
      Scope inner{{}, &scope};
      TANDEM_RETURN_IF_ERROR(assign(inner, s.targets, items[k], s.line));
      Object loop;
      loop.set("index", Value(k + 1));
      loop.set("index0", Value(k));
      loop.set("revindex", Value(n - k));
      loop.set("revindex0", Value(n - k - 1));
      loop.set("first", Value(k == 0));
      loop.set("last", Value(k == n - 1));
      loop.set("length", Value(n));
      loop.set("previtem", k > 0 ? items[k - 1] : Value());
      loop.set("nextitem", k + 1 < n ? items[k + 1] : Value());
      loop.set("cycle", Value::callable([k](Args& a) -> Expected<Value> {
                 if (a.positional.empty()) return invalid_argument("loop.cycle() needs arguments");
                 return a.positional[static_cast<size_t>(k) % a.positional.size()];
               }));
      inner.vars["loop"] = Value::object(std::move(loop));
      TANDEM_ASSIGN_OR_RETURN(Flow f, exec_body(s.body, inner, out));
      if (f == Flow::kBreak) break;
    }
    return Flow::kNormal;
  }

  Expected<Args> eval_args(const Expr& e, size_t first, Scope& scope) {
    Args args;
    for (size_t k = first; k < e.children.size(); ++k) {
      TANDEM_ASSIGN_OR_RETURN(Value v, eval(*e.children[k], scope));
      args.positional.push_back(std::move(v));
    }
    for (const auto& [name, ex] : e.kwargs) {
      TANDEM_ASSIGN_OR_RETURN(Value v, eval(*ex, scope));
      args.keyword.emplace_back(name, std::move(v));
    }
    return args;
  }

 public:
  Expected<Value> eval(const Expr& e, Scope& scope) {
    auto r = eval_inner(e, scope);
    if (!r.ok()) return at_line(r.status(), e.line);
    // Bounds recursion in printing, comparing and destroying values.
    if (r->depth() > kMaxValueDepth)
      return invalid_argument("template line " + std::to_string(e.line) + ": value nested deeper than " +
                              std::to_string(kMaxValueDepth) + " levels");
    return r;
  }

 private:
  Expected<Value> eval_inner(const Expr& e, Scope& scope) {
    switch (e.kind) {
      case Expr::Kind::kLiteral:
        return e.literal;
      case Expr::Kind::kName: {
        Value* v = scope.find(e.name);
        return v ? *v : Value();
      }
      case Expr::Kind::kList:
      case Expr::Kind::kTuple: {
        Array items;
        for (const auto& c : e.children) {
          TANDEM_ASSIGN_OR_RETURN(Value v, eval(*c, scope));
          items.push_back(std::move(v));
        }
        return Value::array(std::move(items));
      }
      case Expr::Kind::kDict: {
        Object o;
        for (size_t k = 0; k + 1 < e.children.size(); k += 2) {
          TANDEM_ASSIGN_OR_RETURN(Value key, eval(*e.children[k], scope));
          TANDEM_ASSIGN_OR_RETURN(Value v, eval(*e.children[k + 1], scope));
          if (!key.is_string()) return invalid_argument("dict keys must be strings");
          o.set(key.as_string(), std::move(v));
        }
        return Value::object(std::move(o));
      }
      case Expr::Kind::kGetAttr: {
        TANDEM_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
        return get_item(obj, Value(e.name));
      }
      case Expr::Kind::kGetItem: {
        TANDEM_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
        TANDEM_ASSIGN_OR_RETURN(Value key, eval(*e.children[1], scope));
        return get_item(obj, key);
      }
      case Expr::Kind::kSlice:
        return eval_slice(e, scope);
      case Expr::Kind::kCall:
        return eval_call(e, scope);
      case Expr::Kind::kFilter: {
        TANDEM_ASSIGN_OR_RETURN(Value in, eval(*e.children[0], scope));
        TANDEM_ASSIGN_OR_RETURN(Args args, eval_args(e, 1, scope));
        return apply_filter(e.name, in, args);
      }
      case Expr::Kind::kTest: {
        Value in;
        if (e.name == "defined" || e.name == "undefined") {
          TANDEM_ASSIGN_OR_RETURN(in, eval(*e.children[0], scope));
        } else {
          TANDEM_ASSIGN_OR_RETURN(in, eval(*e.children[0], scope));
        }
        TANDEM_ASSIGN_OR_RETURN(Args args, eval_args(e, 1, scope));
        TANDEM_ASSIGN_OR_RETURN(bool r, apply_test(e.name, in, args));
        return Value(r != e.negated);
      }
      case Expr::Kind::kUnary: {
        TANDEM_ASSIGN_OR_RETURN(Value v, eval(*e.children[0], scope));
        if (e.name == "not") return Value(!v.truthy());
        if (!v.is_number() && !v.is_bool())
          return invalid_argument(std::string("bad operand for unary ") + e.name);
        if (e.name == "+") return v;
        return v.is_float() ? Value(-v.as_float()) : Value(-v.as_int());
      }
      case Expr::Kind::kBinary:
        return eval_binary(e, scope);
      case Expr::Kind::kCond: {
        TANDEM_ASSIGN_OR_RETURN(Value c, eval(*e.children[1], scope));
        if (c.truthy()) return eval(*e.children[0], scope);
        if (e.children[2]) return eval(*e.children[2], scope);
        return Value();
      }
    }
    return Value();
  }

  Expected<Value> eval_call(const Expr& e, Scope& scope) {
    const Expr& callee = *e.children[0];
    TANDEM_ASSIGN_OR_RETURN(Args args, eval_args(e, 1, scope));
    if (callee.kind == Expr::Kind::kGetAttr) {
      TANDEM_ASSIGN_OR_RETURN(Value self, eval(*callee.children[0], scope));
      if (self.is_object()) {
        const Value* member = self.as_object().find(callee.name);
        if (member && member->is_callable()) return member->as_callable()(args);
        if (member) return invalid_argument("'" + callee.name + "' is not callable");
      }
      return call_method(self, callee.name, args);
    }
    TANDEM_ASSIGN_OR_RETURN(Value fn, eval(callee, scope));
    if (!fn.is_callable()) {
      std::string what = callee.kind == Expr::Kind::kName ? "'" + callee.name + "'" : std::string("value");
      if (fn.is_undefined()) return invalid_argument("unknown function " + what);
      return invalid_argument(what + " is not callable");
    }
    return fn.as_callable()(args);
  }

  Expected<Value> eval_slice(const Expr& e, Scope& scope) {
    TANDEM_ASSIGN_OR_RETURN(Value obj, eval(*e.children[0], scope));
    std::optional<int64_t> bounds[3];
    for (int k = 0; k < 3; ++k) {
      if (!e.children[k + 1]) continue;
      TANDEM_ASSIGN_OR_RETURN(Value v, eval(*e.children[k + 1], scope));
      if (v.is_none() || v.is_undefined()) continue;
      if (!v.is_int()) return invalid_argument("slice indices must be integers");
      bounds[k] = v.as_int();
    }
    int64_t step = bounds[2].value_or(1);
    if (step == 0) return invalid_argument("slice step cannot be zero");
    int64_t n;
    if (obj.is_array())
      n = static_cast<int64_t>(obj.as_array().size());
    else if (obj.is_string())
      n = static_cast<int64_t>(obj.as_string().size());
    else
      return invalid_argument(std::string("cannot slice ") + obj.type_name());
    auto clamp = [&](std::optional<int64_t> b, int64_t dflt, int64_t lo, int64_t hi) {
      if (!b) return dflt;
      int64_t x = *b < 0 ? *b + n : *b;
      return std::max(lo, std::min(hi, x));
    };
    int64_t start = step > 0 ? clamp(bounds[0], 0, 0, n) : clamp(bounds[0], n - 1, -1, n - 1);
    int64_t stop = step > 0 ? clamp(bounds[1], n, 0, n) : clamp(bounds[1], -1, -1, n - 1);
    std::vector<int64_t> idx;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) idx.push_back(k);
    if (obj.is_array()) {
      Array out;
      for (int64_t k : idx) out.push_back(obj.as_array()[k]);
      return Value::array(std::move(out));
    }
    // Strings slice by code point.
    TANDEM_ASSIGN_OR_RETURN(Value chars, apply_filter("list", obj, Args{}));
    const Array& cs = chars.as_array();
    n = static_cast<int64_t>(cs.size());
    start = step > 0 ? clamp(bounds[0], 0, 0, n) : clamp(bounds[0], n - 1, -1, n - 1);
    stop = step > 0 ? clamp(bounds[1], n, 0, n) : clamp(bounds[1], -1, -1, n - 1);
    std::string out;
    for (int64_t k = start; step > 0 ? k < stop : k > stop; k += step) out += cs[k].as_string();
    return Value(std::move(out));
  }

  Expected<Value> eval_binary(const Expr& e, Scope& scope) {
    const std::string& op = e.name;
    TANDEM_ASSIGN_OR_RETURN(Value l, eval(*e.children[0], scope));
    if (op == "and") {
      if (!l.truthy()) return l;
      return eval(*e.children[1], scope);
    }
    if (op == "or") {
      if (l.truthy()) return l;
      return eval(*e.children[1], scope);
    }
    TANDEM_ASSIGN_OR_RETURN(Value r, eval(*e.children[1], scope));
    if (op == "~") return concat(l.str(), r.str());
    if (op == "==") return Value(l == r);
    if (op == "!=") return Value(!(l == r));
    if (op == "<")
      return less_than(l, r).ok() ? Expected<Value>(Value(*less_than(l, r))) : less_than(l, r).status();
    if (op == ">")
      return less_than(r, l).ok() ? Expected<Value>(Value(*less_than(r, l))) : less_than(r, l).status();
    if (op == "<=") {
      TANDEM_ASSIGN_OR_RETURN(bool gt, less_than(r, l));
      return Value(!gt);
    }
    if (op == ">=") {
      TANDEM_ASSIGN_OR_RETURN(bool lt, less_than(l, r));
      return Value(!lt);
    }
    if (op == "in" || op == "not in") {
      TANDEM_ASSIGN_OR_RETURN(bool found, apply_test("in", l, Args{{r}, {}}));
      return Value(found == (op == "in"));
    }
    return arithmetic(op, l, r);
  }

  static Expected<Value> arithmetic(const std::string& op, const Value& l, const Value& r) {
    if (op == "%" && l.is_string()) return percent_format(l.as_string(), r);
    if (op == "+") {
      if (l.is_string() && r.is_string()) return concat(l.as_string(), r.as_string());
      if (l.is_array() && r.is_array()) {
        if (l.as_array().size() + r.as_array().size() > kMaxArrayItems)
          return invalid_argument("list concatenation longer than " + std::to_string(kMaxArrayItems) +
                                  " items");
        Array a = l.as_array();
        a.insert(a.end(), r.as_array().begin(), r.as_array().end());
        return Value::array(std::move(a));
      }
    }
    if (op == "*" && ((l.is_string() && r.is_int()) || (l.is_int() && r.is_string()))) {
      const std::string& s = l.is_string() ? l.as_string() : r.as_string();
      int64_t n = l.is_int() ? l.as_int() : r.as_int();
      if (n <= 0 || s.empty()) return Value(std::string());
      if (static_cast<uint64_t>(n) > kMaxStringBytes / s.size())
        return invalid_argument("string repetition longer than " + std::to_string(kMaxStringBytes) +
                                " bytes");
      std::string out;
      for (int64_t k = 0; k < n; ++k) out += s;
      return Value(std::move(out));
    }
    bool lnum = l.is_number() || l.is_bool(), rnum = r.is_number() || r.is_bool();
    if (!lnum || !rnum)
      return invalid_argument("unsupported operand types for " + op + ": " + l.type_name() + " and " +
                              r.type_name());
    bool use_float = l.is_float() || r.is_float();
    if (op == "/") {
      if (r.as_float() == 0) return invalid_argument("division by zero");
      return Value(l.as_float() / r.as_float());
    }
    if (op == "**") {
      if (!use_float && r.as_int() >= 0) {  // by squaring: any overflow means the result overflows
        int64_t out = 1, base = l.as_int();
        bool overflow = false;
        for (int64_t e = r.as_int(); e > 0; e >>= 1) {
          if (e & 1) overflow |= __builtin_mul_overflow(out, base, &out);
          if (e > 1) overflow |= __builtin_mul_overflow(base, base, &base);
          if (overflow) return integer_overflow(op);
        }
        return Value(out);
      }
      return Value(std::pow(l.as_float(), r.as_float()));
    }
    if (use_float) {
      double a = l.as_float(), b = r.as_float();
      if (op == "+") return Value(a + b);
      if (op == "-") return Value(a - b);
      if (op == "*") return Value(a * b);
      if (b == 0) return invalid_argument("division by zero");
      if (op == "//") return Value(std::floor(a / b));
      if (op == "%") return Value(a - b * std::floor(a / b));
    } else {
      // Python's ints do not overflow; ours are int64, so overflow is an error.
      int64_t a = l.as_int(), b = r.as_int(), c = 0;
      if (op == "+") return __builtin_add_overflow(a, b, &c) ? integer_overflow(op) : Value(c);
      if (op == "-") return __builtin_sub_overflow(a, b, &c) ? integer_overflow(op) : Value(c);
      if (op == "*") return __builtin_mul_overflow(a, b, &c) ? integer_overflow(op) : Value(c);
      if (b == 0) return invalid_argument("division by zero");
      if (b == -1) {  // INT64_MIN / -1 traps
        if (op == "%") return Value(int64_t{0});
        if (op == "//") return __builtin_sub_overflow(int64_t{0}, a, &c) ? integer_overflow(op) : Value(c);
      }
      int64_t q = a / b;
      if ((a % b != 0) && ((a < 0) != (b < 0))) --q;  // Python floors
      if (op == "//") return Value(q);
      if (op == "%") return Value(a - b * q);
    }
    return invalid_argument("unsupported operator " + op);
  }

  static Expected<Value> integer_overflow(const std::string& op) {
    return invalid_argument("integer overflow in " + op + " (integers are 64-bit)");
  }
  static Expected<Value> concat(const std::string& a, const std::string& b) {
    if (a.size() + b.size() > kMaxStringBytes)
      return invalid_argument("string concatenation longer than " + std::to_string(kMaxStringBytes) +
                              " bytes");
    return Value(a + b);
  }

  // Limits far above any chat template's needs (a rendered prompt is at most
  // megabytes; a request body is at most 8 MiB), so that no template can
  // exhaust memory or time.
  static constexpr size_t kMaxStringBytes = size_t{64} << 20;
  static constexpr size_t kMaxArrayItems = 1000000;
  static constexpr int64_t kMaxSteps = 100000;
  static constexpr int kMaxCallDepth = 100;
  static constexpr uint32_t kMaxValueDepth = 256;
  Scope* root_;
  int call_depth_ = 0;
  int64_t steps_ = 0;
};

}  // namespace

Expected<std::string> render(const Template& tpl, const Object& globals) {
  Scope builtins;
  for (const auto& [k, v] : builtin_globals().items) builtins.vars[k] = v;
  // Namespaces are the only mutable values, so the only way to build a cycle
  // (`set ns.self = ns`); remember them and empty them afterwards so cycles
  // do not leak.
  std::vector<Value> namespaces;
  Value make_namespace = builtins.vars["namespace"];
  builtins.vars["namespace"] = Value::callable([&namespaces, make_namespace](Args& a) -> Expected<Value> {
    auto ns = make_namespace.as_callable()(a);
    if (ns.ok()) namespaces.push_back(*ns);
    return ns;
  });
  Scope root{{}, &builtins};
  for (const auto& [k, v] : globals.items) root.vars[k] = v;
  std::string out;
  Status status;
  {
    Interpreter interp(&root);
    auto flow = interp.exec_body(tpl.body, root, out);
    if (!flow.ok()) status = flow.status();
  }
  root.vars.clear();
  for (auto& ns : namespaces) ns.as_object().items.clear();
  if (!status.ok()) return status;
  return out;
}

}  // namespace tandem::tok::jinja
