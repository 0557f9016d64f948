// GBNF text -> Grammar (grammar.h has the dialect).
#include <algorithm>
#include <cctype>

#include "grammar/grammar.h"

namespace tandem::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

struct ParseError {
  std::string message;
};

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xc0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xe0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (cp & 0x3f));
  }
}

std::string hex8(uint32_t v) {
  static constexpr char kDigits[] = "0123456789ABCDEF";
  std::string out(8, '0');
  for (int k = 7; k >= 0; --k, v >>= 4) out[static_cast<size_t>(k)] = kDigits[v & 0xf];
  return out;
}

bool surrogate(uint32_t cp) { return cp >= 0xd800 && cp <= 0xdfff; }

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_'; }

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : s_(text) {}

  Expected<Grammar> run() {
    try {
      skip_space();
      if (i_ >= s_.size()) fail("the grammar is empty");
      while (i_ < s_.size()) parse_rule();
    } catch (const ParseError& e) {
      return invalid_argument("grammar line " + std::to_string(line_) + ": " + e.message);
    }
    return b_.finish("root");
  }

 private:
  [[noreturn]] void fail(const std::string& message) { throw ParseError{message}; }

  void skip_space() {
    while (i_ < s_.size()) {
      const char c = s_[i_];
      if (c == '#') {
        while (i_ < s_.size() && s_[i_] != '\n') ++i_;
      } else if (c == '\n') {
        ++line_;
        ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = i_;
    while (i_ < s_.size() && name_char(s_[i_])) ++i_;
    if (i_ == start) fail(std::string("expected a rule name, found '") + s_[i_] + "'");
    return std::string(s_.substr(start, i_ - start));
  }

  // At "name ::=" (the start of the next rule)?
  bool at_rule_start() {
    const size_t save = i_;
    const int save_line = line_;
    size_t j = i_;
    while (j < s_.size() && name_char(s_[j])) ++j;
    bool yes = false;
    if (j > i_) {
      i_ = j;
      skip_space();
      yes = s_.substr(i_, 3) == "::=";
    }
    i_ = save;
    line_ = save_line;
    return yes;
  }

  void parse_rule() {
    const std::string name = parse_name();
    skip_space();
    if (s_.substr(i_, 3) != "::=") fail("expected '::=' after '" + name + "'");
    i_ += 3;
    const int32_t rule = b_.rule(name);
    if (b_.defined(rule)) fail("rule '" + name + "' is defined twice");
    parse_alternatives(rule, false);
  }

  void parse_alternatives(int32_t rule, bool nested) {
    for (;;) {
      b_.add_alternative(rule, parse_sequence(nested));
      skip_space();
      if (i_ < s_.size() && s_[i_] == '|') {
        ++i_;
        continue;
      }
      return;
    }
  }

  Sequence parse_sequence(bool nested) {
    Sequence seq;
    for (;;) {
      skip_space();
      if (i_ >= s_.size()) break;
      const char c = s_[i_];
      if (c == '|' || (c == ')' && nested)) break;
      if (c == ')') fail("unbalanced ')'");
      if (name_char(c) && at_rule_start()) {
        if (nested) fail("missing ')' before the next rule");
        break;
      }
      const size_t item_start = seq.symbols.size();
      parse_item(seq);
      parse_postfix(seq, item_start);
    }
    return seq;
  }

  void parse_item(Sequence& seq) {
    const char c = s_[i_];
    if (c == '"') {
      ++i_;
      std::string bytes;
      while (i_ < s_.size() && s_[i_] != '"') {
        if (s_[i_] == '\n') fail("unterminated string literal");
        if (s_[i_] == '\\') {
          const uint32_t cp = parse_escape();
          // UTF-8 has no form for U+D800..U+DFFF: its bytes would force text that is not UTF-8.
          if (surrogate(cp)) fail("escape \\u" + hex8(cp).substr(4) + " is a surrogate, not a character");
          append_utf8(bytes, cp);
        } else {
          bytes += s_[i_++];
        }
      }
      if (i_ >= s_.size()) fail("unterminated string literal");
      ++i_;
      b_.push_literal(seq, bytes);
    } else if (c == '[') {
      parse_class(seq);
    } else if (c == '.') {
      ++i_;
      b_.push_codepoint_class(seq, {{0, 0x10ffff}}, "any");
    } else if (c == '(') {
      ++i_;
      const int32_t group = b_.fresh_rule("group");
      parse_alternatives(group, true);
      if (i_ >= s_.size() || s_[i_] != ')') fail("missing ')'");
      ++i_;
      seq.symbols.push_back(Grammar::rule_symbol(group));
    } else if (name_char(c)) {
      seq.symbols.push_back(Grammar::rule_symbol(b_.rule(parse_name())));
    } else {
      fail(std::string("unexpected character '") + c + "'");
    }
  }

  uint32_t parse_hex(int digits) {
    uint32_t v = 0;
    for (int k = 0; k < digits; ++k) {
      if (i_ >= s_.size() || !std::isxdigit(static_cast<unsigned char>(s_[i_])))
        fail("expected " + std::to_string(digits) + " hex digits in an escape");
      const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(s_[i_++])));
      v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
    }
    return v;
  }

  uint32_t parse_escape() {
    ++i_;  // the backslash
    if (i_ >= s_.size()) fail("a '\\' ends the grammar");
    const char c = s_[i_++];
    switch (c) {
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case '\\':
      case '"':
      case '[':
      case ']':
      case '-':
      case '/':
      case '^':
        return static_cast<unsigned char>(c);
      case 'x':
        return parse_hex(2);
      case 'u':
        return parse_hex(4);
      case 'U': {
        const uint32_t cp = parse_hex(8);
        if (cp > 0x10ffff) fail("escape \\U" + hex8(cp) + " is beyond U+10FFFF, the last code point");
        return cp;
      }
      default:
        fail(std::string("unknown escape '\\") + c + "'");
    }
  }

  // One code point of a class (raw UTF-8 or an escape).
  uint32_t parse_class_char() {
    if (s_[i_] == '\\') return parse_escape();
    const auto b0 = static_cast<unsigned char>(s_[i_++]);
    if (b0 < 0x80) return b0;
    const int n = b0 >= 0xf0 ? 3 : b0 >= 0xe0 ? 2 : 1;
    uint32_t cp = b0 & (0x3f >> n);
    for (int k = 0; k < n && i_ < s_.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s_[i_++]) & 0x3f);
    if (cp > 0x10ffff) fail("a character class holds bytes that are not UTF-8");
    return cp;
  }

  void parse_class(Sequence& seq) {
    ++i_;  // [
    bool negate = false;
    if (i_ < s_.size() && s_[i_] == '^') {
      negate = true;
      ++i_;
    }
    Ranges ranges;
    while (i_ < s_.size() && s_[i_] != ']') {
      if (s_[i_] == '\n') fail("unterminated character class");
      const uint32_t lo = parse_class_char();
      uint32_t hi = lo;
      if (i_ + 1 < s_.size() && s_[i_] == '-' && s_[i_ + 1] != ']') {
        ++i_;
        hi = parse_class_char();
        if (hi < lo) fail("character class range is reversed");
      }
      ranges.emplace_back(lo, hi);
    }
    if (i_ >= s_.size()) fail("unterminated character class");
    ++i_;  // ]
    std::sort(ranges.begin(), ranges.end());
    Ranges merged;
    for (const auto& r : ranges) {
      if (!merged.empty() && r.first <= merged.back().second + 1) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    if (negate) {
      Ranges inverse;
      uint32_t next = 0;
      for (const auto& [lo, hi] : merged) {
        if (lo > next) inverse.emplace_back(next, lo - 1);
        next = hi + 1;
      }
      if (next <= 0x10ffff) inverse.emplace_back(next, 0x10ffff);
      merged = std::move(inverse);
    }
    // Code points UTF-8 can spell: a class of surrogates alone matches no text.
    const bool any_character = std::any_of(
        merged.begin(), merged.end(), [](const auto& r) { return r.first < 0xd800 || r.second > 0xdfff; });
    if (merged.empty() || !any_character) fail("empty character class");
    b_.push_codepoint_class(seq, merged, "class");
  }

  int parse_int() {
    const size_t start = i_;
    long v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_]))) {
      v = v * 10 + (s_[i_++] - '0');
      if (v > kMaxRepetition) fail("repetition bound above " + std::to_string(kMaxRepetition));
    }
    if (i_ == start) fail("expected a number in a repetition");
    return static_cast<int>(v);
  }

  void parse_postfix(Sequence& seq, size_t item_start) {
    if (i_ >= s_.size()) return;
    const char c = s_[i_];
    if (c != '*' && c != '+' && c != '?' && c != '{') return;
    ++i_;
    int lo = 0, hi = -1;  // hi -1: unbounded
    if (c == '+') lo = 1;
    if (c == '?') hi = 1;
    if (c == '{') {
      skip_space();
      lo = parse_int();
      skip_space();
      hi = lo;
      if (i_ < s_.size() && s_[i_] == ',') {
        ++i_;
        skip_space();
        hi = (i_ < s_.size() && s_[i_] == '}') ? -1 : parse_int();
        skip_space();
      }
      if (i_ >= s_.size() || s_[i_] != '}') fail("expected '}' to close a repetition");
      ++i_;
      if (hi >= 0 && hi < lo) fail("repetition {m,n} with n < m");
    }
    // An empty item ("" or ()) repeated is still empty (and has no symbol to repeat).
    if (seq.symbols.size() <= item_start) return;
    // The item as one symbol: a rule holding it unless it is one already.
    int32_t item = seq.symbols.back();
    if (seq.symbols.size() - item_start != 1) {
      const int32_t r = b_.fresh_rule("item");
      b_.add_alternative(r,
                         Sequence{{seq.symbols.begin() + static_cast<long>(item_start), seq.symbols.end()}});
      item = Grammar::rule_symbol(r);
    }
    seq.symbols.resize(item_start);
    repeat(seq, item, lo, hi);
  }

  // item{lo,hi} appended to seq; hi -1 is unbounded.
  void repeat(Sequence& seq, int32_t item, int lo, int hi) {
    for (int k = 0; k < lo; ++k) seq.symbols.push_back(item);
    if (hi < 0) {  // star ::= item star | ""
      const int32_t star = b_.fresh_rule("star");
      b_.add_alternative(star, Sequence{{item, Grammar::rule_symbol(star)}});
      b_.add_alternative(star, Sequence{});
      seq.symbols.push_back(Grammar::rule_symbol(star));
      return;
    }
    if (hi == lo) return;
    int32_t tail = -1;  // opt_k ::= item opt_(k-1) | ""
    for (int k = 0; k < hi - lo; ++k) {
      const int32_t opt = b_.fresh_rule("opt");
      Sequence body{{item}};
      if (tail >= 0) body.symbols.push_back(Grammar::rule_symbol(tail));
      b_.add_alternative(opt, body);
      b_.add_alternative(opt, Sequence{});
      tail = opt;
    }
    seq.symbols.push_back(Grammar::rule_symbol(tail));
  }

  std::string_view s_;
  size_t i_ = 0;
  int line_ = 1;
  GrammarBuilder b_;
};

}  // namespace

Expected<Grammar> parse_gbnf(std::string_view text) { return GbnfParser(text).run(); }

}  // namespace tandem::grammar
