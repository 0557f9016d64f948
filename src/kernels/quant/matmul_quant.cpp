// quant/matmul_quant.cpp — the public matmul for quantized weights:
// activation quantization, threading, and the splitk option.
//
// invariant: x's rows are quantized once (row-local), threads split the
// output groups (N); each output is one chain over all of k's 32-blocks in
// the ISA's kernel. splitk (M > 1): k's blocks are cut into slices
// (splitk_parts), partial chains are added in slice order — M-dependent,
// which the exactness probe must catch (as for f32/bf16 weights).
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "kernel_table.h"
#include "kernels/prefetch.h"

namespace tandem::kernels::quant {
namespace {

void run_parallel(const Ctx& ctx, int64_t n, const auto& fn) {
  if (ctx.pool == nullptr || ctx.pool->size() == 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  ctx.pool->parallel_for(n, 1, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

}  // namespace

// y's rows are ldy apart (a stacked matrix's part writes a column range).
void matmul_quantized(const Ctx& ctx, const float* x, int64_t m, const PackedMatrix& w, float* y,
                      int64_t ldy) {
  const KernelTable& kt = kernels_for(ctx.isa);
  const int64_t k = w.k(), n = w.n(), blocks = k / 32;
  // Scratch grows to the largest call on this thread (see ops.h).
  thread_local std::vector<ActBlock> xq;
  thread_local std::vector<float> partial;
  if (xq.size() < static_cast<size_t>(m * blocks)) xq.resize(static_cast<size_t>(m * blocks));
  for (int64_t r = 0; r < m; ++r) kt.quantize_act(x + r * k, k, xq.data() + r * blocks);
  QuantMatmulArgs a;
  a.x = xq.data();
  a.m = m;
  a.w = w.data();
  a.dtype = w.dtype();
  a.k = k;
  a.block_begin = 0;
  a.block_end = blocks;
  a.y = y;
  a.ldy = ldy;
  a.n = n;
  const int64_t groups = group_count(n);
  const int threads = ctx.pool != nullptr ? ctx.pool->size() : 1;
  const DType t = w.dtype();
  a.streams =
      row_streams(prefetch_policy(), t == DType::q4_k || t == DType::q5_k || t == DType::q6_k, threads);
  // splitk counts in 64-column panels and 64-element slices; here the units
  // are 16-column groups and 32-element blocks, so ask with panels' worth.
  const int64_t parts =
      ctx.gemm == GemmMode::splitk ? std::min(splitk_parts(m, n, k, threads), blocks) : int64_t{1};
  if (parts <= 1) {
    auto run = [&](int64_t group_begin, int64_t group_end) {
      QuantMatmulArgs part = a;
      part.group_begin = group_begin;
      part.group_end = std::min(groups, group_end);
      kt.matmul_quant(part);
    };
    // A lone row's shared split (ADR 0092) cuts pieces at any group.
    const int64_t piece = m == 1 ? share_units(prefetch_policy(), layout_of(t).group_bytes(k)) : 0;
    if (piece > 0 && ctx.pool != nullptr) {
      ctx.pool->parallel_for_shared(groups, 1, piece, [&](int64_t b, int64_t e, int) { run(b, e); });
      return;
    }
    // Groups in chunks of 4 (64 columns): a thread's share is one stream.
    run_parallel(ctx, (groups + 3) / 4, [&](int64_t b, int64_t e) { run(b * 4, e * 4); });
    return;
  }
  const size_t need = static_cast<size_t>(parts * m * n);
  if (partial.size() < need) partial.resize(need);
  float* sums = partial.data();  // (thread_local: the workers must not name it)
  run_parallel(ctx, parts * groups, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t part = item / groups, first = item % groups;
      const int64_t last = std::min(groups, first + (end - item));
      QuantMatmulArgs s = a;
      s.block_begin = blocks * part / parts;
      s.block_end = blocks * (part + 1) / parts;
      s.group_begin = first;
      s.group_end = last;
      s.y = sums + part * m * n;
      s.ldy = n;
      kt.matmul_quant(s);
      item += last - first;
    }
  });
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      float sum = sums[r * n + c];
      for (int64_t part = 1; part < parts; ++part) sum += sums[(part * m + r) * n + c];
      y[r * ldy + c] = sum;
    }
  }
}

}  // namespace tandem::kernels::quant
