#include "grammar/token_trie.h"

#include <algorithm>
#include <numeric>

namespace tandem::grammar {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes) : bytes_(token_bytes) {
  for (auto& b : bytes_)
    if (b.size() > 65535) b.clear();  // depth is 16 bits; no real token is that long
  std::vector<int32_t> order;
  for (size_t i = 0; i < bytes_.size(); ++i)
    if (!bytes_[i].empty()) order.push_back(static_cast<int32_t>(i));
  std::sort(order.begin(), order.end(),
            [&](int32_t a, int32_t b) { return bytes_[a] != bytes_[b] ? bytes_[a] < bytes_[b] : a < b; });
  // In sorted order every token extends the current path after popping to
  // the common prefix, so nodes come out in preorder.
  std::vector<int32_t> path{0};  // node ids; path[d] at depth d
  byte_.push_back(0);
  depth_.push_back(0);
  subtree_end_.push_back(0);
  token_begin_.push_back(0);
  std::string current;
  auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      subtree_end_[path.back()] = static_cast<int32_t>(byte_.size());
      path.pop_back();
    }
    current.resize(depth);
  };
  for (int32_t id : order) {
    const std::string& s = bytes_[id];
    size_t common = 0;
    while (common < s.size() && common < current.size() && s[common] == current[common]) ++common;
    close_to(common);
    for (size_t d = common; d < s.size(); ++d) {
      byte_.push_back(static_cast<uint8_t>(s[d]));
      depth_.push_back(static_cast<uint16_t>(d + 1));
      subtree_end_.push_back(0);
      token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
      path.push_back(static_cast<int32_t>(byte_.size() - 1));
      current += s[d];
    }
    token_ids_.push_back(id);
    max_depth_ = std::max(max_depth_, static_cast<int32_t>(s.size()));
  }
  close_to(0);
  subtree_end_[0] = static_cast<int32_t>(byte_.size());
  token_begin_.push_back(static_cast<int32_t>(token_ids_.size()));
}

TokenTrie TokenTrie::from_tokenizer(const tok::Tokenizer& tokenizer,
                                    const std::vector<int32_t>& kept_special) {
  const int32_t n = tokenizer.vocab_size();
  std::vector<std::string> bytes(static_cast<size_t>(n));
  // A plain letter as left context; without one, the token alone.
  std::optional<int32_t> ref = tokenizer.token_to_id("a");
  if (ref && tokenizer.is_special(*ref)) ref.reset();
  const std::string ref_bytes = ref ? tokenizer.decode_raw(std::span<const int32_t>(&*ref, 1)) : "";
  for (int32_t id = 0; id < n; ++id) {
    if (!tokenizer.id_to_token(id)) continue;
    if (tokenizer.is_special(id)) {
      if (std::find(kept_special.begin(), kept_special.end(), id) != kept_special.end())
        bytes[id] = *tokenizer.id_to_token(id);
      continue;
    }
    if (ref && !ref_bytes.empty()) {
      const int32_t pair[2] = {*ref, id};
      std::string both = tokenizer.decode_raw(pair);
      if (both.compare(0, ref_bytes.size(), ref_bytes) == 0) {
        bytes[id] = both.substr(ref_bytes.size());
        continue;
      }
    }
    bytes[id] = tokenizer.decode_raw(std::span<const int32_t>(&id, 1));
  }
  return TokenTrie(bytes);
}

}  // namespace tandem::grammar
