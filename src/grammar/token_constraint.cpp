#include "grammar/token_constraint.h"

#include <algorithm>
#include <limits>

namespace tandem::grammar {
namespace {

constexpr size_t kMaxCachedMasks = 256;

}  // namespace

GrammarConstraint::GrammarConstraint(std::shared_ptr<const Grammar> grammar,
                                     std::shared_ptr<const TokenTrie> trie, std::vector<int32_t> end_tokens)
    : trie_(std::move(trie)), end_tokens_(std::move(end_tokens)), automaton_(std::move(grammar)) {
  path_states_.push_back(automaton_.start());
  walk_states_.resize(static_cast<size_t>(trie_->max_depth()) + 1);
}

int32_t GrammarConstraint::state_after(std::span<const int32_t> generated) {
  size_t common = 0;
  while (common < generated.size() && common < path_tokens_.size() &&
         generated[common] == path_tokens_[common])
    ++common;
  path_tokens_.resize(common);
  path_states_.resize(common + 1);
  for (size_t k = common; k < generated.size(); ++k) {
    const int32_t token = generated[k];
    int32_t state = path_states_.back();
    if (state >= 0) {
      state = token >= 0 && token < trie_->vocab_size() && !trie_->bytes(token).empty()
                  ? automaton_.advance(state, trie_->bytes(token))
                  : ByteAutomaton::kDead;
    }
    path_tokens_.push_back(token);
    path_states_.push_back(state);
  }
  return path_states_.back();
}

const std::vector<uint64_t>& GrammarConstraint::mask_of(int32_t state) {
  auto it = masks_.find(state);
  if (it != masks_.end()) return it->second;
  if (masks_.size() >= kMaxCachedMasks) masks_.clear();
  std::vector<uint64_t> bits((static_cast<size_t>(trie_->vocab_size()) + 63) / 64, 0);
  auto set = [&](int32_t id) {
    if (id >= 0 && id < trie_->vocab_size()) bits[id / 64] |= uint64_t{1} << (id % 64);
  };
  if (state >= 0) {
    const TokenTrie& t = *trie_;
    const auto n = static_cast<int32_t>(t.node_count());
    walk_states_[0] = state;
    for (int32_t i = 1; i < n;) {
      const int32_t next = automaton_.next(walk_states_[t.depth_[i] - 1], t.byte_[i]);
      if (next < 0) {
        i = t.subtree_end_[i];
        continue;
      }
      walk_states_[t.depth_[i]] = next;
      for (int32_t k = t.token_begin_[i]; k < t.token_begin_[i + 1]; ++k) set(t.token_ids_[k]);
      ++i;
    }
  }
  // The end of the sequence where the output is complete; a dead state (only
  // reachable if every allowed token was masked by something else) ends it too.
  if (state < 0 || automaton_.accepting(state))
    for (int32_t id : end_tokens_) set(id);
  return masks_.emplace(state, std::move(bits)).first->second;
}

const std::vector<uint64_t>& GrammarConstraint::allowed(std::span<const int32_t> generated) {
  return mask_of(state_after(generated));
}

void GrammarConstraint::mask(std::span<float> logits, std::span<const int32_t> generated) {
  const std::vector<uint64_t>& bits = allowed(generated);
  constexpr float kMasked = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t word = w < bits.size() ? bits[w] : 0;
    if (word == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    for (size_t i = w * 64; i < end; ++i)
      if (!((word >> (i - w * 64)) & 1)) logits[i] = kMasked;
  }
}

}  // namespace tandem::grammar
