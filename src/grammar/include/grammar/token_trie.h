// TokenTrie: a tokenizer's vocabulary as a trie over the bytes each token
// contributes to the output, built once per tokenizer and shared read-only by
// every constrained request (thread-safe after construction).
//
// Nodes are stored in preorder: node i's subtree is [i, subtree_end[i]), so
// a walk that finds a byte rejected skips the whole subtree in one step (see
// token_constraint.h). Tokens with no bytes and special tokens (they end or
// structure a turn; their text is not output) are left out; a grammar can
// never produce them, and the end-of-sequence ids are allowed separately
// where the grammar accepts. The exception is a tool-call marker that is a
// special token (Mistral's [TOOL_CALLS]): the server keeps its text in the
// output it parses, so a trie built for tool calls holds it by that text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace tandem::grammar {

class TokenTrie {
 public:
  // token_bytes[id]: the bytes token `id` outputs; empty: left out.
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  // From a tokenizer: each non-special token's decoded bytes (decode_raw of
  // the token after a reference token, minus the reference's bytes, so that
  // decoders that strip a leading space only at the start of a text do not
  // change a token's bytes).
  // `kept_special` (sorted or not): special tokens held anyway, by their text.
  static TokenTrie from_tokenizer(const tok::Tokenizer& tokenizer,
                                  const std::vector<int32_t>& kept_special = {});

  int32_t vocab_size() const { return static_cast<int32_t>(bytes_.size()); }
  const std::string& bytes(int32_t id) const { return bytes_[id]; }
  size_t node_count() const { return byte_.size(); }
  int32_t max_depth() const { return max_depth_; }

  // Preorder node arrays; node 0 is the root (no byte).
  std::vector<uint8_t> byte_;
  std::vector<uint16_t> depth_;
  std::vector<int32_t> subtree_end_;
  std::vector<int32_t> token_begin_;  // tokens of node i: token_ids_[token_begin_[i] .. token_begin_[i+1])
  std::vector<int32_t> token_ids_;

 private:
  std::vector<std::string> bytes_;
  int32_t max_depth_ = 0;
};

}  // namespace tandem::grammar
