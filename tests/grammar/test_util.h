// Helpers for the grammar tests: run a grammar's automaton over a string.
#pragma once

#include <memory>
#include <string>

#include "grammar/automaton.h"
#include "grammar/grammar.h"

namespace tandem::grammar::testing {

inline std::shared_ptr<const Grammar> compile(const std::string& gbnf) {
  auto g = parse_gbnf(gbnf);
  if (!g.ok()) return nullptr;
  return std::make_shared<const Grammar>(std::move(*g));
}

// 'a' accepted, 'p' a viable prefix only, 'x' rejected.
inline char verdict(const std::shared_ptr<const Grammar>& g, const std::string& text) {
  ByteAutomaton a(g);
  const int32_t s = a.advance(a.start(), text);
  if (s == ByteAutomaton::kDead) return 'x';
  return a.accepting(s) ? 'a' : 'p';
}

}  // namespace tandem::grammar::testing
