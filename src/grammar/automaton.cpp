#include "grammar/automaton.h"

#include <algorithm>

namespace tandem::grammar {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

uint64_t hash_nodes(const std::vector<int32_t>& nodes, bool accept) {
  uint64_t h = accept ? 0x9e3779b97f4a7c15ull : 0x632be59bd9b4e019ull;
  for (int32_t n : nodes) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(n)) + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  }
  return h;
}

}  // namespace

ByteAutomaton::ByteAutomaton(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  std::vector<int32_t> nodes;
  bool accept = false;
  for (int32_t alt : grammar_->rule_alternatives[grammar_->root]) expand(alt, kBottom, nodes, accept);
  start_ = intern_state(std::move(nodes), accept);
}

int32_t ByteAutomaton::intern_node(int32_t position, int32_t parent) {
  const uint64_t key = pair_key(position, parent);
  auto it = node_ids_.find(key);
  if (it != node_ids_.end()) return it->second;
  nodes_.push_back({position, parent});
  const auto id = static_cast<int32_t>(nodes_.size() - 1);
  node_ids_.emplace(key, id);
  return id;
}

void ByteAutomaton::expand(int32_t position, int32_t parent, std::vector<int32_t>& out, bool& accept) {
  const auto& sym = grammar_->symbols;
  work_.clear();
  seen_.clear();
  work_.emplace_back(position, parent);
  while (!work_.empty()) {
    auto [pos, par] = work_.back();
    work_.pop_back();
    if (std::find(seen_.begin(), seen_.end(), std::make_pair(pos, par)) != seen_.end()) continue;
    seen_.emplace_back(pos, par);
    const int32_t s = sym[pos];
    if (s >= 0) {
      out.push_back(intern_node(pos, par));
    } else if (s == Grammar::kEnd) {
      if (par == kBottom) {
        accept = true;
      } else {
        work_.emplace_back(nodes_[par].position, nodes_[par].parent);
      }
    } else {
      // Continue after the reference; in tail position the caller's rest is the continuation.
      const int32_t cont = sym[pos + 1] == Grammar::kEnd ? par : intern_node(pos + 1, par);
      for (int32_t alt : grammar_->rule_alternatives[Grammar::symbol_rule(s)]) work_.emplace_back(alt, cont);
    }
  }
}

int32_t ByteAutomaton::intern_state(std::vector<int32_t> nodes, bool accept) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (nodes.empty() && !accept) return kDead;
  const uint64_t h = hash_nodes(nodes, accept);
  auto& bucket = state_ids_[h];
  for (int32_t id : bucket)
    if (accepting_[id] == accept && states_[id] == nodes) return id;
  states_.push_back(std::move(nodes));
  accepting_.push_back(accept ? 1 : 0);
  transitions_.resize(transitions_.size() + 256, kUnknown);
  const auto id = static_cast<int32_t>(states_.size() - 1);
  bucket.push_back(id);
  return id;
}

int32_t ByteAutomaton::compute(int32_t state, uint8_t byte) {
  std::vector<int32_t> next;
  bool accept = false;
  // Copy: expand() may grow nodes_, and intern_state() states_.
  const std::vector<int32_t> current = states_[state];
  for (int32_t n : current) {
    const Node node = nodes_[n];
    if (!grammar_->classes[grammar_->symbols[node.position]].test(byte)) continue;
    expand(node.position + 1, node.parent, next, accept);
    if (next.size() > kMaxStacks || nodes_.size() > kMaxNodes) return kDead;  // see the header
  }
  return intern_state(std::move(next), accept);
}

int32_t ByteAutomaton::advance(int32_t state, std::string_view bytes) {
  for (unsigned char b : bytes) {
    if (state < 0) return kDead;
    state = next(state, b);
  }
  return state;
}

}  // namespace tandem::grammar
