// ByteAutomaton: the pushdown automaton of a Grammar, determinized lazily
// into a DFA over bytes.
//
// A parse is a set of stacks; a stack is a chain of grammar positions (the
// top one a byte class still to match, the ones below it where to continue
// after each enclosing rule). Stacks are hash-consed into nodes and a set of
// them — one DFA state — is interned, so a state is an int32 and a transition
// is one table lookup once computed (256 entries per state, filled on first
// use). Rule references in tail position do not grow the stack, so
// right-recursive repetition runs in constant stack depth.
//
// Grammars with left recursion are refused when they are built
// (GrammarBuilder::finish), so expanding a state always terminates; cycles
// through tail references only are allowed (they do not grow the stack and a
// closure visits each (position, rest) pair once).
//
// A very ambiguous grammar can need exponentially many stacks (two rules
// that differ only in what they close with, nested). A state that would hold
// more than kMaxStacks stacks, or a transition once the automaton holds more
// than kMaxNodes stack nodes, is dead instead: the output ends there (the
// constraint then allows only end tokens), deterministically, so the mask
// stays a function of the prefix.
//
// Not thread-safe (states are created on demand): one automaton per sequence
// being decoded, or external locking. Memory grows with the distinct states
// visited.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"

namespace tandem::grammar {

class ByteAutomaton {
 public:
  static constexpr int32_t kDead = -1;
  static constexpr size_t kMaxStacks = 4096;
  static constexpr size_t kMaxNodes = size_t{1} << 21;

  explicit ByteAutomaton(std::shared_ptr<const Grammar> grammar);

  int32_t start() const { return start_; }
  // The state after `byte` from `state`; kDead when no stack accepts it.
  int32_t next(int32_t state, uint8_t byte) {
    const size_t slot = static_cast<size_t>(state) * 256 + byte;
    if (transitions_[slot] == kUnknown) {
      const int32_t t = compute(state, byte);  // may grow transitions_
      transitions_[slot] = t;
    }
    return transitions_[slot];
  }
  // Advances over `bytes`; kDead stays dead.
  int32_t advance(int32_t state, std::string_view bytes);
  // Whether the input so far is a complete sentence of the grammar.
  bool accepting(int32_t state) const { return state >= 0 && accepting_[state]; }
  size_t state_count() const { return states_.size(); }

 private:
  static constexpr int32_t kUnknown = -2;
  static constexpr int32_t kBottom = -1;  // the empty rest of a stack

  struct Node {
    int32_t position;  // into Grammar::symbols
    int32_t parent;    // node id or kBottom
  };

  int32_t intern_node(int32_t position, int32_t parent);
  // The normalized stacks (byte class on top) reachable from (position,
  // parent) without consuming a byte; sets `accept` when one is empty.
  void expand(int32_t position, int32_t parent, std::vector<int32_t>& out, bool& accept);
  int32_t intern_state(std::vector<int32_t> nodes, bool accept);
  int32_t compute(int32_t state, uint8_t byte);

  std::shared_ptr<const Grammar> grammar_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> node_ids_;
  std::vector<std::vector<int32_t>> states_;  // sorted node ids
  std::vector<uint8_t> accepting_;
  std::unordered_map<uint64_t, std::vector<int32_t>> state_ids_;  // hash -> candidate states
  std::vector<int32_t> transitions_;
  int32_t start_ = kDead;
  std::vector<std::pair<int32_t, int32_t>> work_, seen_;  // scratch for expand()
};

}  // namespace tandem::grammar
