// rowwise.cpp — the public row-wise and element-wise ops. Threads split rows
// (or contiguous element ranges); each row/element is computed by the same
// table function whatever the split, so results do not depend on it.
#include "kernel_table.h"

namespace tandem::kernels {
namespace {

// Element-wise ops below this size run on the calling thread only: the
// fork-join would cost more than it saves.
constexpr int64_t kParallelElements = 1 << 15;
constexpr int64_t kElementGranule = 1024;

void for_rows(const Ctx& ctx, int64_t rows, const auto& fn) {
  if (ctx.pool == nullptr || ctx.pool->size() == 1 || rows < 2) {
    for (int64_t r = 0; r < rows; ++r) fn(r);
    return;
  }
  ctx.pool->parallel_for(rows, 1, [&](int64_t begin, int64_t end, int) {
    for (int64_t r = begin; r < end; ++r) fn(r);
  });
}

void for_elements(const Ctx& ctx, int64_t count, const auto& fn) {
  if (ctx.pool == nullptr || ctx.pool->size() == 1 || count < kParallelElements) {
    if (count > 0) fn(int64_t{0}, count);
    return;
  }
  ctx.pool->parallel_for(count, kElementGranule, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

}  // namespace

void rmsnorm(const Ctx& ctx, const float* x, const float* weight, float* y, int64_t rows, int64_t dim,
             float eps) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for_rows(ctx, rows, [&](int64_t r) { kt.rmsnorm_row(x + r * dim, weight, y + r * dim, dim, eps); });
}

void softmax(const Ctx& ctx, float* x, int64_t rows, int64_t n) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for_rows(ctx, rows, [&](int64_t r) { kt.softmax_row(x + r * n, n); });
}

void swiglu(const Ctx& ctx, const float* gate, const float* up, float* out, int64_t count) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for_elements(ctx, count, [&](int64_t b, int64_t e) { kt.swiglu(gate + b, up + b, out + b, e - b); });
}

void gelu_tanh_gate(const Ctx& ctx, const float* gate, const float* up, float* out, int64_t count) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for_elements(ctx, count,
               [&](int64_t b, int64_t e) { kt.gelu_tanh_gate(gate + b, up + b, out + b, e - b); });
}

void add_inplace(const Ctx& ctx, float* y, const float* x, int64_t count) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for_elements(ctx, count, [&](int64_t b, int64_t e) { kt.add_inplace(y + b, x + b, e - b); });
}

void add_bias(const Ctx& ctx, float* y, const float* bias, int64_t rows, int64_t n) {
  const KernelTable& kt = kernels_for(ctx.isa);
  for (int64_t r = 0; r < rows; ++r) kt.add_inplace(y + r * n, bias, n);
}

}  // namespace tandem::kernels
