#include <cstring>

#include "jinja_ast.h"

namespace tandem::tok::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  Lexer(const std::string& src, const LexOptions& o) : src_(src), opt_(o) {
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();  // Jinja drops one trailing newline
    if (!src_.empty() && src_.back() == '\r') src_.pop_back();
  }

  Expected<std::vector<Token>> run() {
    size_t pos = 0;
    while (pos < src_.size()) {
      size_t open = find_open(pos);
      std::string text = src_.substr(pos, open - pos);
      if (open == src_.size()) {
        emit_text(std::move(text), pos);
        break;
      }
      char kind = src_[open + 1];  // '{', '%' or '#'
      char modifier = open + 2 < src_.size() ? src_[open + 2] : '\0';
      if (modifier == '-') {
        size_t e = text.size();
        while (e > 0 && is_space(text[e - 1])) --e;
        text.resize(e);
      } else if (opt_.lstrip_blocks && kind != '{' && modifier != '+') {
        size_t e = text.size();
        while (e > 0 && (text[e - 1] == ' ' || text[e - 1] == '\t')) --e;
        size_t src_index = pos + e;  // where the whitespace run starts in the source
        if (src_index == 0 || src_[src_index - 1] == '\n') text.resize(e);
      }
      emit_text(std::move(text), pos);
      size_t inner = open + 2 + ((modifier == '-' || modifier == '+') ? 1 : 0);
      size_t after;
      if (kind == '#') {
        size_t close = src_.find("#}", inner);
        if (close == std::string::npos) return error(open, "unterminated comment '{#'");
        bool strip = close > inner && src_[close - 1] == '-';
        bool keep = close > inner && src_[close - 1] == '+';
        after = close + 2;
        after = finish_tag(after, strip, !keep && opt_.trim_blocks);
      } else {
        auto r = lex_tag(kind == '{', inner, open);
        if (!r.ok()) return r.status();
        after = *r;
      }
      pos = after;
    }
    tokens_.push_back({Token::Kind::kEof, "", line_at(src_.size())});
    return std::move(tokens_);
  }

 private:
  size_t find_open(size_t pos) const {
    while (true) {
      size_t p = src_.find('{', pos);
      if (p == std::string::npos || p + 1 >= src_.size()) return src_.size();
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      pos = p + 1;
    }
  }

  int line_at(size_t offset) {
    if (offset < line_pos_) {
      line_ = 1;
      line_pos_ = 0;
    }
    while (line_pos_ < offset && line_pos_ < src_.size()) {
      if (src_[line_pos_] == '\n') ++line_;
      ++line_pos_;
    }
    return line_;
  }

  void emit_text(std::string text, size_t pos) {
    if (!text.empty()) tokens_.push_back({Token::Kind::kText, std::move(text), line_at(pos)});
  }

  Status error(size_t offset, const std::string& what) {
    return invalid_argument("template line " + std::to_string(line_at(offset)) + ": " + what);
  }

  // Skips whitespace after a tag for '-', or one newline for trim_blocks.
  size_t finish_tag(size_t after, bool strip, bool trim) {
    if (strip) {
      while (after < src_.size() && is_space(src_[after])) ++after;
    } else if (trim) {
      if (after < src_.size() && src_[after] == '\n')
        ++after;
      else if (after + 1 < src_.size() && src_[after] == '\r' && src_[after + 1] == '\n')
        after += 2;
    }
    return after;
  }

  Expected<size_t> lex_tag(bool is_expr, size_t pos, size_t open) {
    const char* close = is_expr ? "}}" : "%}";
    tokens_.push_back({is_expr ? Token::Kind::kExprOpen : Token::Kind::kStmtOpen, "", line_at(open)});
    int depth = 0;
    while (true) {
      while (pos < src_.size() && is_space(src_[pos])) ++pos;
      if (pos >= src_.size())
        return error(open, std::string("unterminated tag '") + (is_expr ? "{{" : "{%") + "'");
      char c = src_[pos];
      int line = line_at(pos);
      // Closers: "}}"/"%}", optionally preceded by '-' or '+'.
      if (depth == 0) {
        bool mod = (c == '-' || c == '+') && src_.compare(pos + 1, 2, close) == 0;
        if (mod || src_.compare(pos, 2, close) == 0) {
          size_t after = pos + (mod ? 3 : 2);
          tokens_.push_back({is_expr ? Token::Kind::kExprClose : Token::Kind::kStmtClose, "", line});
          bool strip = mod && c == '-', keep = mod && c == '+';
          return finish_tag(after, strip, !is_expr && !keep && opt_.trim_blocks);
        }
      }
      if (is_name_start(c)) {
        size_t e = pos;
        while (e < src_.size() && (is_name_start(src_[e]) || is_digit(src_[e]))) ++e;
        tokens_.push_back({Token::Kind::kName, src_.substr(pos, e - pos), line});
        pos = e;
      } else if (is_digit(c)) {
        size_t e = pos;
        while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        bool is_float = false;
        if (e + 1 < src_.size() && src_[e] == '.' && is_digit(src_[e + 1])) {
          is_float = true;
          ++e;
          while (e < src_.size() && (is_digit(src_[e]) || src_[e] == '_')) ++e;
        }
        if (e < src_.size() && (src_[e] == 'e' || src_[e] == 'E')) {  // exponent
          size_t x = e + 1;
          if (x < src_.size() && (src_[x] == '+' || src_[x] == '-')) ++x;
          if (x < src_.size() && is_digit(src_[x])) {
            is_float = true;
            e = x;
            while (e < src_.size() && is_digit(src_[e])) ++e;
          }
        }
        std::string num = src_.substr(pos, e - pos);
        std::string clean;
        for (char d : num)
          if (d != '_') clean.push_back(d);
        Token t{is_float ? Token::Kind::kFloat : Token::Kind::kInt, num, line};
        if (is_float)
          t.float_value = std::strtod(clean.c_str(), nullptr);
        else
          t.int_value = std::strtoll(clean.c_str(), nullptr, 10);
        tokens_.push_back(t);
        pos = e;
      } else if (c == '\'' || c == '"') {
        auto r = lex_string(pos);
        if (!r.ok()) return r.status();
        pos = *r;
      } else {
        static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<",
                                     ">",  "=",  "(",  ")",  "[",  "]",  "{", "}", ".", ",", ":", "|"};
        const char* op = nullptr;
        for (const char* o : kOps)
          if (src_.compare(pos, std::strlen(o), o) == 0) {
            op = o;
            break;
          }
        if (!op) return error(pos, std::string("unexpected character '") + c + "' in tag");
        if (*op == '{' || *op == '[' || *op == '(') ++depth;
        if ((*op == '}' || *op == ']' || *op == ')') && depth > 0) --depth;
        tokens_.push_back({Token::Kind::kOp, op, line});
        pos += std::strlen(op);
      }
    }
  }

  Expected<size_t> lex_string(size_t pos) {
    char q = src_[pos];
    int line = line_at(pos);
    std::string out;
    size_t i = pos + 1;
    while (i < src_.size() && src_[i] != q) {
      char c = src_[i];
      if (c == '\\' && i + 1 < src_.size()) {
        char e = src_[i + 1];
        switch (e) {
          case 'n':
            out.push_back('\n');
            break;
          case 't':
            out.push_back('\t');
            break;
          case 'r':
            out.push_back('\r');
            break;
          case 'b':
            out.push_back('\b');
            break;
          case 'f':
            out.push_back('\f');
            break;
          case '\\':
            out.push_back('\\');
            break;
          case '\'':
            out.push_back('\'');
            break;
          case '"':
            out.push_back('"');
            break;
          case '\n':
            break;
          default:
            out.push_back('\\');
            out.push_back(e);
        }
        i += 2;
        continue;
      }
      out.push_back(c);
      ++i;
    }
    if (i >= src_.size()) return error(pos, "unterminated string literal");
    tokens_.push_back({Token::Kind::kString, std::move(out), line});
    return i + 1;
  }

  std::string src_;
  LexOptions opt_;
  std::vector<Token> tokens_;
  int line_ = 1;
  size_t line_pos_ = 0;
};

}  // namespace

Expected<std::vector<Token>> lex_template(const std::string& source, const LexOptions& options) {
  return Lexer(source, options).run();
}

}  // namespace tandem::tok::jinja
