// AddedTokens: the "added_tokens" of tokenizer.json. Finds them in input text
// (leftmost-longest, honouring lstrip/rstrip/single_word) so the encoder can
// keep them whole; non-normalized tokens match the raw text, normalized ones
// the normalized text. Immutable and thread-safe after construction.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tandem::tok {

struct AddedToken {
  int32_t id = -1;
  std::string content;
  bool single_word = false;
  bool lstrip = false;
  bool rstrip = false;
  bool normalized = false;
  bool special = false;
};

// A piece of input: either plain text or one added token.
struct Segment {
  size_t begin, end;  // byte range in the text that was split
  int32_t added_id;   // -1 for plain text
};

class AddedTokenMatcher {
 public:
  AddedTokenMatcher() = default;
  // `tokens` are those to match; `patterns[i]` is the text to look for
  // (the content, or the normalized content for normalized tokens).
  AddedTokenMatcher(const std::vector<const AddedToken*>& tokens, const std::vector<std::string>& patterns);

  bool empty() const { return nodes_.size() <= 1; }
  // Splits `text` into plain and added-token segments covering it.
  void split(std::string_view text, std::vector<Segment>& out) const;

 private:
  struct Node {
    int32_t token = -1;  // index into tokens_ when a pattern ends here
  };
  int32_t child(int32_t node, unsigned char c) const {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | c);
    return it == edges_.end() ? -1 : it->second;
  }
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> edges_;
  std::vector<const AddedToken*> tokens_;
  bool first_byte_[256] = {};
};

}  // namespace tandem::tok
