#include "model/kv_cache.h"

#include <algorithm>

#include "core/check.h"
#include "model/config.h"

namespace tandem::model {

Expected<KvCache> KvCache::create(const ModelConfig& config, const KvCacheOptions& options) {
  if (options.tokens_per_block <= 0 || options.num_blocks <= 0)
    return invalid_argument("KV cache: tokens_per_block and num_blocks must be positive");
  KvCache c;
  c.tokens_per_block_ = options.tokens_per_block;
  c.num_blocks_ = options.num_blocks;
  c.num_layers_ = config.num_layers;
  for (int l = 0; l < c.num_layers_; ++l) {
    c.n_kv_heads_.push_back(config.layer_kv_heads(l));
    c.head_dim_.push_back(config.layer_head_dim(l));
    c.source_.push_back(config.kv_source(l));
  }
  try {
    // A GPU target keeps its K/V on the device: block tables only here.
    if (options.host_storage) {
      c.k_.resize(c.num_layers_);
      c.v_.resize(c.num_layers_);
      for (int l = 0; l < c.num_layers_; ++l) {
        if (c.source_[l] != l) continue;  // a KV-shared layer reads its source's pool
        const size_t per_layer =
            static_cast<size_t>(c.num_blocks_) * c.tokens_per_block_ * c.n_kv_heads_[l] * c.head_dim_[l];
        c.k_[l].allocate(per_layer);
        c.v_[l].allocate(per_layer);
      }
    }
  } catch (const std::bad_alloc&) {
    return resource_exhausted("KV cache: cannot allocate " + std::to_string(c.bytes()) + " bytes");
  }
  c.free_list_.reserve(c.num_blocks_);
  c.refs_.assign(c.num_blocks_, 0);
  // Stack with block 0 on top, so a fresh pool hands out blocks in order.
  for (int32_t b = c.num_blocks_ - 1; b >= 0; --b) c.free_list_.push_back(b);
  return c;
}

KvCacheOptions KvCache::options_for_tokens(int64_t tokens, int32_t tokens_per_block) {
  KvCacheOptions o;
  o.tokens_per_block = tokens_per_block;
  o.num_blocks =
      static_cast<int32_t>(std::max<int64_t>(1, (tokens + tokens_per_block - 1) / tokens_per_block));
  return o;
}

int64_t KvCache::bytes() const {
  int64_t floats_per_token = 0;
  for (int l = 0; l < num_layers_; ++l)
    if (source_[l] == l) floats_per_token += int64_t{n_kv_heads_[l]} * head_dim_[l];
  return int64_t{2} * num_blocks_ * tokens_per_block_ * floats_per_token * int64_t{sizeof(float)};
}

SequenceId KvCache::create_sequence() {
  SequenceId id;
  if (!free_ids_.empty()) {
    id = free_ids_.back();
    free_ids_.pop_back();
  } else {
    id = static_cast<SequenceId>(sequences_.size());
    sequences_.emplace_back();
  }
  sequences_[id] = Sequence{};
  sequences_[id].live = true;
  sequences_[id].serial = next_serial_++;
  return id;
}

uint64_t KvCache::serial(SequenceId seq) const { return seq_ref(seq).serial; }

bool KvCache::valid(SequenceId seq) const {
  return seq >= 0 && static_cast<size_t>(seq) < sequences_.size() && sequences_[seq].live;
}

KvCache::Sequence& KvCache::seq_ref(SequenceId seq) {
  TANDEM_CHECK(valid(seq));
  return sequences_[seq];
}
const KvCache::Sequence& KvCache::seq_ref(SequenceId seq) const {
  TANDEM_CHECK(valid(seq));
  return sequences_[seq];
}

void KvCache::release(SequenceId seq) {
  Sequence& s = seq_ref(seq);
  for (auto it = s.blocks.rbegin(); it != s.blocks.rend(); ++it) drop(*it);
  s = Sequence{};
  free_ids_.push_back(seq);
}

int64_t KvCache::length(SequenceId seq) const { return seq_ref(seq).length; }

int32_t KvCache::held_blocks(SequenceId seq) const {
  return static_cast<int32_t>(seq_ref(seq).blocks.size());
}

int32_t KvCache::blocks_needed(SequenceId seq, int64_t tokens) const {
  return std::max(0, blocks_for(tokens) - held_blocks(seq));
}

Status KvCache::reserve(SequenceId seq, int64_t tokens) {
  Sequence& s = seq_ref(seq);
  const int32_t need = blocks_needed(seq, tokens);
  make_room(need);
  if (need > free_blocks())
    return resource_exhausted("KV cache: " + std::to_string(tokens) + " tokens do not fit (sequence holds " +
                              std::to_string(s.blocks.size()) + " blocks, needs " + std::to_string(need) +
                              " more, " + std::to_string(free_blocks()) + " of " +
                              std::to_string(num_blocks_) + " free, block size " +
                              std::to_string(tokens_per_block_) + ")");
  for (int32_t i = 0; i < need; ++i) {
    s.blocks.push_back(free_list_.back());
    refs_[free_list_.back()] = 1;
    free_list_.pop_back();
  }
  return Status::Ok();
}

void KvCache::make_room(int32_t n) {
  while (free_blocks() < n && reclaim_ && reclaim_()) {
  }
}

void KvCache::adopt(SequenceId seq, std::span<const int32_t> blocks) {
  Sequence& s = seq_ref(seq);
  TANDEM_CHECK(s.blocks.empty() && s.length == 0);
  for (int32_t b : blocks) {
    retain(b);
    s.blocks.push_back(b);
  }
  s.length = static_cast<int64_t>(blocks.size()) * tokens_per_block_;
  s.frozen_tokens = s.length;
}

void KvCache::freeze(SequenceId seq, int32_t blocks) {
  Sequence& s = seq_ref(seq);
  TANDEM_CHECK(blocks >= 0 && static_cast<size_t>(blocks) <= s.blocks.size());
  s.frozen_tokens = std::max<int64_t>(s.frozen_tokens, int64_t{blocks} * tokens_per_block_);
  TANDEM_CHECK(s.frozen_tokens <= s.length);
}

void KvCache::retain(int32_t block) {
  TANDEM_CHECK(block >= 0 && block < num_blocks_ && refs_[block] > 0);
  ++refs_[block];
}

void KvCache::drop(int32_t block) {
  TANDEM_CHECK(block >= 0 && block < num_blocks_ && refs_[block] > 0);
  if (--refs_[block] == 0) free_list_.push_back(block);
}

void KvCache::set_length(SequenceId seq, int64_t tokens) {
  Sequence& s = seq_ref(seq);
  TANDEM_CHECK(tokens >= 0 && tokens <= static_cast<int64_t>(s.blocks.size()) * tokens_per_block_);
  s.length = tokens;
}

void KvCache::truncate(SequenceId seq, int64_t tokens) {
  Sequence& s = seq_ref(seq);
  s.length = std::clamp<int64_t>(tokens, 0, s.length);
  TANDEM_CHECK(s.length >= s.frozen_tokens);  // shared blocks are never rewritten
}

void KvCache::shrink_to_fit(SequenceId seq) {
  Sequence& s = seq_ref(seq);
  const size_t keep = static_cast<size_t>(blocks_for(s.length));
  while (s.blocks.size() > keep) {
    drop(s.blocks.back());
    s.blocks.pop_back();
  }
}

const int32_t* KvCache::block_table(SequenceId seq) const { return seq_ref(seq).blocks.data(); }

kernels::KvPool KvCache::layer_pool(int layer) {
  TANDEM_CHECK(layer >= 0 && static_cast<size_t>(layer) < k_.size());  // host_storage was off
  const int source = source_[layer];
  kernels::KvPool p;
  p.k = k_[source].data();
  p.v = v_[source].data();
  p.tokens_per_block = tokens_per_block_;
  p.n_kv_heads = n_kv_heads_[source];
  p.head_dim = head_dim_[source];
  return p;
}

}  // namespace tandem::model
