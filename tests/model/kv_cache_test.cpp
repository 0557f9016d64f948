#include "model/kv_cache.h"

#include <gtest/gtest.h>

#include <vector>

#include "model/config.h"

namespace tandem::model {
namespace {

ModelConfig tiny_config() {
  ModelConfig c;
  c.num_layers = 2;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  return c;
}

TEST(KvCache, ReserveTruncateRelease) {
  auto kv = KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 5});
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->free_blocks(), 5);
  EXPECT_EQ(kv->bytes(), 2 * 2 * 5 * 4 * 2 * 8 * 4);
  SequenceId a = kv->create_sequence();
  EXPECT_EQ(kv->length(a), 0);
  ASSERT_TRUE(kv->reserve(a, 9).ok());  // 3 blocks
  EXPECT_EQ(kv->held_blocks(a), 3);
  EXPECT_EQ(kv->free_blocks(), 2);
  kv->set_length(a, 9);
  kv->truncate(a, 2);  // O(1): blocks stay with the sequence
  EXPECT_EQ(kv->length(a), 2);
  EXPECT_EQ(kv->held_blocks(a), 3);
  kv->truncate(a, 7);  // never grows
  EXPECT_EQ(kv->length(a), 2);
  kv->shrink_to_fit(a);
  EXPECT_EQ(kv->held_blocks(a), 1);
  EXPECT_EQ(kv->free_blocks(), 4);
  kv->release(a);
  EXPECT_FALSE(kv->valid(a));
  EXPECT_EQ(kv->free_blocks(), 5);
}

TEST(KvCache, DoesNotFitIsAnErrorAndChangesNothing) {
  auto kv = KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 3});
  ASSERT_TRUE(kv.ok());
  SequenceId a = kv->create_sequence();
  SequenceId b = kv->create_sequence();
  ASSERT_TRUE(kv->reserve(a, 8).ok());
  EXPECT_EQ(kv->blocks_needed(b, 8), 2);
  Status s = kv->reserve(b, 8);
  EXPECT_EQ(s.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(s.message().find("do not fit"), std::string::npos);
  EXPECT_EQ(kv->held_blocks(b), 0);
  EXPECT_EQ(kv->free_blocks(), 1);
  ASSERT_TRUE(kv->reserve(b, 4).ok());
  // Tables are distinct blocks.
  EXPECT_NE(kv->block_table(a)[0], kv->block_table(b)[0]);
  EXPECT_NE(kv->block_table(a)[1], kv->block_table(b)[0]);
}

TEST(KvCache, HandlesAreReused) {
  auto kv = KvCache::create(tiny_config(), KvCache::options_for_tokens(10, 4));
  ASSERT_TRUE(kv.ok());
  EXPECT_EQ(kv->num_blocks(), 3);
  SequenceId a = kv->create_sequence();
  const uint64_t first = kv->serial(a);
  kv->release(a);
  SequenceId b = kv->create_sequence();
  EXPECT_EQ(a, b);
  EXPECT_TRUE(kv->valid(b));
  EXPECT_FALSE(kv->valid(99));
  // The id comes back; the serial does not (a handle's holder can tell the two apart).
  EXPECT_NE(kv->serial(b), first);
  SequenceId c = kv->create_sequence();
  EXPECT_NE(kv->serial(c), kv->serial(b));
  EXPECT_NE(kv->serial(c), first);
}

TEST(KvCache, RejectsBadOptions) {
  EXPECT_FALSE(KvCache::create(tiny_config(), {.tokens_per_block = 0, .num_blocks = 3}).ok());
}

TEST(KvCache, SharedBlocksAreRefCountedAndImmutable) {
  auto kv = KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 6});
  ASSERT_TRUE(kv.ok());
  SequenceId a = kv->create_sequence();
  ASSERT_TRUE(kv->reserve(a, 10).ok());  // 3 blocks
  kv->set_length(a, 10);
  const std::vector<int32_t> prefix(kv->block_table(a), kv->block_table(a) + 2);
  kv->freeze(a, 2);
  for (int32_t b : prefix) kv->retain(b);  // an index takes a reference
  EXPECT_EQ(kv->refs(prefix[0]), 2);
  SequenceId b = kv->create_sequence();
  kv->adopt(b, prefix);
  EXPECT_EQ(kv->length(b), 8);
  EXPECT_EQ(kv->refs(prefix[1]), 3);
  EXPECT_EQ(kv->free_blocks(), 3) << "adopting takes no new block";
  ASSERT_TRUE(kv->reserve(b, 9).ok());  // the next position goes to a block of its own
  EXPECT_NE(kv->block_table(b)[2], kv->block_table(a)[2]);
  EXPECT_EQ(kv->free_blocks(), 2);
  kv->release(a);
  EXPECT_EQ(kv->free_blocks(), 3) << "a's private block returns; the shared ones stay";
  kv->release(b);
  EXPECT_EQ(kv->free_blocks(), 4);
  for (int32_t blk : prefix) kv->drop(blk);  // the index lets go
  EXPECT_EQ(kv->free_blocks(), 6);
}

TEST(KvCache, ReservationAsksTheReclaimHookFirst) {
  auto kv = KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 2});
  ASSERT_TRUE(kv.ok());
  SequenceId a = kv->create_sequence();
  ASSERT_TRUE(kv->reserve(a, 8).ok());
  std::vector<int32_t> held(kv->block_table(a), kv->block_table(a) + 2);
  for (int32_t blk : held) kv->retain(blk);
  kv->release(a);
  EXPECT_EQ(kv->free_blocks(), 0);
  int calls = 0;
  kv->set_reclaim([&] {
    if (held.empty()) return false;
    ++calls;
    kv->drop(held.back());
    held.pop_back();
    return true;
  });
  SequenceId b = kv->create_sequence();
  ASSERT_TRUE(kv->reserve(b, 4).ok());
  EXPECT_EQ(calls, 1) << "one block needed, one reclaimed";
  EXPECT_FALSE(kv->reserve(b, 12).ok()) << "nothing left to reclaim";
}

TEST(KvCacheDeathTest, TruncatingIntoSharedBlocksIsABug) {
  auto kv = KvCache::create(tiny_config(), {.tokens_per_block = 4, .num_blocks = 2});
  ASSERT_TRUE(kv.ok());
  SequenceId a = kv->create_sequence();
  ASSERT_TRUE(kv->reserve(a, 6).ok());
  kv->set_length(a, 6);
  kv->freeze(a, 1);
  kv->truncate(a, 4);  // fine: the frozen block is whole
  EXPECT_DEATH(kv->truncate(a, 3), "");
}

}  // namespace
}  // namespace tandem::model
