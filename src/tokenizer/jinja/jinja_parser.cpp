#include "jinja_ast.h"

namespace tandem::tok::jinja {

namespace {

using TK = Token::Kind;

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Expected<std::shared_ptr<const Template>> run() {
    auto tpl = std::make_shared<Template>();
    std::string end;
    auto body = parse_body({}, &end);
    if (!body.ok()) return body.status();
    tpl->body = std::move(body).value();
    return std::shared_ptr<const Template>(std::move(tpl));
  }

 private:
  const Token& peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  const Token& next() { return t_[std::min(i_++, t_.size() - 1)]; }
  bool is_op(const char* op, size_t k = 0) const { return peek(k).kind == TK::kOp && peek(k).text == op; }
  bool is_name(const char* n, size_t k = 0) const { return peek(k).kind == TK::kName && peek(k).text == n; }
  Status error(const std::string& what, int line = -1) const {
    return invalid_argument("template line " + std::to_string(line < 0 ? peek().line : line) + ": " + what);
  }
  std::string describe(const Token& t) const {
    switch (t.kind) {
      case TK::kEof:
        return "end of template";
      case TK::kExprClose:
        return "'}}'";
      case TK::kStmtClose:
        return "'%}'";
      case TK::kString:
        return "string literal";
      default:
        return "'" + t.text + "'";
    }
  }
  Status expect_op(const char* op) {
    if (!is_op(op)) return error(std::string("expected '") + op + "', found " + describe(peek()));
    ++i_;
    return Status::Ok();
  }
  Status expect_stmt_close() {
    if (peek().kind != TK::kStmtClose) return error("expected '%}', found " + describe(peek()));
    ++i_;
    return Status::Ok();
  }
  Expected<std::string> expect_name() {
    if (peek().kind != TK::kName) return error("expected a name, found " + describe(peek()));
    return next().text;
  }

  // Parses statements until a `{% <one of ends> %}` tag; its keyword goes to *end.
  Expected<Body> parse_body(const std::vector<std::string>& ends, std::string* end) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxDepth) return error("statements nested too deeply");
    Body body;
    while (true) {
      const Token& tok = peek();
      if (tok.kind == TK::kEof) {
        if (!ends.empty()) return error("missing '{% " + ends.back() + " %}' before end of template");
        return body;
      }
      if (tok.kind == TK::kText) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kText;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        ++i_;
        continue;
      }
      if (tok.kind == TK::kExprOpen) {
        ++i_;
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::kOutput;
        s->line = tok.line;
        TANDEM_ASSIGN_OR_RETURN(s->expr, parse_expression());
        if (peek().kind != TK::kExprClose) return error("expected '}}', found " + describe(peek()));
        ++i_;
        body.push_back(std::move(s));
        continue;
      }
      if (tok.kind != TK::kStmtOpen) return error("unexpected " + describe(tok));
      const Token& kw = peek(1);
      if (kw.kind != TK::kName) return error("expected a statement keyword after '{%'");
      for (const auto& e : ends) {
        if (kw.text == e) {
          *end = e;
          i_ += 2;
          return body;
        }
      }
      i_ += 2;
      TANDEM_ASSIGN_OR_RETURN(auto stmt, parse_statement(kw.text, kw.line));
      if (stmt) body.push_back(std::move(stmt));
    }
  }

  Expected<std::unique_ptr<Stmt>> parse_statement(const std::string& kw, int line) {
    auto s = std::make_unique<Stmt>();
    s->line = line;
    if (kw == "if") return parse_if(std::move(s));
    if (kw == "for") return parse_for(std::move(s));
    if (kw == "set") return parse_set(std::move(s));
    if (kw == "macro") return parse_macro(std::move(s));
    if (kw == "break" || kw == "continue") {
      s->kind = kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
      return s;
    }
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
      std::string end;
      TANDEM_ASSIGN_OR_RETURN(Body body, parse_body({"endgeneration"}, &end));
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
      s->kind = Stmt::Kind::kIf;
      auto yes = std::make_unique<Expr>();
      yes->kind = Expr::Kind::kLiteral;
      yes->literal = Value(true);
      s->branches.emplace_back(std::move(yes), std::move(body));
      return s;
    }
    if (kw.rfind("end", 0) == 0 || kw == "elif" || kw == "else")
      return error("unexpected '{% " + kw + " %}'", line);
    return error("unsupported statement '{% " + kw + " %}'", line);
  }

  Expected<std::unique_ptr<Stmt>> parse_if(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kIf;
    TANDEM_ASSIGN_OR_RETURN(ExprPtr cond, parse_expression());
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    while (true) {
      std::string end;
      TANDEM_ASSIGN_OR_RETURN(Body body, parse_body({"elif", "else", "endif"}, &end));
      s->branches.emplace_back(std::move(cond), std::move(body));
      if (end == "endif") {
        TANDEM_RETURN_IF_ERROR(expect_stmt_close());
        return s;
      }
      if (end == "else") {
        TANDEM_RETURN_IF_ERROR(expect_stmt_close());
        TANDEM_ASSIGN_OR_RETURN(Body else_body, parse_body({"endif"}, &end));
        TANDEM_RETURN_IF_ERROR(expect_stmt_close());
        s->branches.emplace_back(nullptr, std::move(else_body));
        return s;
      }
      TANDEM_ASSIGN_OR_RETURN(cond, parse_expression());
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    }
  }

  Expected<std::unique_ptr<Stmt>> parse_for(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kFor;
    do {
      TANDEM_ASSIGN_OR_RETURN(std::string name, expect_name());
      s->targets.push_back(name);
    } while (is_op(",") && (++i_, true));
    if (!is_name("in")) return error("expected 'in' in for loop");
    ++i_;
    TANDEM_ASSIGN_OR_RETURN(s->expr, parse_or());  // no conditional: `if` filters the loop
    if (is_name("if")) {
      ++i_;
      TANDEM_ASSIGN_OR_RETURN(s->filter, parse_or());
    }
    if (is_name("recursive")) return error("unsupported 'recursive' for loop");
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    std::string end;
    TANDEM_ASSIGN_OR_RETURN(s->body, parse_body({"else", "endfor"}, &end));
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    if (end == "else") {
      TANDEM_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, &end));
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    }
    return s;
  }

  Expected<std::unique_ptr<Stmt>> parse_set(std::unique_ptr<Stmt> s) {
    TANDEM_ASSIGN_OR_RETURN(std::string name, expect_name());
    if (is_op(".")) {
      ++i_;
      TANDEM_ASSIGN_OR_RETURN(s->attr, expect_name());
    }
    s->targets.push_back(name);
    while (is_op(",")) {
      ++i_;
      TANDEM_ASSIGN_OR_RETURN(std::string more, expect_name());
      s->targets.push_back(more);
    }
    if (peek().kind == TK::kStmtClose) {  // block set
      if (s->targets.size() != 1 || !s->attr.empty()) return error("block '{% set %}' takes one plain name");
      ++i_;
      s->kind = Stmt::Kind::kSetBlock;
      std::string end;
      TANDEM_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, &end));
      TANDEM_RETURN_IF_ERROR(expect_stmt_close());
      return s;
    }
    s->kind = Stmt::Kind::kSet;
    TANDEM_RETURN_IF_ERROR(expect_op("="));
    TANDEM_ASSIGN_OR_RETURN(s->expr, parse_tuple_or_expression());
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    return s;
  }

  Expected<std::unique_ptr<Stmt>> parse_macro(std::unique_ptr<Stmt> s) {
    s->kind = Stmt::Kind::kMacro;
    TANDEM_ASSIGN_OR_RETURN(s->macro_name, expect_name());
    TANDEM_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      TANDEM_ASSIGN_OR_RETURN(std::string p, expect_name());
      ExprPtr def;
      if (is_op("=")) {
        ++i_;
        TANDEM_ASSIGN_OR_RETURN(def, parse_expression());
      }
      s->params.emplace_back(p, std::move(def));
      if (!is_op(",")) break;
      ++i_;
    }
    TANDEM_RETURN_IF_ERROR(expect_op(")"));
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    std::string end;
    TANDEM_ASSIGN_OR_RETURN(s->body, parse_body({"endmacro"}, &end));
    TANDEM_RETURN_IF_ERROR(expect_stmt_close());
    return s;
  }

  // ---- expressions ----
  ExprPtr make(Expr::Kind k, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line;
    return e;
  }

  Expected<ExprPtr> parse_tuple_or_expression() {
    int line = peek().line;
    TANDEM_ASSIGN_OR_RETURN(ExprPtr first, parse_expression());
    if (!is_op(",")) return first;
    auto tuple = make(Expr::Kind::kTuple, line);
    tuple->children.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      if (peek().kind == TK::kStmtClose || peek().kind == TK::kExprClose) break;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      tuple->children.push_back(std::move(e));
    }
    return tuple;
  }

  // Bounds recursion on hostile input (e.g. thousands of nested parentheses).
  struct DepthGuard {
    int& depth;
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
  };
  static constexpr int kMaxDepth = 200;

  Expected<ExprPtr> parse_expression() {
    DepthGuard guard(depth_);
    if (depth_ > kMaxDepth) return error("expression nested too deeply");
    int line = peek().line;
    TANDEM_ASSIGN_OR_RETURN(ExprPtr value, parse_or());
    while (is_name("if")) {
      ++i_;
      auto cond = make(Expr::Kind::kCond, line);
      TANDEM_ASSIGN_OR_RETURN(ExprPtr test, parse_or());
      ExprPtr otherwise;
      if (is_name("else")) {
        ++i_;
        TANDEM_ASSIGN_OR_RETURN(otherwise, parse_expression());
      }
      cond->children.push_back(std::move(value));
      cond->children.push_back(std::move(test));
      cond->children.push_back(std::move(otherwise));
      value = std::move(cond);
    }
    return value;
  }

  Expected<ExprPtr> binary(const std::string& op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(Expr::Kind::kBinary, line);
    e->name = op;
    e->children.push_back(std::move(l));
    e->children.push_back(std::move(r));
    return e;
  }

  Expected<ExprPtr> parse_or() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_and());
    while (is_name("or")) {
      int line = next().line;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_and());
      TANDEM_ASSIGN_OR_RETURN(l, binary("or", std::move(l), std::move(r), line));
    }
    return l;
  }

  Expected<ExprPtr> parse_and() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_not());
    while (is_name("and")) {
      int line = next().line;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_not());
      TANDEM_ASSIGN_OR_RETURN(l, binary("and", std::move(l), std::move(r), line));
    }
    return l;
  }

  Expected<ExprPtr> parse_not() {
    DepthGuard guard(depth_);
    if (depth_ > kMaxDepth) return error("expression nested too deeply");
    if (is_name("not")) {
      int line = next().line;
      auto e = make(Expr::Kind::kUnary, line);
      e->name = "not";
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, parse_not());
      e->children.push_back(std::move(operand));
      return e;
    }
    return parse_compare();
  }

  Expected<ExprPtr> parse_compare() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_math1());
    while (true) {
      std::string op;
      int line = peek().line;
      if (peek().kind == TK::kOp &&
          (is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">="))) {
        op = next().text;
      } else if (is_name("in")) {
        ++i_;
        op = "in";
      } else if (is_name("not") && is_name("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return l;
      }
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_math1());
      TANDEM_ASSIGN_OR_RETURN(l, binary(op, std::move(l), std::move(r), line));
    }
  }

  Expected<ExprPtr> parse_math1() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_concat());
    while (is_op("+") || is_op("-")) {
      const Token& op = next();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_concat());
      TANDEM_ASSIGN_OR_RETURN(l, binary(op.text, std::move(l), std::move(r), op.line));
    }
    return l;
  }

  Expected<ExprPtr> parse_concat() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_math2());
    while (is_op("~")) {
      int line = next().line;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_math2());
      TANDEM_ASSIGN_OR_RETURN(l, binary("~", std::move(l), std::move(r), line));
    }
    return l;
  }

  Expected<ExprPtr> parse_math2() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_pow());
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const Token& op = next();
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_pow());
      TANDEM_ASSIGN_OR_RETURN(l, binary(op.text, std::move(l), std::move(r), op.line));
    }
    return l;
  }

  Expected<ExprPtr> parse_pow() {
    TANDEM_ASSIGN_OR_RETURN(ExprPtr l, parse_unary());
    while (is_op("**")) {
      int line = next().line;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr r, parse_unary());
      TANDEM_ASSIGN_OR_RETURN(l, binary("**", std::move(l), std::move(r), line));
    }
    return l;
  }

  // Jinja2: a unary minus binds tighter than filters, so `-3 | abs` is 3.
  Expected<ExprPtr> parse_unary(bool with_filters = true) {
    DepthGuard guard(depth_);
    if (depth_ > kMaxDepth) return error("expression nested too deeply");
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      const Token& op = next();
      e = make(Expr::Kind::kUnary, op.line);
      e->name = op.text;
      TANDEM_ASSIGN_OR_RETURN(ExprPtr operand, parse_unary(false));
      e->children.push_back(std::move(operand));
    } else {
      TANDEM_ASSIGN_OR_RETURN(e, parse_primary());
      TANDEM_ASSIGN_OR_RETURN(e, parse_postfix(std::move(e)));
    }
    if (!with_filters) return e;
    return parse_filters_and_tests(std::move(e));
  }

  Status parse_call_args(Expr& call) {
    TANDEM_RETURN_IF_ERROR(expect_op("("));
    while (!is_op(")")) {
      if (peek().kind == TK::kName && is_op("=", 1)) {
        std::string key = next().text;
        ++i_;
        TANDEM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.kwargs.emplace_back(key, std::move(v));
      } else {
        if (!call.kwargs.empty()) return error("positional argument after keyword argument");
        TANDEM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.children.push_back(std::move(v));
      }
      if (!is_op(",")) break;
      ++i_;
    }
    return expect_op(")");
  }

  Expected<ExprPtr> parse_postfix(ExprPtr e) {
    while (true) {
      int line = peek().line;
      if (is_op(".")) {
        ++i_;
        auto g = make(Expr::Kind::kGetAttr, line);
        if (peek().kind == TK::kInt) {
          g->kind = Expr::Kind::kGetItem;
          auto idx = make(Expr::Kind::kLiteral, line);
          idx->literal = Value(next().int_value);
          g->children.push_back(std::move(e));
          g->children.push_back(std::move(idx));
        } else {
          TANDEM_ASSIGN_OR_RETURN(g->name, expect_name());
          g->children.push_back(std::move(e));
        }
        e = std::move(g);
      } else if (is_op("[")) {
        ++i_;
        ExprPtr parts[3];
        int n = 0;
        bool slice = false;
        while (true) {
          if (!is_op(":") && !is_op("]")) {
            TANDEM_ASSIGN_OR_RETURN(parts[n], parse_expression());
          }
          if (is_op(":")) {
            if (n == 2) return error("too many ':' in slice");
            slice = true;
            ++n;
            ++i_;
            continue;
          }
          break;
        }
        TANDEM_RETURN_IF_ERROR(expect_op("]"));
        auto g = make(slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, line);
        g->children.push_back(std::move(e));
        if (slice) {
          for (auto& p : parts) g->children.push_back(std::move(p));
        } else {
          if (!parts[0]) return error("empty subscript '[]'");
          g->children.push_back(std::move(parts[0]));
        }
        e = std::move(g);
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::kCall, line);
        c->children.push_back(std::move(e));
        TANDEM_RETURN_IF_ERROR(parse_call_args(*c));
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  Expected<ExprPtr> parse_filters_and_tests(ExprPtr e) {
    while (true) {
      int line = peek().line;
      if (is_op("|")) {
        ++i_;
        auto f = make(Expr::Kind::kFilter, line);
        TANDEM_ASSIGN_OR_RETURN(f->name, expect_name());
        f->children.push_back(std::move(e));
        if (is_op("(")) TANDEM_RETURN_IF_ERROR(parse_call_args(*f));
        e = std::move(f);
      } else if (is_name("is")) {
        ++i_;
        auto t = make(Expr::Kind::kTest, line);
        if (is_name("not")) {
          ++i_;
          t->negated = true;
        }
        bool comparison =
            is_op("==") || is_op("!=") || is_op("<") || is_op(">") || is_op("<=") || is_op(">=");
        if (peek().kind == TK::kName || comparison) {
          t->name = next().text;
        } else {
          return error("expected a test name after 'is'");
        }
        t->children.push_back(std::move(e));
        if (is_op("(")) {
          TANDEM_RETURN_IF_ERROR(parse_call_args(*t));
        } else if (peek().kind == TK::kString || peek().kind == TK::kInt || peek().kind == TK::kFloat ||
                   (peek().kind == TK::kName && !is_name("and") && !is_name("or") && !is_name("else") &&
                    !is_name("if") && !is_name("in") && !is_name("not") && !is_name("is"))) {
          TANDEM_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
          t->children.push_back(std::move(arg));
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }

  Expected<ExprPtr> parse_primary() {
    const Token& tok = peek();
    int line = tok.line;
    switch (tok.kind) {
      case TK::kString: {
        std::string s = next().text;
        while (peek().kind == TK::kString) s += next().text;  // adjacent literals concatenate
        auto e = make(Expr::Kind::kLiteral, line);
        e->literal = Value(std::move(s));
        return e;
      }
      case TK::kInt: {
        auto e = make(Expr::Kind::kLiteral, line);
        e->literal = Value(next().int_value);
        return e;
      }
      case TK::kFloat: {
        auto e = make(Expr::Kind::kLiteral, line);
        e->literal = Value(next().float_value);
        return e;
      }
      case TK::kName: {
        std::string n = next().text;
        auto e = make(Expr::Kind::kLiteral, line);
        if (n == "true" || n == "True") {
          e->literal = Value(true);
        } else if (n == "false" || n == "False") {
          e->literal = Value(false);
        } else if (n == "none" || n == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::kName;
          e->name = n;
        }
        return e;
      }
      case TK::kOp:
        if (tok.text == "(") {
          ++i_;
          if (is_op(")")) {
            ++i_;
            return make(Expr::Kind::kTuple, line);
          }
          TANDEM_ASSIGN_OR_RETURN(ExprPtr inner, parse_expression());
          if (is_op(",")) {
            auto tuple = make(Expr::Kind::kTuple, line);
            tuple->children.push_back(std::move(inner));
            while (is_op(",")) {
              ++i_;
              if (is_op(")")) break;
              TANDEM_ASSIGN_OR_RETURN(ExprPtr more, parse_expression());
              tuple->children.push_back(std::move(more));
            }
            inner = std::move(tuple);
          }
          TANDEM_RETURN_IF_ERROR(expect_op(")"));
          return inner;
        }
        if (tok.text == "[") {
          ++i_;
          auto list = make(Expr::Kind::kList, line);
          while (!is_op("]")) {
            TANDEM_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
            list->children.push_back(std::move(item));
            if (!is_op(",")) break;
            ++i_;
          }
          TANDEM_RETURN_IF_ERROR(expect_op("]"));
          return list;
        }
        if (tok.text == "{") {
          ++i_;
          auto dict = make(Expr::Kind::kDict, line);
          while (!is_op("}")) {
            TANDEM_ASSIGN_OR_RETURN(ExprPtr key, parse_expression());
            TANDEM_RETURN_IF_ERROR(expect_op(":"));
            TANDEM_ASSIGN_OR_RETURN(ExprPtr value, parse_expression());
            dict->children.push_back(std::move(key));
            dict->children.push_back(std::move(value));
            if (!is_op(",")) break;
            ++i_;
          }
          TANDEM_RETURN_IF_ERROR(expect_op("}"));
          return dict;
        }
        break;
      default:
        break;
    }
    return error("unexpected " + describe(tok) + " in expression");
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Expected<std::shared_ptr<const Template>> parse_template(const std::string& source,
                                                         const LexOptions& options) {
  auto tokens = lex_template(source, options);
  if (!tokens.ok()) return tokens.status();
  return Parser(std::move(tokens).value()).run();
}

}  // namespace tandem::tok::jinja
