// bench_cuda_gemm — the invariant bf16-weight GEMM (kernels/cuda_ops.h) at
// M = 1, 4, 16, 512, 4096 on 4096×4096, 14336×4096 and 4096×14336 (N×K), with
// bf16 and f32 activations, against cuBLAS (bf16 x, f32 out, f32 compute)
// and against the device-memory ceilings measured in the same run:
//   copy: cudaMemcpy device-to-device of 2 GiB (bytes read + written / time)
//   read: a grid-stride kernel reading 2 GiB once (bytes read / time)
// Timing: CUDA events around R back-to-back launches (R chosen for ≥ 3 ms),
// 7 trials, median per launch. Weights rotate over enough copies (≥ 256 MiB)
// that repeated launches do not hit the 50 MB L2. Random data (never zeros).
// Also checks, at these shapes, that row 0 and row M-1 of each product equal
// the same rows computed alone (bitwise).
//
// At M <= 16 a shape the forward K-slices (gemm_slicing) also gets a row
// timing gemm_bf16w_sliced, the kernel the forward runs there.
//
// Usage: bench_cuda_gemm [--quick] [--variants]
//   --quick:    M = 1, 16, 4096 on 4096×4096 only
//   --variants: also time the tuning candidates (a -DTANDEM_CUDA_TUNING=ON build),
//               each first checked to give the shipping kernel's bits
//   --forward-shapes: only the forward's sliced calls at M = 1, 5 and 16 on the 0.5B and
//               8B matrices (TANDEM_CUDA_SMALL_TILE picks the small tile's variant)
//   --quant:    only the quantized GEMM (ADR 0077; quant_bench.cpp) at the 1B and 8B
//               forward's shapes, q8_0 / q4_k / q6_k, M = 1, 4, 512
//   --large-variants: only the large tile's variants at 4096³ and on the 8B
//               matrices (bf16 x) at M = 512, 1024, 2048, with the medium tile
//               at M <= 1024 (TANDEM_BENCH_LARGE_VARIANTS=a,b,.. picks which;
//               TANDEM_CUDA_LARGE_TILE picks one elsewhere; 15-17: the TMA tile, ADR 0057)
// The GEMM reads relaid weights (ADR 0057): random bf16 serves as relaid data
// directly (every shape here has k % 32 == 0, so the sizes agree); the large
// variants' points relay a random natural matrix, cuBLAS reading the natural one.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "bench_util.h"
#include "cublas_reference.h"
#include "cuda/gemm_tuning.h"
#include "dtype_convert.h"
#include "kernels/cuda_ops.h"

namespace tandem::bench {
namespace {

using kernels::DType;
namespace gpu = kernels::gpu;

std::vector<uint16_t> random_bf16(size_t count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<uint16_t> v(count);
  for (auto& h : v) h = kernels::f32_to_bf16(dist(rng));
  return v;
}

struct Shape {
  int64_t n, k;
};

void run_variants(const Shape& s, const std::vector<gpu::DeviceBuffer>& w, const gpu::DeviceBuffer& x_bf16,
                  const gpu::DeviceBuffer& x_f32, gpu::DeviceBuffer& y, const gpu::Stream& stream,
                  const Ceilings& ceil);

void run_shape(const Shape& s, const std::vector<int64_t>& ms, const gpu::Stream& stream, int sms,
               const Ceilings& ceil, kernels::gpu::testing::CublasReference& cublas, bool variants) {
  const int64_t max_m = *std::max_element(ms.begin(), ms.end());
  const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
  const int sets = std::clamp(static_cast<int>((size_t{256} << 20) / w_bytes) + 1, 1, 8);
  std::vector<gpu::DeviceBuffer> w;
  {
    const std::vector<uint16_t> host = random_bf16(static_cast<size_t>(s.n * s.k), 1);
    for (int i = 0; i < sets; ++i) {
      w.push_back(allocate(w_bytes));
      check(w.back().upload(host.data(), w_bytes, stream));
    }
  }
  gpu::DeviceBuffer x_bf16 = allocate(static_cast<size_t>(max_m * s.k) * 2);
  gpu::DeviceBuffer x_f32 = allocate(static_cast<size_t>(max_m * s.k) * 4);
  {
    std::mt19937 rng(2);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    std::vector<float> xf(static_cast<size_t>(max_m * s.k));
    for (float& f : xf) f = dist(rng);
    std::vector<uint16_t> xb(xf.size());
    for (size_t i = 0; i < xf.size(); ++i) xb[i] = kernels::f32_to_bf16(xf[i]);
    check(x_f32.upload(xf.data(), xf.size() * 4, stream));
    check(x_bf16.upload(xb.data(), xb.size() * 2, stream));
    check(stream.synchronize());
  }
  gpu::DeviceBuffer y = allocate(static_cast<size_t>(max_m * s.n) * 4);
  gpu::DeviceBuffer y_alone = allocate(static_cast<size_t>(s.n) * 4);
  // At M <= 16 the forward runs a narrow N through the K-sliced GEMM
  // (gemm_slicing: a property of the shape): those rows are timed too.
  constexpr int64_t kSlicedMaxM = 16;
  const gpu::GemmSlicing slicing = gpu::gemm_slicing(s.n, s.k);
  const size_t ws_floats = static_cast<size_t>(slicing.slices * kSlicedMaxM * s.n);
  gpu::DeviceBuffer ws = allocate(ws_floats * 4);

  for (const DType xt : {DType::bf16, DType::f32}) {
    const gpu::DeviceBuffer& x = xt == DType::bf16 ? x_bf16 : x_f32;
    const size_t x_elem = xt == DType::bf16 ? 2 : 4;
    for (const int64_t m : ms) {
      for (const bool sliced : {false, true}) {
        if (sliced && (m > kSlicedMaxM || slicing.slices == 1)) continue;
        const auto product = [&](const void* xp, int64_t rows, const gpu::DeviceBuffer& wi, float* out) {
          if (sliced)
            return gpu::gemm_bf16w_sliced(stream, xp, xt, rows, wi.as<uint16_t>(), s.n, s.k, out,
                                          ws.as<float>(), ws_floats);
          return gpu::gemm_bf16w(stream, xp, xt, rows, wi.as<uint16_t>(), s.n, s.k, out);
        };
        const double us =
            time_us([&](int i) { check(product(x.data(), m, w[i % sets], y.as<float>())); }, stream.handle());
        double cublas_us = 0;
        if (cublas.ok()) {
          cublas_us = time_us(
              [&](int i) {
                if (!cublas.gemm_bf16(stream.handle(), x_bf16.data(), m, w[i % sets].data(), s.n, s.k,
                                      y.as<float>()))
                  die("cublasGemmEx failed");
              },
              stream.handle());
        }
        // Invariance spot check at this shape: rows 0 and m-1 vs the same rows alone.
        bool invariant = true;
        check(product(x.data(), m, w[0], y.as<float>()));
        std::vector<float> in_batch(static_cast<size_t>(s.n)), alone(static_cast<size_t>(s.n));
        for (const int64_t r : {int64_t{0}, m - 1}) {
          check(y.download(in_batch.data(), in_batch.size() * 4, stream, static_cast<size_t>(r * s.n) * 4));
          const void* xr = static_cast<const char*>(x.data()) + static_cast<size_t>(r * s.k) * x_elem;
          check(product(xr, 1, w[0], y_alone.as<float>()));
          check(y_alone.download(alone.data(), alone.size() * 4, stream));
          invariant = invariant && std::memcmp(alone.data(), in_batch.data(), alone.size() * 4) == 0;
        }
        const double flops = 2.0 * m * s.n * s.k;
        const double bytes =
            static_cast<double>(w_bytes) + static_cast<double>(m * s.k * x_elem) + m * s.n * 4.0;
        const double gbs = bytes / us / 1e3;
        char tile[32];
        if (sliced)
          std::snprintf(tile, sizeof tile, "sliced/%d", slicing.slices);
        else
          std::snprintf(tile, sizeof tile, "%s", gpu::gemm_tile_name(gpu::gemm_tile_for(m, s.n, sms)));
        std::printf("%6ld %6ld %6ld  %-4s %-9s %10.1f %10.1f %8.2f %9.1f %9.0f %7.2f  %s\n",
                    static_cast<long>(m), static_cast<long>(s.n), static_cast<long>(s.k),
                    xt == DType::bf16 ? "bf16" : "f32", tile, us, cublas_us,
                    cublas_us > 0 ? cublas_us / us : 0.0, flops / us / 1e6, gbs, gbs / ceil.read_gbs,
                    invariant ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
  }
  if (variants) run_variants(s, w, x_bf16, x_f32, y, stream, ceil);
}

void run_variants(const Shape& s, const std::vector<gpu::DeviceBuffer>& w, const gpu::DeviceBuffer& x_bf16,
                  const gpu::DeviceBuffer& x_f32, gpu::DeviceBuffer& y, const gpu::Stream& stream,
                  const Ceilings& ceil) {
  const int sets = static_cast<int>(w.size());
  const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
  struct Point {
    gpu::GemmTile tile;
    int64_t m;
    DType xt;
  };
  const Point points[] = {{gpu::GemmTile::small, 1, DType::bf16},
                          {gpu::GemmTile::small, 16, DType::bf16},
                          {gpu::GemmTile::small, 1, DType::f32},
                          {gpu::GemmTile::large, 4096, DType::bf16},
                          {gpu::GemmTile::large, 4096, DType::f32}};
  for (const Point& pt : points) {
    const gpu::DeviceBuffer& x = pt.xt == DType::bf16 ? x_bf16 : x_f32;
    const size_t out = static_cast<size_t>(pt.m * s.n);
    std::vector<float> ref(out), got(out);
    check(gpu::gemm_bf16w(stream, x.data(), pt.xt, pt.m, w[0].as<uint16_t>(), s.n, s.k, y.as<float>(),
                          pt.tile));
    check(y.download(ref.data(), out * 4, stream));
    for (int v = 0; v <= gpu::gemm_tuning_variants(); ++v) {
      const char* name = gpu::gemm_tuning_variant_name(pt.tile, v);
      check(y.fill_bytes(0xFF, stream));
      Status st = gpu::gemm_bf16w_variant(pt.tile, v, stream, x.data(), pt.xt, pt.m, w[0].as<uint16_t>(), s.n,
                                          s.k, y.as<float>());
      if (st.ok()) st = y.download(got.data(), out * 4, stream);
      if (!st.ok()) {
        std::printf("  variant %s m=%ld %ldx%ld %s %s: %s\n", gpu::gemm_tile_name(pt.tile),
                    static_cast<long>(pt.m), static_cast<long>(s.n), static_cast<long>(s.k),
                    pt.xt == DType::bf16 ? "bf16" : "f32", name, st.to_string().c_str());
        continue;
      }
      const bool same = std::memcmp(ref.data(), got.data(), out * 4) == 0;
      const double us = time_us(
          [&](int i) {
            check(gpu::gemm_bf16w_variant(pt.tile, v, stream, x.data(), pt.xt, pt.m,
                                          w[i % sets].as<uint16_t>(), s.n, s.k, y.as<float>()));
          },
          stream.handle());
      std::printf(
          "  variant %s m=%ld %ldx%ld %s %-28s %9.1f us  %6.1f TFLOP/s  %.2f of read  same bits: %s\n",
          gpu::gemm_tile_name(pt.tile), static_cast<long>(pt.m), static_cast<long>(s.n),
          static_cast<long>(s.k), pt.xt == DType::bf16 ? "bf16" : "f32", name, us,
          2.0 * pt.m * s.n * s.k / us / 1e6, w_bytes / us / 1e3 / ceil.read_gbs, same ? "yes" : "NO");
      std::fflush(stdout);
    }
  }
}

// The forward's own calls (gemm_bf16w_sliced, f32 and bf16 x, M = 1, 5 and 16:
// decode, a K = 4 verify block, a batch of 16) on the matrices of the 0.5B and 8B shapes, against the
// read ceiling (weights + x + y bytes, the K-slices' partials not counted).
void run_forward_shapes(const gpu::Stream& stream, const Ceilings& ceil) {
  struct Named {
    const char* name;
    Shape s;
  };
  const Named shapes[] = {{"0.5B qkv", {1152, 896}},       {"0.5B o", {896, 896}},
                          {"0.5B gate_up", {9728, 896}},   {"0.5B down", {896, 4864}},
                          {"0.5B lm_head", {151936, 896}}, {"8B qkv", {6144, 4096}},
                          {"8B o", {4096, 4096}},          {"8B gate_up", {28672, 4096}},
                          {"8B down", {4096, 14336}},      {"8B lm_head", {128256, 4096}}};
  std::printf(
      "forward shapes: gemm_bf16w_sliced, f32 and bf16 x; small tile variants 0..%d (bits vs variant 0)\n",
      gpu::small_tile_variants() - 1);
  const std::vector<uint16_t> pattern = random_bf16(size_t{1} << 24, 1);
  for (const Named& nm : shapes) {
    const Shape& s = nm.s;
    const size_t w_elems = static_cast<size_t>(s.n * s.k), w_bytes = w_elems * 2;
    const int sets = std::clamp(static_cast<int>((size_t{512} << 20) / w_bytes) + 1, 2, 8);
    std::vector<gpu::DeviceBuffer> w;
    for (int i = 0; i < sets; ++i) {
      w.push_back(allocate(w_bytes));
      for (size_t off = 0; off < w_elems; off += pattern.size()) {
        const size_t count = std::min(pattern.size(), w_elems - off);
        check(cudaMemcpy(w.back().as<uint16_t>() + off, pattern.data(), count * 2, cudaMemcpyHostToDevice),
              "cudaMemcpy");
      }
    }
    const int64_t max_m = 16;
    std::vector<float> xh(static_cast<size_t>(max_m * s.k));
    for (size_t i = 0; i < xh.size(); ++i) xh[i] = kernels::bf16_to_f32(pattern[i]) * 1.37f;
    std::vector<uint16_t> xb(xh.size());
    for (size_t i = 0; i < xh.size(); ++i) xb[i] = kernels::f32_to_bf16(xh[i]);
    gpu::DeviceBuffer x = allocate(xh.size() * 4), x16 = allocate(xb.size() * 2);
    check(x.upload(xh.data(), xh.size() * 4, stream));
    check(x16.upload(xb.data(), xb.size() * 2, stream));
    gpu::DeviceBuffer y = allocate(static_cast<size_t>(max_m * s.n) * 4);
    const gpu::GemmSlicing plan = gpu::gemm_slicing(s.n, s.k);
    const size_t ws_floats = static_cast<size_t>(plan.slices) * max_m * s.n;
    gpu::DeviceBuffer ws = allocate(ws_floats * 4);
    for (const int64_t m : {int64_t{1}, int64_t{5}, max_m})
      for (const DType xt : {DType::f32, DType::bf16}) {
        const void* xp = xt == DType::f32 ? x.data() : x16.data();
        std::vector<float> ref(static_cast<size_t>(m * s.n)), got(ref.size());
        std::printf("  %-13s %6ld x %5ld  m=%ld %s slices %2d:", nm.name, static_cast<long>(s.n),
                    static_cast<long>(s.k), static_cast<long>(m), xt == DType::f32 ? "f32 " : "bf16",
                    plan.slices);
        for (int v = 0; v < gpu::small_tile_variants(); ++v) {
          if (gpu::small_tile_variant_retired(v)) continue;
          gpu::set_small_tile_variant(v);
          check(gpu::gemm_bf16w_sliced(stream, xp, xt, m, w[0].as<uint16_t>(), s.n, s.k, y.as<float>(),
                                       ws.as<float>(), ws_floats));
          check(y.download(v == 0 ? ref.data() : got.data(), ref.size() * 4, stream));
          const bool same = v == 0 || std::memcmp(ref.data(), got.data(), ref.size() * 4) == 0;
          const double us = time_us(
              [&](int i) {
                check(gpu::gemm_bf16w_sliced(stream, xp, xt, m, w[i % sets].as<uint16_t>(), s.n, s.k,
                                             y.as<float>(), ws.as<float>(), ws_floats));
              },
              stream.handle());
          const double bytes =
              static_cast<double>(w_bytes) + m * s.k * (xt == DType::f32 ? 4.0 : 2.0) + m * s.n * 4.0;
          std::printf("  v%d %7.1f us %.2f%s", v, us, bytes / us / 1e3 / ceil.read_gbs,
                      same ? "" : " BITS DIFFER");
        }
        std::printf("\n");
        std::fflush(stdout);
      }
  }
  gpu::set_small_tile_variant(-1);
}

// The large tile's variants (TANDEM_CUDA_LARGE_TILE, ADRs 0044, 0053, 0055)
// at 4096³ (plain gemm_bf16w, bf16 and f32 x, against cuBLAS) and on the 8B
// forward's matrices at M = 512, 1024, 2048 (gemm_bf16w_sliced, bf16 x:
// prefill chunks; against cuBLAS's unsliced product); bits checked against
// the first variant timed.
void run_large_variants(const gpu::Stream& stream, kernels::gpu::testing::CublasReference& cublas) {
  struct Point {
    const char* name;
    Shape s;
    int64_t m;
    DType xt;
    bool sliced;
  };
  std::vector<Point> points = {{"4096^3", {4096, 4096}, 4096, DType::bf16, false},
                               {"4096^3", {4096, 4096}, 4096, DType::f32, false}};
  // The 8B forward's matrices with bf16 x (the default numerics, ADR 0054) at
  // prefill chunks of 512, 1024 and 2048 rows; the large tile forced (at
  // M = 512 gemm_tile_for picks the medium tile for N = 4096: timed too).
  // TANDEM_BENCH_LARGE_POINTS=quick: 4096³ bf16, the four at M = 1024, o and down at 512.
  const char* which = std::getenv("TANDEM_BENCH_LARGE_POINTS");
  const bool few = which != nullptr && std::strcmp(which, "quick") == 0;
  if (few) points.pop_back();
  for (const int64_t m : {512, 1024, 2048}) {
    if (few && m == 2048) break;
    if (!few || m == 1024) points.push_back({"8B qkv", {6144, 4096}, m, DType::bf16, true});
    points.push_back({"8B o", {4096, 4096}, m, DType::bf16, true});
    if (!few || m == 1024) points.push_back({"8B gate_up", {28672, 4096}, m, DType::bf16, true});
    points.push_back({"8B down", {4096, 14336}, m, DType::bf16, true});
  }
  // TANDEM_BENCH_LARGE_VARIANTS=a,b,c (optional): only these, bits vs the first.
  std::vector<int> list;
  if (const char* e = std::getenv("TANDEM_BENCH_LARGE_VARIANTS")) {
    for (const char* p = e; *p != '\0';) {
      char* end = nullptr;
      const long v = std::strtol(p, &end, 10);
      if (end == p) break;
      if (v >= 0 && v < gpu::large_tile_variants()) list.push_back(static_cast<int>(v));
      p = *end == ',' ? end + 1 : end;
    }
  }
  if (list.empty())
    for (int v = 0; v < gpu::large_tile_variants(); ++v) list.push_back(v);
  std::printf("large tile variants (of 0..%d; TFLOP/s counts 2·M·N·K; bits vs variant %d)\n",
              gpu::large_tile_variants() - 1, list[0]);
  for (const Point& pt : points) {
    const Shape& s = pt.s;
    const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
    gpu::DeviceBuffer w = allocate(w_bytes);
    check(w.upload(random_bf16(static_cast<size_t>(s.n * s.k), 5).data(), w_bytes, stream));
    const size_t x_elems = static_cast<size_t>(pt.m * s.k);
    gpu::DeviceBuffer x = allocate(x_elems * 4);
    {
      std::mt19937 rng(6);
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      std::vector<float> xf(x_elems);
      for (float& f : xf) f = dist(rng);
      if (pt.xt == DType::f32) {
        check(x.upload(xf.data(), x_elems * 4, stream));
      } else {
        std::vector<uint16_t> xb(x_elems);
        for (size_t i = 0; i < x_elems; ++i) xb[i] = kernels::f32_to_bf16(xf[i]);
        check(x.upload(xb.data(), x_elems * 2, stream));
      }
    }
    const size_t out = static_cast<size_t>(pt.m * s.n);
    gpu::DeviceBuffer y = allocate(out * 4);
    const gpu::GemmSlicing plan = gpu::gemm_slicing(s.n, s.k);
    const size_t ws_floats = pt.sliced ? static_cast<size_t>(plan.slices) * out : 1;
    gpu::DeviceBuffer ws = allocate(ws_floats * 4);
    gpu::DeviceBuffer wr = allocate(static_cast<size_t>(s.n * gpu::relaid_row_pitch(s.k)) * 2);
    check(gpu::relay_weights_bf16(stream, w.as<uint16_t>(), s.n, s.k, wr.as<uint16_t>()));
    gpu::GemmTile tile = gpu::GemmTile::large;
    auto call = [&] {
      if (pt.sliced) {
        check(gpu::gemm_bf16w_sliced(stream, x.data(), pt.xt, pt.m, wr.as<uint16_t>(), s.n, s.k,
                                     y.as<float>(), ws.as<float>(), ws_floats, tile));
      } else {
        check(
            gpu::gemm_bf16w(stream, x.data(), pt.xt, pt.m, wr.as<uint16_t>(), s.n, s.k, y.as<float>(), tile));
      }
    };
    double cublas_us = 0;
    if (cublas.ok() && pt.xt == DType::bf16) {
      cublas_us = time_us(
          [&](int) {
            if (!cublas.gemm_bf16(stream.handle(), x.data(), pt.m, w.data(), s.n, s.k, y.as<float>()))
              die("cublasGemmEx failed");
          },
          stream.handle());
    }
    std::printf("  %-10s %5ld x %5ld x %5ld %-4s%s", pt.name, static_cast<long>(pt.m), static_cast<long>(s.n),
                static_cast<long>(s.k), pt.xt == DType::bf16 ? "bf16" : "f32", pt.sliced ? " sliced" : "");
    if (cublas_us > 0) std::printf("  cuBLAS %.1f us", cublas_us);
    std::printf("\n");
    std::vector<float> ref(out), got(out);
    for (size_t i = 0; i <= list.size(); ++i) {
      const int v = i < list.size() ? list[i] : -1;  // -1: the medium tile (M <= 1024 only)
      if (v < 0 && pt.m > 1024) break;
      if (v >= 0) gpu::set_large_tile_variant(v);
      tile = v >= 0 ? gpu::GemmTile::large : gpu::GemmTile::medium;
      check(y.fill_bytes(0xFF, stream));
      call();
      check(y.download(i == 0 ? ref.data() : got.data(), out * 4, stream));
      const bool same = i == 0 || std::memcmp(ref.data(), got.data(), out * 4) == 0;
      const double us = time_us([&](int) { call(); }, stream.handle());
      char versus[32] = "";
      if (cublas_us > 0) std::snprintf(versus, sizeof versus, " %.2f of cuBLAS", cublas_us / us);
      char name[16];
      std::snprintf(name, sizeof name, v >= 0 ? "v%d" : "medium", v);
      std::printf("    %-6s %9.1f us %7.1f TFLOP/s%s%s\n", name, us, 2.0 * pt.m * s.n * s.k / us / 1e6,
                  versus, same ? "" : "  BITS DIFFER");
      std::fflush(stdout);
    }
  }
  gpu::set_large_tile_variant(-1);
}

}  // namespace
}  // namespace tandem::bench

int main(int argc, char** argv) {
  using namespace tandem::bench;
  bool quick = false, variants = false, forward_shapes = false, large_variants = false, quant = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--variants") == 0) {
      variants = true;
    } else if (std::strcmp(argv[i], "--forward-shapes") == 0) {
      forward_shapes = true;
    } else if (std::strcmp(argv[i], "--large-variants") == 0) {
      large_variants = true;
    } else if (std::strcmp(argv[i], "--quant") == 0) {
      quant = true;
    } else {
      std::fprintf(
          stderr,
          "usage: bench_cuda_gemm [--quick] [--variants] [--forward-shapes] [--large-variants] [--quant]\n");
      return 2;
    }
  }
  if (variants && tandem::kernels::gpu::gemm_tuning_variants() == 0) {
    std::fprintf(stderr, "bench_cuda_gemm: --variants needs a -DTANDEM_CUDA_TUNING=ON build\n");
    return 2;
  }
  if (tandem::kernels::gpu::device_count() == 0) {
    std::printf("skipped: no CUDA device\n");
    return 0;
  }
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  int driver = 0;
  cudaDriverGetVersion(&driver);
  std::printf("device: %s, sm_%d%d, %d SMs, %.1f GiB, L2 %d MiB, driver %d\n", prop.name, prop.major,
              prop.minor, prop.multiProcessorCount, prop.totalGlobalMem / 1073741824.0,
              prop.l2CacheSize >> 20, driver);
  tandem::Expected<tandem::kernels::gpu::Stream> stream = tandem::kernels::gpu::Stream::create();
  if (!stream.ok()) die(stream.status().to_string());
  const Ceilings ceil = measure_ceilings(*stream);
  std::printf("ceilings: copy %.0f GB/s (read+write), read %.0f GB/s\n", ceil.copy_gbs, ceil.read_gbs);
  if (forward_shapes) {
    run_forward_shapes(*stream, ceil);
    return 0;
  }
  if (quant) {
    run_quant_shapes(*stream, ceil);
    return 0;
  }
  tandem::kernels::gpu::testing::CublasReference cublas;
  if (!cublas.ok()) std::printf("cuBLAS: %s (its columns read 0)\n", cublas.error().c_str());
  if (large_variants) {
    run_large_variants(*stream, cublas);
    return 0;
  }
  std::printf("%6s %6s %6s  %-4s %-9s %10s %10s %8s %9s %9s %7s  %s\n", "M", "N", "K", "x", "tile", "us",
              "cublas_us", "vs_cubl", "TFLOP/s", "GB/s", "of_read", "rows==alone");
  const std::vector<int64_t> ms =
      quick ? std::vector<int64_t>{1, 16, 4096} : std::vector<int64_t>{1, 4, 16, 512, 4096};
  run_shape({4096, 4096}, ms, *stream, prop.multiProcessorCount, ceil, cublas, variants);
  if (!quick) {
    run_shape({14336, 4096}, ms, *stream, prop.multiProcessorCount, ceil, cublas, variants);
    run_shape({4096, 14336}, ms, *stream, prop.multiProcessorCount, ceil, cublas, variants);
  }
  std::printf(
      "vs_cubl = cuBLAS time / tandem time (> 1: tandem faster); of_read = GB/s / read ceiling;\n"
      "GB/s counts W + x + y once (sliced/S: the K-sliced GEMM the forward runs at M <= 16, its\n"
      "partial slabs not counted); cuBLAS always runs bf16 x.\n");
  return 0;
}
