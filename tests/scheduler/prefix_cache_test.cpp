// PrefixCache over a real KvCache: chains are matched block by block on exact
// tokens, lookups stop at the first difference, eviction gives back the least
// recently used unreferenced leaf first and never a block a sequence uses.
#include "scheduler/prefix_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/config.h"

namespace tandem::scheduler {
namespace {

model::ModelConfig tiny_config() {
  model::ModelConfig c;
  c.num_layers = 1;
  c.num_kv_heads = 1;
  c.head_dim = 2;
  return c;
}

std::vector<int32_t> tokens(int n, int salt = 0) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back(i * 3 + salt);
  return t;
}

// A sequence that "prefilled" `prompt` and registered its full blocks, then finished.
void prefill_and_register(model::KvCache& kv, PrefixCache& cache, const std::vector<int32_t>& prompt) {
  const model::SequenceId s = kv.create_sequence();
  ASSERT_TRUE(kv.reserve(s, static_cast<int64_t>(prompt.size())).ok());
  kv.set_length(s, static_cast<int64_t>(prompt.size()));
  cache.insert(prompt, kv.block_table(s), static_cast<int32_t>(prompt.size()) / kv.tokens_per_block());
  kv.release(s);
}

TEST(PrefixCache, MatchesWholeBlocksOfTheSameChainOnly) {
  auto kv = model::KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 16});
  ASSERT_TRUE(kv.ok());
  PrefixCache cache(*kv);
  prefill_and_register(*kv, cache, tokens(10));  // 2 full blocks
  EXPECT_EQ(cache.entries(), 2);
  EXPECT_EQ(kv->free_blocks(), 14) << "the index holds its 2 blocks";
  EXPECT_EQ(cache.lookup(tokens(10), 8).size(), 2u);
  EXPECT_EQ(cache.lookup(tokens(12), 8).size(), 2u) << "a longer prompt with the same start";
  EXPECT_EQ(cache.lookup(tokens(10), 1).size(), 1u) << "capped by max_blocks";
  EXPECT_EQ(cache.lookup(tokens(7), 8).size(), 1u) << "only whole blocks";
  std::vector<int32_t> changed = tokens(10);
  changed[5] = 999;  // second block differs
  EXPECT_EQ(cache.lookup(changed, 8).size(), 1u);
  changed[0] = 999;  // first block differs: nothing
  EXPECT_TRUE(cache.lookup(changed, 8).empty());
  // The same second block after a different first block is another chain.
  std::vector<int32_t> other = tokens(8, 1);
  for (int i = 4; i < 8; ++i) other[i] = tokens(8)[i];
  EXPECT_TRUE(cache.lookup(other, 8).empty());
}

TEST(PrefixCache, EvictsLeastRecentlyUsedLeavesAndNothingInUse) {
  auto kv = model::KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 8});
  ASSERT_TRUE(kv.ok());
  PrefixCache cache(*kv);
  prefill_and_register(*kv, cache, tokens(8, 0));  // chain A: 2 blocks
  prefill_and_register(*kv, cache, tokens(8, 1));  // chain B: 2 blocks
  EXPECT_EQ(cache.idle_blocks(), 4);
  // A request starts on chain A: its blocks are in use (and A is now the newer chain).
  const model::SequenceId s = kv->create_sequence();
  kv->adopt(s, cache.lookup(tokens(8, 0), 2));
  EXPECT_EQ(cache.idle_blocks(), 2);
  // Eviction: B's leaf, then B's root; A's blocks are in use.
  EXPECT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.lookup(tokens(8, 1), 2).size(), 1u) << "B's leaf went first";
  EXPECT_TRUE(cache.evict_one());
  EXPECT_TRUE(cache.lookup(tokens(8, 1), 2).empty());
  EXPECT_FALSE(cache.evict_one()) << "A is in use";
  kv->release(s);
  EXPECT_TRUE(cache.evict_one());
  EXPECT_TRUE(cache.evict_one());
  EXPECT_EQ(cache.entries(), 0);
  EXPECT_EQ(kv->free_blocks(), 8);
}

}  // namespace
}  // namespace tandem::scheduler
