// UTF-8 helpers and the GPT-2 byte<->unicode table used by the ByteLevel
// pre-tokenizer and decoder. Pure functions; thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tandem::tok {

// Length of the UTF-8 sequence starting with lead byte `c` (1 for invalid leads).
inline size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 1;
}

// Appends code point `cp` as UTF-8.
void append_utf8(std::string& out, char32_t cp);

// Decodes the code point at s[i] (assumes valid UTF-8), advancing i.
char32_t next_code_point(std::string_view s, size_t& i);

// True when `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);

// Replaces each maximal ill-formed subsequence with U+FFFD, the policy of
// Rust's String::from_utf8_lossy (which Hugging Face's decoders use).
std::string utf8_lossy(std::string_view s);

// Length of the longest prefix of `s` that does not end inside an incomplete
// (but so far valid) UTF-8 sequence. Used by streaming detokenization.
size_t utf8_complete_prefix(std::string_view s);

// GPT-2 ByteLevel mapping: byte -> printable code point, as UTF-8 text.
const std::array<std::string, 256>& byte_to_unicode();
// Inverse: code point -> byte, or -1 when the code point is not in the table.
int unicode_to_byte(char32_t cp);

// Unicode White_Space property (what Rust's char::is_whitespace tests).
bool is_unicode_whitespace(char32_t cp);

}  // namespace tandem::tok
