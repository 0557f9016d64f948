#include "added_tokens.h"

#include <unicode/uchar.h>

#include "unicode.h"

namespace tandem::tok {

namespace {

bool is_word_char(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  return u_isalnum(static_cast<UChar32>(c));
}

char32_t last_code_point(std::string_view s) {
  size_t i = s.size() - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return next_code_point(s, i);
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(const std::vector<const AddedToken*>& tokens,
                                     const std::vector<std::string>& patterns)
    : tokens_(tokens) {
  nodes_.push_back({});
  for (size_t t = 0; t < tokens.size(); ++t) {
    const std::string& p = patterns[t];
    if (p.empty()) continue;
    first_byte_[static_cast<unsigned char>(p[0])] = true;
    int32_t node = 0;
    for (unsigned char c : p) {
      int32_t next = child(node, c);
      if (next < 0) {
        next = static_cast<int32_t>(nodes_.size());
        nodes_.push_back({});
        edges_[(static_cast<uint64_t>(node) << 8) | c] = next;
      }
      node = next;
    }
    if (nodes_[node].token < 0) nodes_[node].token = static_cast<int32_t>(t);
  }
}

void AddedTokenMatcher::split(std::string_view text, std::vector<Segment>& out) const {
  out.clear();
  size_t start_offset = 0;
  size_t i = 0;
  while (i < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[i])]) {
      ++i;
      continue;
    }
    int32_t node = 0, best = -1;
    size_t best_end = 0;
    for (size_t k = i; k < text.size(); ++k) {
      node = child(node, static_cast<unsigned char>(text[k]));
      if (node < 0) break;
      if (nodes_[node].token >= 0) {
        best = nodes_[node].token;
        best_end = k + 1;
      }
    }
    if (best < 0) {
      ++i;
      continue;
    }
    const AddedToken& tok = *tokens_[best];
    size_t start = i, stop = best_end;
    if (tok.single_word) {
      bool start_ok = start == 0 || !is_word_char(last_code_point(text.substr(0, start)));
      size_t j = stop;
      bool stop_ok = stop == text.size() || !is_word_char(next_code_point(text, j));
      if (!start_ok || !stop_ok) {
        i = best_end;  // the automaton resumes after a rejected match
        continue;
      }
    }
    if (tok.lstrip) {
      size_t s = start;
      while (s > start_offset) {
        size_t p = s - 1;
        while (p > 0 && (static_cast<unsigned char>(text[p]) & 0xC0) == 0x80) --p;
        size_t q = p;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        s = p;
      }
      start = s;
    }
    if (tok.rstrip) {
      while (stop < text.size()) {
        size_t q = stop;
        if (!is_unicode_whitespace(next_code_point(text, q))) break;
        stop = q;
      }
    }
    if (start_offset < start) out.push_back({start_offset, start, -1});
    out.push_back({start, stop, tok.id});
    start_offset = stop;
    i = stop;
  }
  if (start_offset < text.size()) out.push_back({start_offset, text.size(), -1});
}

}  // namespace tandem::tok
