// matmul.cpp — the public matmul: threading and the two reduction policies.
//
// invariant: threads split the output panels (N); every output is one FMA
// chain over the whole of K inside the ISA's panel kernel, so its bits do not
// depend on M, on the thread count or on which rows share the call.
//
// splitk (M > 1 only): K is cut into `parts` slices (count from the thread
// count and the panel count, see splitk_parts); threads take (slice, panel)
// items, write partial sums to scratch, then partials are added in slice
// order. The result depends on M (M == 1 takes the invariant path), which is
// exactly what the exactness probe must catch.
#include <algorithm>
#include <vector>

#include "core/check.h"
#include "dtype_convert.h"
#include "kernel_table.h"
#include "kernels/prefetch.h"

namespace tandem::kernels {
namespace quant {
void matmul_quantized(const Ctx& ctx, const float* x, int64_t m, const PackedMatrix& w, float* y,
                      int64_t ldy);
}  // namespace quant
namespace {

// Shortest K slice worth a separate partial sum.
constexpr int64_t kMinSplitK = 64;

void run_panels(const KernelTable& kt, const MatmulArgs& a) {
  if (a.xb != nullptr) {
    kt.matmul_bf16_pairs(a);
  } else {
    kt.matmul_panels(a);
  }
}

int pool_threads(const Ctx& ctx) { return ctx.pool != nullptr ? ctx.pool->size() : 1; }

void run_parallel(const Ctx& ctx, int64_t n, int64_t granule, const auto& fn) {
  if (ctx.pool == nullptr || ctx.pool->size() == 1) {
    if (n > 0) fn(int64_t{0}, n);
    return;
  }
  ctx.pool->parallel_for(n, granule, [&](int64_t begin, int64_t end, int) { fn(begin, end); });
}

}  // namespace

// Number of K slices splitk uses: at least 2 (so M > 1 always differs in
// order from M == 1), more when there are too few panels to give every thread
// several items; never slices shorter than kMinSplitK.
int64_t splitk_parts(int64_t m, int64_t n, int64_t k, int threads) {
  if (m <= 1) return 1;
  const int64_t panels = panel_count(n);
  const int64_t want = std::max<int64_t>(2, (4 * threads + panels - 1) / panels);
  return std::max<int64_t>(1, std::min(want, k / kMinSplitK));
}

namespace {

// Where K slice `part` of `parts` starts; even for the bf16 pairs chain (its
// pairs start at even k), k itself at the end.
int64_t slice_edge(int64_t k, int64_t part, int64_t parts, bool pairs) {
  const int64_t edge = k * part / parts;
  return pairs && part < parts ? edge & ~int64_t{1} : edge;
}

// Rows of x rounded to bf16 as Activations::bf16 defines (ops.h), ldxb =
// k rounded up to even (a zero past an odd row's end). Per thread, grown to
// the largest call seen.
const uint16_t* bf16_rows(const float* x, int64_t m, int64_t k, int64_t* ldxb) {
  thread_local std::vector<uint16_t> rows;
  *ldxb = (k + 1) & ~int64_t{1};
  const size_t need = static_cast<size_t>(m * *ldxb);
  if (rows.size() < need) rows.resize(need);
  for (int64_t r = 0; r < m; ++r) {
    uint16_t* out = rows.data() + r * *ldxb;
    const float* in = x + r * k;
    for (int64_t i = 0; i < k; ++i) out[i] = round_to_bf16(in[i]);
    if (*ldxb != k) out[k] = 0;
  }
  return rows.data();
}

void matmul_splitk(const Ctx& ctx, const KernelTable& kt, const MatmulArgs& whole, int64_t parts) {
  const int64_t m = whole.m, n = whole.n, k = whole.k;
  const int64_t panels = panel_count(n);
  // Scratch grows to the largest call seen by this thread (the only allocation
  // a matmul makes, and only in splitk mode).
  thread_local std::vector<float> scratch;
  const size_t need = static_cast<size_t>(parts) * m * n;
  if (scratch.size() < need) scratch.resize(need);
  float* partial = scratch.data();
  run_parallel(ctx, parts * panels, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end;) {
      const int64_t part = item / panels;
      const int64_t first_panel = item % panels;
      const int64_t last_panel = std::min(panels, first_panel + (end - item));
      MatmulArgs a = whole;
      a.k_begin = slice_edge(k, part, parts, whole.xb != nullptr);
      a.k_end = slice_edge(k, part + 1, parts, whole.xb != nullptr);
      a.panel_begin = first_panel;
      a.panel_end = last_panel;
      a.y = partial + part * m * n;
      a.ldy = n;
      run_panels(kt, a);
      item += last_panel - first_panel;
    }
  });
  run_parallel(ctx, n, kPanel, [&](int64_t begin, int64_t end) {
    for (int64_t r = 0; r < m; ++r) {
      float* yr = whole.y + r * whole.ldy;
      for (int64_t c = begin; c < end; ++c) {
        float sum = partial[r * n + c];
        for (int64_t part = 1; part < parts; ++part) sum += partial[(part * m + r) * n + c];
        yr[c] = sum;
      }
    }
  });
}

}  // namespace

void matmul(const Ctx& ctx, const float* x, int64_t m, const PackedMatrix& w, float* y) {
  if (m <= 0) return;
  TANDEM_CHECK(!w.released());  // its weights live on a device now (ADR 0067)
  if (!w.parts().empty()) {     // stacked: each part fills its own columns
    int64_t col = 0;
    for (const PackedMatrix& part : w.parts()) {
      quant::matmul_quantized(ctx, x, m, part, y + col, w.n());
      col += part.n();
    }
    return;
  }
  TANDEM_CHECK(w.data() != nullptr);
  if (dtype_is_quantized(w.dtype())) {
    quant::matmul_quantized(ctx, x, m, w, y, w.n());
    return;
  }
  const KernelTable& kt = kernels_for(ctx.isa);
  MatmulArgs a;
  a.x = x;
  a.ldx = w.k();
  a.m = m;
  a.w = w.data();
  a.dtype = w.dtype();
  a.k = w.k();
  a.k_begin = 0;
  a.k_end = w.k();
  a.y = y;
  a.ldy = w.n();
  a.n = w.n();
  if (ctx.act == Activations::bf16 && w.dtype() == DType::bf16) a.xb = bf16_rows(x, m, w.k(), &a.ldxb);
  const int64_t panels = panel_count(w.n());
  if (ctx.gemm == GemmMode::splitk) {
    const int64_t parts = splitk_parts(m, w.n(), w.k(), pool_threads(ctx));
    if (parts > 1) {
      matmul_splitk(ctx, kt, a, parts);
      return;
    }
  }
  auto run = [&](int64_t begin, int64_t end) {
    MatmulArgs part = a;
    part.panel_begin = begin;
    part.panel_end = end;
    run_panels(kt, part);
  };
  const int64_t piece =  // a lone row's shared split (ADR 0092), 0 for the static one
      m == 1 ? share_units(prefetch_policy(), kPanel * w.k() * static_cast<int64_t>(dtype_size(w.dtype())))
             : 0;
  if (piece > 0 && ctx.pool != nullptr) {
    ctx.pool->parallel_for_shared(panels, 1, piece, [&](int64_t b, int64_t e, int) { run(b, e); });
    return;
  }
  run_parallel(ctx, panels, 1, run);
}

}  // namespace tandem::kernels
