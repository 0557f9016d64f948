// simd/attention_impl.h — one (query, head) of paged attention over a vector
// wrapper V, instantiated per ISA. Internal linkage.
//
// Order of arithmetic (a pure function of the query, lo, p and the keys):
// key chunks [c*C, c*C + C) ∩ [lo, p] in increasing c (C = kAttentionChunk);
// per key, q·k with lane accumulators over head_dim in index order and a
// fixed shuffle-tree reduction; per chunk one rescale of the running state by
// exp(old_max - new_max), then exp(s - new_max) weights added to the running
// sum and FMA'd into the output accumulator in key order.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernel_table.h"

namespace tandem::kernels {
namespace {

template <class V>
struct AttentionKernel {
  using F = typename V::F;
  static constexpr int L = V::kLanes;
  static constexpr int kMaxVectors = kMaxHeadDim / L;

  static const float* row(const float* plane, const KvPool& pool, const int32_t* table, int32_t pos,
                          int kv_head) {
    const int64_t block = table[pos / pool.tokens_per_block];
    const int64_t slot = pos % pool.tokens_per_block;
    return plane + ((block * pool.tokens_per_block + slot) * pool.n_kv_heads + kv_head) * pool.head_dim;
  }

  static void attend(const AttendArgs& a) {
    const KvPool& pool = *a.pool;
    const int d = pool.head_dim;
    const int nv = (d + L - 1) / L;
    F q[kMaxVectors], acc[kMaxVectors];
    for (int j = 0; j < nv; ++j) {
      q[j] = V::load_partial(a.q + j * L, d - j * L);
      acc[j] = V::zero();
    }
    alignas(64) float scores[kAttentionChunk];
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int32_t chunk = a.lo - a.lo % kAttentionChunk; chunk <= a.p; chunk += kAttentionChunk) {
      const int32_t first = std::max(chunk, a.lo);
      const int32_t last = std::min(chunk + kAttentionChunk - 1, a.p);
      const int count = last - first + 1;
      float chunk_max = -INFINITY;
      for (int i = 0; i < count; ++i) {
        const float* key = row(pool.k, pool, a.block_table, first + i, a.kv_head);
        F dot = V::zero();
        for (int j = 0; j < nv; ++j) dot = V::fmadd(q[j], V::load_partial(key + j * L, d - j * L), dot);
        scores[i] = soft_cap(V::reduce_add(dot) * a.scale, a.softcap);
        chunk_max = std::fmax(chunk_max, scores[i]);
      }
      const float new_max = std::fmax(running_max, chunk_max);
      // exp of the rescale and of the scores through the same vector exp.
      float rescale_lanes[L];
      V::store(rescale_lanes, V::exp(V::set1(running_max - new_max)));
      const F rescale = V::set1(rescale_lanes[0]);
      running_sum *= rescale_lanes[0];
      for (int j = 0; j < nv; ++j) acc[j] = V::mul(acc[j], rescale);
      const F vmax = V::set1(new_max);
      for (int i = 0; i < count; i += L) {
        const int c = count - i;
        const F e = V::exp(V::sub(V::load_partial(scores + i, c), vmax));
        if (c >= L) {
          V::store(scores + i, e);
        } else {
          V::store_partial(scores + i, e, c);
        }
      }
      for (int i = 0; i < count; ++i) {
        running_sum += scores[i];
        const float* value = row(pool.v, pool, a.block_table, first + i, a.kv_head);
        const F w = V::set1(scores[i]);
        for (int j = 0; j < nv; ++j) acc[j] = V::fmadd(w, V::load_partial(value + j * L, d - j * L), acc[j]);
      }
      running_max = new_max;
    }
    const F inv = V::set1(1.0f / running_sum);
    for (int j = 0; j < nv; ++j) {
      const int c = d - j * L;
      if (c >= L) {
        V::store(a.out + j * L, V::mul(acc[j], inv));
      } else {
        V::store_partial(a.out + j * L, V::mul(acc[j], inv), c);
      }
    }
  }
};

}  // namespace
}  // namespace tandem::kernels
