// KvCache: the paged K/V pool shared by all sequences of one model.
//
// Storage: per layer, one K and one V array of num_blocks blocks; block b,
// slot s, kv head h lives at ((b * tokens_per_block + s) * n_kv_heads + h) *
// head_dim (kernels::KvPool), with the layer's own kv heads and head_dim
// (ModelConfig::layer_kv_heads / layer_head_dim). A KV-shared layer
// (ModelConfig::kv_source(l) != l, gemma4) has no storage: its pool is its
// source layer's. f32, allocated once at construction.
//
// Sequences: create_sequence() returns a handle; each sequence owns a block
// table (its blocks in position order) and a length (tokens whose K/V are
// valid). reserve() grows the table to hold a length — all or nothing, with a
// ResourceExhausted "does not fit" Status when the free blocks do not suffice.
// truncate() shortens the valid length in O(1) (speculative rollback): it
// touches no data and keeps the blocks, so the next tokens reuse them;
// shrink_to_fit() returns blocks beyond the length to the pool; release()
// frees the sequence. Capacity accounting: free_blocks(), blocks_for(tokens).
//
// Sharing (prefix caching): blocks are reference-counted. A holder outside
// any sequence (a prefix index) takes a reference with retain() and gives it
// back with drop(); adopt() starts an empty sequence on already-computed full
// blocks. A block returns to the pool when its last reference goes. Shared
// blocks are immutable: freeze() marks a sequence's leading full blocks so,
// and truncating into them is a bug (checked). When the pool runs short,
// reserve() first asks the reclaim hook (set by the index's owner) to give
// blocks back.
//
// Not thread-safe: owned and used by the engine thread only.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/aligned_buffer.h"
#include "core/status.h"
#include "kernels/ops.h"

namespace tandem::model {

struct ModelConfig;

using SequenceId = int32_t;

struct KvCacheOptions {
  int32_t tokens_per_block = 32;  // tokens per block
  int32_t num_blocks = 0;         // blocks in the pool
  // false: bookkeeping only, no host K/V arrays — for a model placed on a GPU, whose
  // CudaForward keeps the K/V on the device (ADR 0030); layer_pool() is then a bug.
  bool host_storage = true;
};

class KvCache {
 public:
  KvCache() = default;
  KvCache(KvCache&&) = default;
  KvCache& operator=(KvCache&&) = default;
  KvCache(const KvCache&) = delete;
  KvCache& operator=(const KvCache&) = delete;
  // Sizes the pool for `config`'s layers / kv heads / head_dim. Allocates
  // 2 * num_blocks * tokens_per_block * (sum of the storing layers' kv dims) floats.
  static Expected<KvCache> create(const ModelConfig& config, const KvCacheOptions& options);
  // Options whose pool holds `tokens` tokens in total (rounded up to blocks).
  static KvCacheOptions options_for_tokens(int64_t tokens, int32_t tokens_per_block = 32);

  int32_t tokens_per_block() const { return tokens_per_block_; }
  int32_t num_blocks() const { return num_blocks_; }
  int32_t free_blocks() const { return static_cast<int32_t>(free_list_.size()); }
  int64_t bytes() const;
  int32_t blocks_for(int64_t tokens) const {
    return static_cast<int32_t>((tokens + tokens_per_block_ - 1) / tokens_per_block_);
  }

  // A new empty sequence (no blocks yet).
  SequenceId create_sequence();
  bool valid(SequenceId seq) const;
  // Frees the sequence's blocks; the handle becomes invalid.
  void release(SequenceId seq);
  // A number no other sequence of this cache ever had (ids are reused after
  // release; serials are not): how a holder of a handle tells a new sequence
  // under the same id from the one it knew (ADR 0090).
  uint64_t serial(SequenceId seq) const;

  // Valid K/V length of the sequence (positions [0, length)).
  int64_t length(SequenceId seq) const;
  // Blocks the sequence holds (capacity = held * tokens_per_block tokens).
  int32_t held_blocks(SequenceId seq) const;
  // Extra blocks reserve(seq, tokens) would take from the pool.
  int32_t blocks_needed(SequenceId seq, int64_t tokens) const;
  // Makes room for `tokens` positions; ResourceExhausted when it does not fit
  // (then nothing changes).
  Status reserve(SequenceId seq, int64_t tokens);
  // Sets the valid length; must be <= the reserved capacity. O(1).
  void set_length(SequenceId seq, int64_t tokens);
  // Shortens the valid length to min(length, tokens). O(1); blocks are kept.
  void truncate(SequenceId seq, int64_t tokens);
  // Returns blocks beyond the valid length to the pool.
  void shrink_to_fit(SequenceId seq);

  // Prefix sharing (see the header comment).
  // Starts the empty sequence `seq` on `blocks` (full blocks, in position
  // order): takes a reference on each, length = blocks.size() * tokens_per_block.
  void adopt(SequenceId seq, std::span<const int32_t> blocks);
  // Marks the first `blocks` blocks of `seq` immutable (they are shared).
  void freeze(SequenceId seq, int32_t blocks);
  void retain(int32_t block);
  void drop(int32_t block);
  int32_t refs(int32_t block) const { return refs_[block]; }
  // Called while free_blocks() < n during a reservation; returns false when
  // it has nothing left to give back.
  void set_reclaim(std::function<bool()> reclaim) { reclaim_ = std::move(reclaim); }
  // Reclaims until n blocks are free or nothing more can be reclaimed.
  void make_room(int32_t n);

  // The sequence's block table (stable until its next reserve/shrink/release).
  const int32_t* block_table(SequenceId seq) const;
  // Layer `layer`'s pool view for the kernels.
  kernels::KvPool layer_pool(int layer);

 private:
  struct Sequence {
    bool live = false;
    int64_t length = 0;
    int64_t frozen_tokens = 0;  // positions in shared (immutable) blocks
    uint64_t serial = 0;
    std::vector<int32_t> blocks;
  };
  Sequence& seq_ref(SequenceId seq);
  const Sequence& seq_ref(SequenceId seq) const;

  int32_t tokens_per_block_ = 0, num_blocks_ = 0;
  int num_layers_ = 0;
  std::vector<int32_t> n_kv_heads_, head_dim_, source_;  // per layer
  std::vector<AlignedBuffer<float>> k_, v_;              // one per layer (empty for a KV-shared one)
  std::vector<int32_t> free_list_;                       // stack of free block ids
  std::vector<int32_t> refs_;                            // per block; 0 = free
  std::function<bool()> reclaim_;
  std::vector<Sequence> sequences_;
  std::vector<SequenceId> free_ids_;
  uint64_t next_serial_ = 1;
};

}  // namespace tandem::model
