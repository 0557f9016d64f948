#include "scheduler/prefix_cache.h"

#include <algorithm>

namespace tandem::scheduler {
namespace {

constexpr uint64_t kRoot = 0x9e3779b97f4a7c15ull;

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

}  // namespace

uint64_t PrefixCache::chain_key(uint64_t parent, std::span<const int32_t> block_tokens) {
  uint64_t h = mix64(parent + kRoot);
  for (int32_t t : block_tokens) h = mix64(h ^ static_cast<uint32_t>(t)) + kRoot;
  return h == 0 ? 1 : h;  // 0 is the root's "parent"
}

std::span<const int32_t> PrefixCache::block_tokens(std::span<const int32_t> tokens, int32_t i) const {
  const auto bs = static_cast<size_t>(kv_.tokens_per_block());
  return tokens.subspan(static_cast<size_t>(i) * bs, bs);
}

int32_t PrefixCache::whole_blocks(std::span<const int32_t> tokens, int32_t at_most) const {
  return std::min(at_most, static_cast<int32_t>(tokens.size() / static_cast<size_t>(kv_.tokens_per_block())));
}

std::vector<int32_t> PrefixCache::lookup(std::span<const int32_t> tokens, int32_t max_blocks) {
  std::vector<int32_t> blocks;
  uint64_t parent = 0;
  ++clock_;
  for (int32_t i = 0; i < whole_blocks(tokens, max_blocks); ++i) {
    const auto block = block_tokens(tokens, i);
    const uint64_t key = chain_key(parent, block);
    auto it = entries_.find(key);
    if (it == entries_.end() || !it->second.holds(parent, block)) break;
    it->second.last_used = clock_;
    blocks.push_back(it->second.block);
    parent = key;
  }
  return blocks;
}

void PrefixCache::insert(std::span<const int32_t> tokens, const int32_t* table, int32_t blocks) {
  uint64_t parent = 0;
  ++clock_;
  for (int32_t i = 0; i < whole_blocks(tokens, blocks); ++i) {
    const auto block = block_tokens(tokens, i);
    const uint64_t key = chain_key(parent, block);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      // Same chain: keep the cached block. A different chain under the same
      // 64-bit key (a collision): cache nothing below it.
      if (!it->second.holds(parent, block)) return;
      it->second.last_used = clock_;
    } else {
      Entry e;
      e.parent = parent;
      e.tokens.assign(block.begin(), block.end());
      e.block = table[i];
      e.last_used = clock_;
      kv_.retain(e.block);
      if (parent != 0) entries_.at(parent).children++;
      entries_.emplace(key, std::move(e));
    }
    parent = key;
  }
}

int32_t PrefixCache::idle_blocks() const {
  int32_t n = 0;
  for (const auto& [key, e] : entries_) n += kv_.refs(e.block) == 1;
  return n;
}

bool PrefixCache::evict_one() {
  auto victim = entries_.end();
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    const Entry& e = it->second;
    if (e.children > 0 || kv_.refs(e.block) != 1) continue;  // extended, or in use by a sequence
    if (victim == entries_.end() || e.last_used < victim->second.last_used) victim = it;
  }
  if (victim == entries_.end()) return false;
  if (victim->second.parent != 0) entries_.at(victim->second.parent).children--;
  kv_.drop(victim->second.block);
  entries_.erase(victim);
  return true;
}

}  // namespace tandem::scheduler
