// JSON Schema `pattern` (an ECMA-262 regular expression) -> a GBNF expression
// for the characters of a JSON string (json_schema.h). Supported: literals,
// escapes \d \w \s \D \W \S \. \- etc., classes [...] with ranges and ^, `.`,
// groups ( ) and (?: ), alternation, quantifiers * + ? {m} {m,} {m,n} (a lazy
// `?` after them is accepted: it changes matching, not the language), and the
// anchors ^ and $ at the ends. An unanchored side may be any text, as JSON
// Schema's unanchored match means. What the regex produces is emitted as JSON
// string text: `"` and `\` as their escapes; classes never produce control
// characters (a JSON string needs them escaped), and \s stands for a space.
#include <algorithm>
#include <cctype>

#include "grammar/json_schema.h"

namespace tandem::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;

struct PatternFail {
  std::string message;
};

Ranges normalize(Ranges r) {
  std::sort(r.begin(), r.end());
  Ranges out;
  for (const auto& x : r) {
    if (!out.empty() && x.first <= out.back().second + 1) {
      out.back().second = std::max(out.back().second, x.second);
    } else {
      out.push_back(x);
    }
  }
  return out;
}

// Within the printable range a JSON string holds unescaped, without " and \.
Ranges complement(const Ranges& r) {
  const Ranges universe = {{0x20, 0x21}, {0x23, 0x5b}, {0x5d, 0x10ffff}};
  Ranges out;
  for (auto [lo, hi] : universe) {
    uint32_t next = lo;
    for (const auto& [a, b] : normalize(r)) {
      if (b < next || a > hi) continue;
      if (a > next) out.emplace_back(next, a - 1);
      next = std::max(next, b + 1);
    }
    if (next <= hi) out.emplace_back(next, hi);
  }
  return out;
}

Ranges printable(const Ranges& r) { return complement(complement(r)); }

std::string hex8(uint32_t cp) {
  static const char* kHex = "0123456789abcdef";
  std::string s = "\\U";
  for (int i = 7; i >= 0; --i) s += kHex[(cp >> (4 * i)) & 15];
  return s;
}

// A class as GBNF; " and \ (not producible unescaped) become their escapes.
std::string class_gbnf(const Ranges& ranges) {
  const Ranges r = normalize(ranges);
  bool quote = false, backslash = false;
  for (const auto& [a, b] : r) {
    quote = quote || (a <= '"' && '"' <= b);
    backslash = backslash || (a <= '\\' && '\\' <= b);
  }
  const Ranges p = printable(r);
  std::string out;
  if (!p.empty()) {
    out = "[";
    for (const auto& [a, b] : p) out += a == b ? hex8(a) : hex8(a) + "-" + hex8(b);
    out += "]";
  }
  auto add = [&](const std::string& alt) { out += (out.empty() ? "" : " | ") + alt; };
  if (quote) add(R"("\\\"")");
  if (backslash) add(R"("\\\\")");
  if (out.empty()) throw PatternFail{"a character class that matches no JSON string character"};
  return "( " + out + " )";
}

class PatternParser {
 public:
  explicit PatternParser(const std::string& p) : p_(p) {}

  std::string run() {
    bool anchored_start = false, anchored_end = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      anchored_start = true;
      ++i_;
    }
    std::string body = alternation();
    if (i_ < p_.size() && p_[i_] == '$') {
      anchored_end = true;
      ++i_;
    }
    if (i_ != p_.size()) fail(std::string("unexpected '") + p_[i_] + "'");
    const std::string any = "json-char*";
    return (anchored_start ? "" : any + " ") + "( " + body + " )" + (anchored_end ? "" : " " + any);
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw PatternFail{why + " at offset " + std::to_string(i_)};
  }

  bool at(char c) const { return i_ < p_.size() && p_[i_] == c; }

  std::string alternation() {
    std::string out = sequence();
    while (at('|')) {
      ++i_;
      out += " | " + sequence();
    }
    return out;
  }

  std::string sequence() {
    std::string out;
    while (i_ < p_.size() && !at('|') && !at(')') && !(at('$') && i_ + 1 == p_.size())) {
      std::string item = atom();
      item = quantified(item);
      out += (out.empty() ? "" : " ") + item;
    }
    return out.empty() ? "\"\"" : out;
  }

  uint32_t utf8_at() {
    const auto b0 = static_cast<unsigned char>(p_[i_++]);
    if (b0 < 0x80) return b0;
    const int n = b0 >= 0xf0 ? 3 : b0 >= 0xe0 ? 2 : 1;
    uint32_t cp = b0 & (0x3f >> n);
    for (int k = 0; k < n && i_ < p_.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(p_[i_++]) & 0x3f);
    return cp;
  }

  // After a backslash: a class escape (sets `ranges`) or one code point.
  bool escape(Ranges& ranges, uint32_t& cp) {
    if (i_ >= p_.size()) fail("a pattern ends with '\\'");
    const char c = p_[i_++];
    const Ranges digit = {{'0', '9'}}, word = {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}},
                 space = {{' ', ' '}};
    switch (c) {
      case 'd':
        ranges = digit;
        return true;
      case 'D':
        ranges = complement(digit);
        return true;
      case 'w':
        ranges = word;
        return true;
      case 'W':
        ranges = complement(word);
        return true;
      case 's':
        ranges = space;
        return true;
      case 'S':
        ranges = complement(space);
        return true;
      case 'b':
      case 'B':
        fail("word boundaries (\\b) are not supported");
      case 'n':
      case 'r':
      case 't':
      case 'f':
      case 'v':
        fail("control characters cannot appear unescaped in a JSON string");
      case 'u': {
        uint32_t v = 0;
        for (int k = 0; k < 4; ++k) {
          if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) fail("bad \\u escape");
          const char h = static_cast<char>(std::tolower(static_cast<unsigned char>(p_[i_++])));
          v = v * 16 + static_cast<uint32_t>(h <= '9' ? h - '0' : h - 'a' + 10);
        }
        cp = v;
        return false;
      }
      default:
        if (std::isdigit(static_cast<unsigned char>(c))) fail("back-references are not supported");
        if (std::isalnum(static_cast<unsigned char>(c))) fail(std::string("unknown escape '\\") + c + "'");
        cp = static_cast<unsigned char>(c);
        return false;
    }
  }

  std::string char_class() {
    ++i_;  // [
    bool negate = false;
    if (at('^')) {
      negate = true;
      ++i_;
    }
    Ranges r;
    bool first = true;
    while (i_ < p_.size() && (!at(']') || first)) {
      first = false;
      Ranges esc;
      uint32_t lo = 0;
      if (at('\\')) {
        ++i_;
        if (escape(esc, lo)) {
          r.insert(r.end(), esc.begin(), esc.end());
          continue;
        }
      } else {
        lo = utf8_at();
      }
      uint32_t hi = lo;
      if (at('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        if (at('\\')) {
          ++i_;
          if (escape(esc, hi)) fail("a class escape cannot end a range");
        } else {
          hi = utf8_at();
        }
        if (hi < lo) fail("a reversed range in a character class");
      }
      r.emplace_back(lo, hi);
    }
    if (!at(']')) fail("unterminated character class");
    ++i_;
    return class_gbnf(negate ? complement(r) : r);
  }

  std::string atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (at('?')) {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          fail("lookarounds and named groups are not supported");
        }
      }
      std::string inner = alternation();
      if (!at(')')) fail("missing ')'");
      ++i_;
      return "( " + inner + " )";
    }
    if (c == '[') return char_class();
    if (c == '.') {
      ++i_;
      return "json-char-plain";
    }
    if (c == '*' || c == '+' || c == '?' || c == '{')
      fail(std::string("nothing to repeat before '") + c + "'");
    if (c == '^' || c == '$') fail("anchors are supported only at the ends of the pattern");
    Ranges esc;
    uint32_t cp = 0;
    if (c == '\\') {
      ++i_;
      if (escape(esc, cp)) return class_gbnf(esc);
    } else {
      cp = utf8_at();
    }
    if (cp < 0x20) fail("control characters cannot appear unescaped in a JSON string");
    return class_gbnf({{cp, cp}});
  }

  int number() {
    int v = 0;
    const size_t start = i_;
    while (i_ < p_.size() && std::isdigit(static_cast<unsigned char>(p_[i_]))) {
      v = v * 10 + (p_[i_++] - '0');
      if (v > 1000) fail("a repetition bound above 1000");
    }
    if (i_ == start) fail("a number expected in {m,n}");
    return v;
  }

  std::string quantified(const std::string& item) {
    if (i_ >= p_.size()) return item;
    std::string q;
    const char c = p_[i_];
    if (c == '*' || c == '+' || c == '?') {
      q = std::string(1, c);
      ++i_;
    } else if (c == '{') {
      ++i_;
      const int lo = number();
      int hi = lo;
      bool open = false;
      if (at(',')) {
        ++i_;
        if (at('}')) {
          open = true;
        } else {
          hi = number();
        }
      }
      if (!at('}')) fail("missing '}'");
      ++i_;
      if (!open && hi < lo) fail("{m,n} with n < m");
      q = "{" + std::to_string(lo) + (open ? "," : lo == hi ? "" : "," + std::to_string(hi)) + "}";
    } else {
      return item;
    }
    if (at('?')) ++i_;  // lazy: the same language
    return "( " + item + " )" + q;
  }

  const std::string& p_;
  size_t i_ = 0;
};

}  // namespace

Expected<std::string> pattern_to_gbnf(const std::string& pattern) {
  try {
    return PatternParser(pattern).run();
  } catch (const PatternFail& e) {
    return invalid_argument(e.message);
  }
}

}  // namespace tandem::grammar
