// TokenTrieCache: the served tokenizer's token trie (grammar/token_trie.h),
// built on the first constrained request (a 150k vocabulary takes a fraction
// of a second) and shared read-only by every constrained request after it.
// Thread-safe.
#pragma once

#include <memory>
#include <mutex>

#include "grammar/token_trie.h"
#include "tokenizer/tokenizer.h"

namespace tandem::server {

class TokenTrieCache {
 public:
  std::shared_ptr<const grammar::TokenTrie> get(const tok::Tokenizer& tokenizer) {
    std::lock_guard<std::mutex> lock(mu_);
    if (!trie_)
      trie_ = std::make_shared<const grammar::TokenTrie>(grammar::TokenTrie::from_tokenizer(tokenizer));
    return trie_;
  }

 private:
  std::mutex mu_;
  std::shared_ptr<const grammar::TokenTrie> trie_;
};

}  // namespace tandem::server
