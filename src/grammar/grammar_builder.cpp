#include <algorithm>
#include <functional>
#include <optional>

#include "grammar/grammar.h"

namespace tandem::grammar {
namespace {

using Ranges = std::vector<std::pair<uint32_t, uint32_t>>;
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode_utf8(uint32_t cp, uint8_t* out) {
  const int n = utf8_length(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static constexpr uint8_t kLead[5] = {0, 0, 0xc0, 0xe0, 0xf0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3f));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

// Splits [lo, hi] (same UTF-8 length) until every byte of the encoding runs
// over one contiguous range; each piece is one sequence of byte ranges.
void split_same_length(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (1u << (6 * i)) - 1;
    if ((lo & ~m) == (hi & ~m)) continue;
    if ((lo & m) != 0) {
      split_same_length(lo, lo | m, out);
      split_same_length((lo | m) + 1, hi, out);
      return;
    }
    if ((hi & m) != m) {
      split_same_length(lo, (hi & ~m) - 1, out);
      split_same_length(hi & ~m, hi, out);
      return;
    }
  }
  uint8_t a[4], b[4];
  encode_utf8(lo, a);
  encode_utf8(hi, b);
  ByteRanges seq;
  for (int k = 0; k < n; ++k) seq.emplace_back(a[k], b[k]);
  out.push_back(std::move(seq));
}

// [lo, hi] without surrogates, split at the UTF-8 length boundaries.
void lower_range(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  static constexpr uint32_t kBounds[] = {0x7f, 0x7ff, 0xd7ff, 0xdfff, 0xffff, 0x10ffff};
  uint32_t start = lo;
  for (uint32_t bound : kBounds) {
    if (start > hi) break;
    if (start > bound) continue;
    const uint32_t end = std::min(hi, bound);
    if (bound != 0xdfff) split_same_length(start, end, out);  // surrogates have no UTF-8 form
    start = end + 1;
  }
}

}  // namespace

// A rule that can reach itself through leading, nullable-prefixed references
// without consuming a byte, where one of the steps is not in tail position,
// would grow the parse stack forever (automaton.h). Tail-position cycles are
// harmless (the stack does not grow; the automaton dedups them).
std::optional<std::string> GrammarBuilder::left_recursion() const {
  const size_t n = names_.size();
  // Rules that can match the empty string: every symbol of an alternative is such a rule.
  const std::vector<bool> nullable = rules_with_an_alternative_of(
      [](int32_t s, const std::vector<bool>& in) { return s < 0 && in[Grammar::symbol_rule(s)]; });
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r) {
    for (const auto& alt : alternatives_[r]) {
      for (size_t k = 0; k < alt.symbols.size(); ++k) {
        const int32_t s = alt.symbols[k];
        if (s >= 0) break;
        edges[r].push_back({Grammar::symbol_rule(s), k + 1 == alt.symbols.size()});
        if (!nullable[Grammar::symbol_rule(s)]) break;
      }
    }
  }
  std::vector<int32_t> mark(n, -1), queue;
  for (size_t r = 0; r < n; ++r) {
    for (const Edge& e : edges[r]) {
      if (e.tail) continue;
      // Can e.to reach r through leading references?
      queue.assign(1, e.to);
      mark[e.to] = static_cast<int32_t>(r);
      for (size_t q = 0; q < queue.size(); ++q) {
        if (queue[q] == static_cast<int32_t>(r)) return names_[r];
        for (const Edge& f : edges[queue[q]]) {
          if (mark[f.to] == static_cast<int32_t>(r)) continue;
          mark[f.to] = static_cast<int32_t>(r);
          queue.push_back(f.to);
        }
      }
      std::fill(mark.begin(), mark.end(), -1);
    }
  }
  return std::nullopt;
}

std::vector<bool> GrammarBuilder::rules_with_an_alternative_of(
    const std::function<bool(int32_t symbol, const std::vector<bool>& in)>& holds) const {
  std::vector<bool> in(names_.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < names_.size(); ++r) {
      if (in[r]) continue;
      for (const auto& alt : alternatives_[r]) {
        if (std::all_of(alt.symbols.begin(), alt.symbols.end(), [&](int32_t s) { return holds(s, in); })) {
          in[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return in;
}

// Whether `rule` derives at least one finite byte string: a rule ends if one of its
// alternatives holds only non-empty byte classes and rules that end. A grammar whose root
// does not would let generation stop at once with text it never allowed.
bool GrammarBuilder::matches_some_text(int32_t rule) const {
  const std::vector<bool> ends = rules_with_an_alternative_of([this](int32_t s, const std::vector<bool>& in) {
    return s >= 0 ? classes_[static_cast<size_t>(s)].any() : in[Grammar::symbol_rule(s)];
  });
  return ends[static_cast<size_t>(rule)];
}

int32_t GrammarBuilder::rule(const std::string& name) {
  for (size_t i = 0; i < names_.size(); ++i)
    if (names_[i] == name) return static_cast<int32_t>(i);
  names_.push_back(name);
  alternatives_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(names_.size() - 1);
}

int32_t GrammarBuilder::fresh_rule(const std::string& hint) {
  names_.push_back(hint + "-" + std::to_string(names_.size()));
  alternatives_.emplace_back();
  defined_.push_back(false);
  return static_cast<int32_t>(names_.size() - 1);
}

void GrammarBuilder::add_alternative(int32_t rule, const Sequence& seq) {
  alternatives_[rule].push_back(seq);
  defined_[rule] = true;
}

void GrammarBuilder::push_class(Sequence& seq, const ByteClass& cls) {
  for (size_t i = 0; i < classes_.size(); ++i) {
    if (classes_[i] == cls) {
      seq.symbols.push_back(static_cast<int32_t>(i));
      return;
    }
  }
  classes_.push_back(cls);
  seq.symbols.push_back(static_cast<int32_t>(classes_.size() - 1));
}

void GrammarBuilder::push_literal(Sequence& seq, std::string_view text) {
  for (unsigned char c : text) {
    ByteClass cls;
    cls.set(c);
    push_class(seq, cls);
  }
}

void GrammarBuilder::push_codepoint_class(Sequence& seq, const Ranges& ranges, const std::string& hint) {
  std::vector<ByteRanges> pieces;
  for (const auto& [lo, hi] : ranges) lower_range(lo, std::min<uint32_t>(hi, 0x10ffff), pieces);
  ByteClass single;
  std::vector<ByteRanges> multi;
  for (auto& p : pieces) {
    if (p.size() == 1) {
      for (int b = p[0].first; b <= p[0].second; ++b) single.set(b);
    } else {
      multi.push_back(std::move(p));
    }
  }
  if (multi.empty()) {
    push_class(seq, single);
    return;
  }
  const int32_t r = fresh_rule(hint);
  if (single.any()) {
    Sequence s;
    push_class(s, single);
    add_alternative(r, s);
  }
  for (const auto& p : multi) {
    Sequence s;
    for (const auto& [a, b] : p) {
      ByteClass cls;
      for (int v = a; v <= b; ++v) cls.set(v);
      push_class(s, cls);
    }
    add_alternative(r, s);
  }
  seq.symbols.push_back(Grammar::rule_symbol(r));
}

Expected<Grammar> GrammarBuilder::finish(const std::string& root) {
  Grammar g;
  int32_t root_id = -1;
  for (size_t i = 0; i < names_.size(); ++i) {
    if (!defined_[i]) return invalid_argument("grammar: rule '" + names_[i] + "' is used but never defined");
    if (names_[i] == root) root_id = static_cast<int32_t>(i);
  }
  if (root_id < 0) return invalid_argument("grammar: no '" + root + "' rule (the start rule)");
  if (auto r = left_recursion())
    return invalid_argument("grammar: rule '" + *r + "' is left-recursive (it can start with itself)");
  if (!matches_some_text(root_id))
    return invalid_argument("grammar: rule '" + root +
                            "' matches no text (each of its alternatives needs a rule that never ends, "
                            "e.g. x ::= x)");
  g.root = root_id;
  g.classes = classes_;
  g.rule_names = names_;
  g.rule_alternatives.resize(names_.size());
  for (size_t r = 0; r < names_.size(); ++r) {
    for (const auto& alt : alternatives_[r]) {
      g.rule_alternatives[r].push_back(static_cast<int32_t>(g.symbols.size()));
      g.symbols.insert(g.symbols.end(), alt.symbols.begin(), alt.symbols.end());
      g.symbols.push_back(Grammar::kEnd);
    }
  }
  return g;
}

}  // namespace tandem::grammar
