// TokenTrieCache: the served tokenizer's token trie (grammar/token_trie.h),
// built on the first constrained request (a 150k vocabulary takes a fraction
// of a second) and shared read-only by every constrained request after it;
// one per set of kept special tokens (tool-call markers, token_trie.h), so
// at most two. Thread-safe.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

class TokenTrieCache {
 public:
  std::shared_ptr<const grammar::TokenTrie> get(const tok::Tokenizer& tokenizer,
                                                const std::vector<int32_t>& kept_special = {}) {
    std::lock_guard<std::mutex> lock(mu_);
    auto& trie = tries_[kept_special];
    if (!trie)
      trie = std::make_shared<const grammar::TokenTrie>(
          grammar::TokenTrie::from_tokenizer(tokenizer, kept_special));
    return trie;
  }

 private:
  std::mutex mu_;
  std::map<std::vector<int32_t>, std::shared_ptr<const grammar::TokenTrie>> tries_;
};

}  // namespace tandem::server
