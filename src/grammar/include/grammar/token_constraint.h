// GrammarConstraint: a Grammar as a sampling::TokenConstraint — at each
// position only the tokens whose bytes keep the output a prefix of a sentence
// of the grammar, plus the end-of-sequence ids where the output is a complete
// sentence.
//
// The mask of a DFA state (automaton.h) comes from one walk of the token
// trie: a subtree is skipped as soon as its first byte is rejected, and a
// state's transitions are cached, so a walk costs about one table lookup per
// viable trie node. Masks are cached per state, so positions that return to
// a state already seen (inside a string, between array items) cost a lookup.
// The state of each prefix of the last `generated` seen is kept, so the next
// position (classic step, verify row or draft) advances by one token, and a
// rolled-back prefix resumes from the longest match. Everything is a function
// of the prefix: the same tokens give the same mask on every path.
//
// Not thread-safe; one per sequence (sampling/constraint.h).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "grammar/automaton.h"
#include "grammar/token_trie.h"
#include "sampling/constraint.h"

namespace tandem::grammar {

class GrammarConstraint final : public sampling::TokenConstraint {
 public:
  GrammarConstraint(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenTrie> trie,
                    std::vector<int32_t> end_tokens);

  void mask(std::span<float> logits, std::span<const int32_t> generated) override;

  // The allowed-token bitset after `generated` (bit i of word i / 64); sized
  // to the trie's vocabulary (ids beyond it are never allowed).
  const std::vector<uint64_t>& allowed(std::span<const int32_t> generated);
  // The DFA state after `generated` (ByteAutomaton::kDead when it left the grammar).
  int32_t state_after(std::span<const int32_t> generated);
  bool accepts(std::span<const int32_t> generated) { return automaton_.accepting(state_after(generated)); }
  ByteAutomaton& automaton() { return automaton_; }
  // Forgets the cached masks (the automaton keeps its states); for benchmarks.
  void clear_mask_cache() { masks_.clear(); }

 private:
  const std::vector<uint64_t>& mask_of(int32_t state);

  std::shared_ptr<const TokenTrie> trie_;
  std::vector<int32_t> end_tokens_;
  ByteAutomaton automaton_;
  std::vector<int32_t> path_tokens_;
  std::vector<int32_t> path_states_;  // path_states_[k]: the state after path_tokens_[0 .. k)
  std::unordered_map<int32_t, std::vector<uint64_t>> masks_;
  std::vector<int32_t> walk_states_;
};

}  // namespace tandem::grammar
