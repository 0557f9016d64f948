#include "unicode.h"

#include <vector>

namespace tandem::tok {

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

char32_t next_code_point(std::string_view s, size_t& i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t n = utf8_len(c);
  if (i + n > s.size()) n = 1;
  char32_t cp;
  switch (n) {
    case 1:
      cp = c;
      break;
    case 2:
      cp = c & 0x1F;
      break;
    case 3:
      cp = c & 0x0F;
      break;
    default:
      cp = c & 0x07;
      break;
  }
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  i += n;
  return cp;
}

namespace {

// Length of the valid sequence at s[i], or 0 when ill-formed. `*maximal` gets
// the length of the maximal ill-formed prefix (>= 1) when returning 0;
// `*truncated` is set when the sequence is valid so far but cut by the end.
size_t valid_sequence_at(std::string_view s, size_t i, size_t* maximal, bool* truncated) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  unsigned char c = b(0);
  *truncated = false;
  *maximal = 1;
  if (c < 0x80) return 1;
  size_t n;
  unsigned char lo = 0x80, hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (size_t k = 1; k < n; ++k) {
    if (i + k >= s.size()) {
      *truncated = true;
      *maximal = k;
      return 0;
    }
    unsigned char x = b(k);
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (x < l || x > h) {
      *maximal = k;
      return 0;
    }
  }
  return n;
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    size_t maximal;
    bool truncated;
    size_t n = valid_sequence_at(s, i, &maximal, &truncated);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string utf8_lossy(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    size_t maximal;
    bool truncated;
    size_t n = valid_sequence_at(s, i, &maximal, &truncated);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out.append("\xEF\xBF\xBD");
      i += maximal;
    }
  }
  return out;
}

size_t utf8_complete_prefix(std::string_view s) {
  // Only the last (up to) 3 bytes can start an incomplete sequence.
  size_t start = s.size() > 3 ? s.size() - 3 : 0;
  for (size_t i = start; i < s.size(); ++i) {
    auto c = static_cast<unsigned char>(s[i]);
    if (c < 0xC0) continue;
    size_t maximal;
    bool truncated;
    if (valid_sequence_at(s, i, &maximal, &truncated) == 0 && truncated) return i;
  }
  return s.size();
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      char32_t cp = printable ? static_cast<char32_t>(b) : static_cast<char32_t>(256 + n++);
      append_utf8(t[b], cp);
    }
    return t;
  }();
  return table;
}

int unicode_to_byte(char32_t cp) {
  static const std::vector<int> inverse = [] {
    std::vector<int> inv(512, -1);
    const auto& t = byte_to_unicode();
    for (int b = 0; b < 256; ++b) {
      size_t i = 0;
      inv[next_code_point(t[b], i)] = b;
    }
    return inv;
  }();
  return cp < inverse.size() ? inverse[cp] : -1;
}

bool is_unicode_whitespace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

}  // namespace tandem::tok
