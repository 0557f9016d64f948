// PrefixCache: exact reuse of prompt prefixes across requests.
//
// Indexes full KV blocks of finished prefills by the chain of token ids that
// produced them: entry i of a prompt covers tokens [i * B, (i + 1) * B) and
// points at its parent entry, so a lookup walks a new prompt block by block
// and stops at the first block whose tokens (compared exactly, never by hash
// alone) or parent differ. Because every kernel is batch- and
// chunk-invariant (ADR 0001), the K/V a block holds are bitwise what a fresh
// prefill of the same tokens at the same positions would write, so a request
// that starts on cached blocks produces exactly the output it would without
// them (docs/adr/0004-prefix-cache.md).
//
// The index holds one KvCache reference per entry; blocks referenced only by
// the index are given back, least recently used first and leaves before
// their parents, when the pool runs short (KvCache's reclaim hook).
// Owned and used by the engine thread only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "model/kv_cache.h"

namespace tandem::scheduler {

class PrefixCache {
 public:
  explicit PrefixCache(model::KvCache& kv) : kv_(kv) {}
  PrefixCache(const PrefixCache&) = delete;
  PrefixCache& operator=(const PrefixCache&) = delete;

  // Blocks of the longest cached chain that prefixes `tokens`, at most
  // `max_blocks` of them, in position order; marks them recently used.
  std::vector<int32_t> lookup(std::span<const int32_t> tokens, int32_t max_blocks);
  // Registers the first `blocks` blocks of a sequence's block table as
  // holding the K/V of `tokens`' first blocks * block_size tokens. Blocks
  // already cached under the same chain are left as they are.
  void insert(std::span<const int32_t> tokens, const int32_t* table, int32_t blocks);
  // Gives the least recently used block that only the index holds (and that
  // no cached entry extends) back to the pool; false when there is none.
  bool evict_one();
  int32_t entries() const { return static_cast<int32_t>(entries_.size()); }
  // Cached blocks no sequence uses (reclaimable).
  int32_t idle_blocks() const;

 private:
  struct Entry {
    uint64_t parent = 0;
    std::vector<int32_t> tokens;
    int32_t block = -1;
    int32_t children = 0;
    uint64_t last_used = 0;
    // Exact match: the same parent chain and the same tokens (the key only finds candidates).
    bool holds(uint64_t parent_key, std::span<const int32_t> block) const {
      return parent == parent_key && std::ranges::equal(tokens, block);
    }
  };
  static uint64_t chain_key(uint64_t parent, std::span<const int32_t> block_tokens);
  // Block i of `tokens`, and how many whole blocks `tokens` has (at most `at_most`).
  std::span<const int32_t> block_tokens(std::span<const int32_t> tokens, int32_t i) const;
  int32_t whole_blocks(std::span<const int32_t> tokens, int32_t at_most) const;

  model::KvCache& kv_;
  std::unordered_map<uint64_t, Entry> entries_;
  uint64_t clock_ = 0;
};

}  // namespace tandem::scheduler
