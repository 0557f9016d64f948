// Grammar: a context-free grammar over bytes, the form every structured-output
// request compiles to (GBNF text from a client, JSON Schema, json_object and
// tool calls all become one). Rules are alternatives of symbol sequences; a
// symbol is a byte class (a set of byte values) or a reference to a rule.
// Character classes over code points are lowered to UTF-8 byte sequences at
// build time, so the matcher (automaton.h) never decodes UTF-8.
//
// parse_gbnf() reads llama.cpp's GBNF dialect: `name ::= alternatives`,
// "literals", [classes] with ranges and ^, `.`, ( groups ), rule names,
// postfix * + ? {m} {m,} {m,n}, # comments, escapes \n \r \t \\ \" \[ \]
// \xHH \uHHHH \UHHHHHHHH. The start rule is `root`. Errors (syntax, an
// undefined rule, no root, left recursion, a root that matches no text, an escape that is no
// character (a surrogate, beyond U+10FFFF), a repetition bound over kMaxRepetition) are an
// InvalidArgument Status naming the line. An immutable Grammar is shareable
// between threads.
#pragma once

#include <bitset>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace tandem::grammar {

using ByteClass = std::bitset<256>;

struct Grammar {
  // symbols: >= 0 a byte class index, < 0 (but not kEnd) the rule -(s + 1),
  // kEnd closes an alternative. An alternative starts at a position listed
  // in rule_alternatives and runs to its kEnd.
  static constexpr int32_t kEnd = std::numeric_limits<int32_t>::min();
  std::vector<int32_t> symbols;
  std::vector<ByteClass> classes;
  std::vector<std::vector<int32_t>> rule_alternatives;
  std::vector<std::string> rule_names;
  int32_t root = 0;

  static int32_t rule_symbol(int32_t rule) { return -(rule + 1); }
  static int32_t symbol_rule(int32_t symbol) { return -symbol - 1; }
};

inline constexpr int kMaxRepetition = 10000;

// One alternative as it is built: byte classes and rule references.
struct Sequence {
  std::vector<int32_t> symbols;  // as in Grammar::symbols, without kEnd
};

// Builds a Grammar rule by rule; used by the GBNF parser.
class GrammarBuilder {
 public:
  // The rule's id, creating it (empty) on first use.
  int32_t rule(const std::string& name);
  // A fresh rule named after `hint`.
  int32_t fresh_rule(const std::string& hint);
  void add_alternative(int32_t rule, const Sequence& seq);
  bool defined(int32_t rule) const { return defined_[rule]; }
  // Appends one byte class symbol to seq.
  void push_class(Sequence& seq, const ByteClass& cls);
  // Appends the UTF-8 bytes of `text` as single-byte classes.
  void push_literal(Sequence& seq, std::string_view text);
  // Appends a code point class (sorted, merged [lo, hi] ranges) lowered to UTF-8.
  void push_codepoint_class(Sequence& seq, const std::vector<std::pair<uint32_t, uint32_t>>& ranges,
                            const std::string& hint);
  // Every referenced rule must be defined; `root` must exist.
  Expected<Grammar> finish(const std::string& root = "root");

 private:
  // The least set of rules in which a rule is once one of its alternatives has only symbols
  // `holds` accepts, given the set so far (a fixpoint over every rule).
  std::vector<bool> rules_with_an_alternative_of(
      const std::function<bool(int32_t symbol, const std::vector<bool>& in)>& holds) const;
  bool matches_some_text(int32_t rule) const;
  std::optional<std::string> left_recursion() const;

  std::vector<std::string> names_;
  std::vector<std::vector<Sequence>> alternatives_;
  std::vector<bool> defined_;
  std::vector<ByteClass> classes_;
};

Expected<Grammar> parse_gbnf(std::string_view text);

}  // namespace tandem::grammar
