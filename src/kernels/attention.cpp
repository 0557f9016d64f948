// attention.cpp — the public kv_write and attention ops. Threads share
// (row, head) pairs; each pair runs the ISA's attend kernel, whose arithmetic
// depends only on the query's position, window and the keys — never on the
// other rows in the call.
#include <algorithm>
#include <cstring>

#include "core/check.h"
#include "kernel_table.h"

namespace tandem::kernels {

void kv_write(const KvPool& pool, const float* k_new, const float* v_new, int64_t rows,
              const int32_t* positions, const int32_t* const* block_tables) {
  const int64_t row_floats = static_cast<int64_t>(pool.n_kv_heads) * pool.head_dim;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t pos = positions[r];
    TANDEM_CHECK(pos >= 0);
    const int64_t block = block_tables[r][pos / pool.tokens_per_block];
    const int64_t offset = (block * pool.tokens_per_block + pos % pool.tokens_per_block) * row_floats;
    std::memcpy(pool.k + offset, k_new + r * row_floats, row_floats * sizeof(float));
    std::memcpy(pool.v + offset, v_new + r * row_floats, row_floats * sizeof(float));
  }
}

void attention(const Ctx& ctx, const float* q, int64_t rows, int n_heads, const KvPool& pool,
               const int32_t* positions, const int32_t* const* block_tables, float scale, int window,
               float* out, float softcap) {
  TANDEM_CHECK(pool.n_kv_heads > 0 && n_heads % pool.n_kv_heads == 0);
  TANDEM_CHECK(pool.head_dim > 0 && pool.head_dim <= kMaxHeadDim && pool.tokens_per_block > 0);
  const KernelTable& kt = kernels_for(ctx.isa);
  const int group = n_heads / pool.n_kv_heads;
  const int64_t d = pool.head_dim;
  auto one = [&](int64_t item) {
    const int64_t r = item / n_heads;
    const int h = static_cast<int>(item % n_heads);
    AttendArgs a;
    a.q = q + (r * n_heads + h) * d;
    a.pool = &pool;
    a.block_table = block_tables[r];
    a.kv_head = h / group;
    a.p = positions[r];
    a.lo = window > 0 ? std::max(0, a.p - window + 1) : 0;
    a.scale = scale;
    a.softcap = softcap;
    a.out = out + (r * n_heads + h) * d;
    TANDEM_CHECK(a.p >= 0);
    kt.attend(a);
  };
  const int64_t items = rows * n_heads;
  if (ctx.pool == nullptr || ctx.pool->size() == 1) {
    for (int64_t i = 0; i < items; ++i) one(i);
  } else {
    // Shared pieces (ADR 0092): a causal row's cost grows with its position,
    // so equal static shares of a prefill chunk's rows are unequal work.
    ctx.pool->parallel_for_shared(items, 1, 1, [&](int64_t b, int64_t e, int) {
      for (int64_t i = b; i < e; ++i) one(i);
    });
  }
}

}  // namespace tandem::kernels
