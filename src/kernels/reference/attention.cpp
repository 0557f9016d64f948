// reference/attention.cpp — one (query, head) of paged attention, scalar.
//
// Keys [lo, p] are visited in chunks [c*C, c*C + C) ∩ [lo, p] (C =
// kAttentionChunk). Per chunk: scores s_i = scale * (q · k_i) with a
// sequential dot product, chunk max, then the running state (max, sum, acc)
// is rescaled once by exp(old_max - new_max) and the chunk's exp(s_i -
// new_max) weights and values are added in key order.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "reference/reference.h"

namespace tandem::kernels::reference {

void attend(const AttendArgs& a) {
  const KvPool& pool = *a.pool;
  const int d = pool.head_dim;
  TANDEM_CHECK(d <= kMaxHeadDim);
  float acc[kMaxHeadDim];
  float scores[kAttentionChunk];
  std::fill(acc, acc + d, 0.0f);
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int32_t chunk_begin = a.lo - a.lo % kAttentionChunk; chunk_begin <= a.p;
       chunk_begin += kAttentionChunk) {
    const int32_t first = std::max(chunk_begin, a.lo);
    const int32_t last = std::min(chunk_begin + kAttentionChunk - 1, a.p);
    float chunk_max = -INFINITY;
    for (int32_t pos = first; pos <= last; ++pos) {
      const float* key = kv_row(pool.k, pool, a.block_table, pos, a.kv_head);
      float dot = 0.0f;
      for (int i = 0; i < d; ++i) dot += a.q[i] * key[i];
      const float s = soft_cap(dot * a.scale, a.softcap);
      scores[pos - first] = s;
      chunk_max = std::fmax(chunk_max, s);
    }
    const float new_max = std::fmax(running_max, chunk_max);
    const float rescale = std::exp(running_max - new_max);  // exp(-inf) = 0 on the first chunk
    running_sum *= rescale;
    for (int i = 0; i < d; ++i) acc[i] *= rescale;
    for (int32_t pos = first; pos <= last; ++pos) {
      const float e = std::exp(scores[pos - first] - new_max);
      running_sum += e;
      const float* value = kv_row(pool.v, pool, a.block_table, pos, a.kv_head);
      for (int i = 0; i < d; ++i) acc[i] += e * value[i];
    }
    running_max = new_max;
  }
  const float inv = 1.0f / running_sum;
  for (int i = 0; i < d; ++i) a.out[i] = acc[i] * inv;
}

}  // namespace tandem::kernels::reference
