// The CUDA bf16-weight GEMM (kernels/cuda_ops.h): bitwise batch invariance
// (row alone == the same row inside an M-row call, M = 1..64 and large M;
// every tile shape gives the same bits), accuracy against a CPU double
// reference within a derived bound, agreement with cuBLAS, and argument
// errors as Status values. GPU tests skip without a device; the argument
// checks run everywhere (they fail before touching the device).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <vector>

#include "cublas_reference.h"
#include "cuda/gemm_tuning.h"
#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::from_bf16;
using testing::random_floats;
using testing::same_bits;
using testing::to_bf16;

// W (bf16 [n][k]) and x (max_m rows of bf16 or f32) on the device, with the
// exact values the device sees (bf16-rounded where bf16) kept on the host.
struct Problem {
  int64_t n = 0, k = 0, max_m = 0;
  DType x_dtype = DType::bf16;
  std::vector<float> w_values, x_values;
  DeviceBuffer w, x;       // w relaid (the GEMM's layout)
  DeviceBuffer w_natural;  // natural rows (the cuBLAS reference)
};

Problem make_problem(int64_t n, int64_t k, int64_t max_m, DType x_dtype, uint32_t seed,
                     const Stream& stream) {
  Problem p;
  p.n = n, p.k = k, p.max_m = max_m, p.x_dtype = x_dtype;
  const std::vector<uint16_t> w_bits = to_bf16(random_floats(n * k, seed));
  p.w_values = from_bf16(w_bits);
  p.w = testing::to_device_weights(w_bits, n, k, stream);
  p.w_natural = testing::to_device(w_bits, stream);
  std::vector<float> x = random_floats(max_m * k, seed + 1);
  if (x_dtype == DType::bf16) {
    const std::vector<uint16_t> x_bits = to_bf16(x);
    p.x_values = from_bf16(x_bits);
    p.x = testing::to_device(x_bits, stream);
  } else {
    p.x_values = x;
    p.x = testing::to_device(x, stream);
  }
  return p;
}

// Rows [row0, row0 + m) of x times Wᵀ, into a poisoned buffer.
std::vector<float> run(const Problem& p, int64_t row0, int64_t m, const Stream& stream,
                       GemmTile tile = GemmTile::automatic) {
  DeviceBuffer y = testing::poisoned(static_cast<size_t>(m * p.n) * sizeof(float), stream);
  const size_t x_elem = p.x_dtype == DType::bf16 ? 2 : 4;
  const void* x = static_cast<const char*>(p.x.data()) + row0 * p.k * x_elem;
  const Status st = gemm_bf16w(stream, x, p.x_dtype, m, p.w.as<uint16_t>(), p.n, p.k, y.as<float>(), tile);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return testing::to_host<float>(y, m * p.n, stream);
}

bool all_finite(const std::vector<float>& v) {
  for (float f : v) {
    if (!std::isfinite(f)) return false;
  }
  return true;
}

class GemmInvariance : public ::testing::TestWithParam<DType> {};

TEST_P(GemmInvariance, RowAloneEqualsRowInsideEveryBatchUpTo64) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // n = 200: a partial 16-row fragment and partial tiles; k = 136: a partial 64-wide k tile.
  const Problem p = make_problem(200, 136, 64, GetParam(), 7, *stream);
  std::vector<std::vector<float>> alone(64);
  for (int64_t r = 0; r < 64; ++r) {
    alone[r] = run(p, r, 1, *stream);
    ASSERT_TRUE(all_finite(alone[r])) << "row " << r << " not fully written";
  }
  for (int64_t m = 1; m <= 64; ++m) {
    const std::vector<float> y = run(p, 0, m, *stream);
    ASSERT_TRUE(all_finite(y)) << "m=" << m << ": an output was not written";
    for (int64_t r = 0; r < m; ++r) {
      ASSERT_TRUE(same_bits(y.data() + r * p.n, alone[r].data(), p.n))
          << "m=" << m << " row " << r << " differs from the row computed alone (tile "
          << gemm_tile_name(gemm_tile_for(m, p.n, 132)) << ")";
    }
  }
}

TEST_P(GemmInvariance, RowAloneEqualsRowInsideLargeBatches) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const Problem p = make_problem(136, 512, 4099, GetParam(), 11, *stream);
  for (int64_t m : {300, 1000, 4099}) {
    const std::vector<float> y = run(p, 0, m, *stream);
    ASSERT_TRUE(all_finite(y)) << "m=" << m;
    for (int64_t r : {0L, 1L, 7L, 8L, 15L, 16L, 17L, 127L, 128L, 129L, 299L}) {
      if (r >= m) continue;
      const std::vector<float> one = run(p, r, 1, *stream);
      ASSERT_TRUE(same_bits(y.data() + r * p.n, one.data(), p.n)) << "m=" << m << " row " << r;
    }
    const std::vector<float> last = run(p, m - 1, 1, *stream);
    ASSERT_TRUE(same_bits(y.data() + (m - 1) * p.n, last.data(), p.n)) << "m=" << m << " last row";
  }
}

TEST_P(GemmInvariance, EveryTileShapeGivesTheSameBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const auto& [n, k] : {std::pair<int64_t, int64_t>{200, 136}, {256, 4096}}) {
    const Problem p = make_problem(n, k, 130, GetParam(), 13, *stream);
    for (int64_t m : {1, 7, 16, 33, 130}) {
      const std::vector<float> small = run(p, 0, m, *stream, GemmTile::small);
      ASSERT_TRUE(all_finite(small));
      for (GemmTile tile : {GemmTile::medium, GemmTile::large}) {
        const std::vector<float> other = run(p, 0, m, *stream, tile);
        ASSERT_TRUE(same_bits(small.data(), other.data(), small.size()))
            << "n=" << n << " k=" << k << " m=" << m << ": tile " << gemm_tile_name(tile) << " != small";
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, GemmInvariance, ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Error bound per output (ADR 0006): the products x·w are exact in f32 (bf16
// × bf16) and any order of k f32 additions, rounded or truncated, is within
// k·2⁻²³·Σ|x·w|; f32 activations add the hi/lo split residual, |x − hi − lo|
// ≤ 2⁻¹⁸|x|.
double bound(const Problem& p, double sum_abs) {
  const double accumulate = static_cast<double>(p.k) * std::ldexp(1.0, -23);
  const double split = p.x_dtype == DType::f32 ? std::ldexp(1.0, -18) : 0.0;
  return (accumulate + split) * sum_abs + 1e-30;
}

class GemmAccuracy : public ::testing::TestWithParam<DType> {};

TEST_P(GemmAccuracy, MatchesDoubleReferenceWithinTheBound) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const auto& [n, k, m] : {std::tuple<int64_t, int64_t, int64_t>{1024, 4096, 9}, {300, 1032, 150}}) {
    const Problem p = make_problem(n, k, m, GetParam(), 17, *stream);
    const std::vector<float> y = run(p, 0, m, *stream);
    double err2 = 0, ref2 = 0, worst = 0;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0, sum_abs = 0;
        for (int64_t i = 0; i < k; ++i) {
          const double prod = static_cast<double>(p.x_values[r * k + i]) * p.w_values[j * k + i];
          ref += prod;
          sum_abs += std::fabs(prod);
        }
        const double err = std::fabs(y[r * n + j] - ref);
        ASSERT_LE(err, bound(p, sum_abs)) << "n=" << n << " k=" << k << " row " << r << " col " << j;
        err2 += err * err;
        ref2 += ref * ref;
        worst = std::max(worst, err / sum_abs);
      }
    }
    const double relative = std::sqrt(err2 / ref2);
    // f32 accumulation of random data lands near 1e-7; the f32-activation split near 1e-6.
    EXPECT_LT(relative, GetParam() == DType::bf16 ? 1e-5 : 2e-5) << "n=" << n << " k=" << k;
    std::printf("[ accuracy ] %s x, n=%ld k=%ld m=%ld: |y-ref|/|ref| = %.3g, max err/sum|xw| = %.3g\n",
                dtype_name(GetParam()), static_cast<long>(n), static_cast<long>(k), static_cast<long>(m),
                relative, worst);
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, GemmAccuracy, ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// The K-sliced GEMM (gemm_bf16w_sliced): the slicing depends on (n, k) only,
// so a row's bits are still independent of m and of the tile; and each
// output is still within the accumulation bound of the exact product.
std::vector<float> run_sliced(const Problem& p, int64_t row0, int64_t m, const Stream& stream,
                              GemmTile tile = GemmTile::automatic) {
  const GemmSlicing plan = gemm_slicing(p.n, p.k);
  DeviceBuffer ws = testing::poisoned(static_cast<size_t>(plan.slices * m * p.n) * sizeof(float), stream);
  DeviceBuffer y = testing::poisoned(static_cast<size_t>(m * p.n) * sizeof(float), stream);
  const size_t x_elem = p.x_dtype == DType::bf16 ? 2 : 4;
  const void* x = static_cast<const char*>(p.x.data()) + row0 * p.k * x_elem;
  const Status st = gemm_bf16w_sliced(stream, x, p.x_dtype, m, p.w.as<uint16_t>(), p.n, p.k, y.as<float>(),
                                      ws.as<float>(), static_cast<size_t>(plan.slices * m * p.n), tile);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return testing::to_host<float>(y, m * p.n, stream);
}

class GemmSliced : public ::testing::TestWithParam<DType> {};

TEST_P(GemmSliced, RowBitsIndependentOfBatchAndTileAndWithinTheBound) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // n = 200 (7 small-tile blocks) and k = 4104: 11 slices of 384, the last one 264 wide.
  const Problem p = make_problem(200, 4104, 40, GetParam(), 19, *stream);
  const GemmSlicing plan = gemm_slicing(p.n, p.k);
  ASSERT_GT(plan.slices, 1);
  ASSERT_EQ(plan.slice % 128, 0);
  std::vector<std::vector<float>> alone(40);
  for (int64_t r = 0; r < 40; ++r) alone[r] = run_sliced(p, r, 1, *stream);
  for (int64_t m = 1; m <= 40; ++m) {
    const std::vector<float> y = run_sliced(p, 0, m, *stream);
    ASSERT_TRUE(all_finite(y)) << "m=" << m;
    for (int64_t r = 0; r < m; ++r)
      ASSERT_TRUE(same_bits(y.data() + r * p.n, alone[r].data(), p.n)) << "m=" << m << " row " << r;
  }
  for (int64_t m : {1, 17, 40}) {
    const std::vector<float> small = run_sliced(p, 0, m, *stream, GemmTile::small);
    for (GemmTile tile : {GemmTile::medium, GemmTile::large})
      ASSERT_TRUE(same_bits(small.data(), run_sliced(p, 0, m, *stream, tile).data(), small.size()))
          << "m=" << m << ": tile " << gemm_tile_name(tile) << " != small";
  }
  for (int64_t r = 0; r < 3; ++r) {
    for (int64_t j = 0; j < p.n; ++j) {
      double ref = 0, sum_abs = 0;
      for (int64_t i = 0; i < p.k; ++i) {
        const double prod = static_cast<double>(p.x_values[r * p.k + i]) * p.w_values[j * p.k + i];
        ref += prod;
        sum_abs += std::fabs(prod);
      }
      ASSERT_LE(std::fabs(alone[r][j] - ref), bound(p, sum_abs)) << "row " << r << " col " << j;
    }
  }
}

// The tuned shape of ADR 0088 (6144 x 4096: 5 slices of 896, the last 512)
// keeps one order for every M: rows 0..7 computed alone equal the same rows
// of decode-, verify-, batch- and prefill-sized calls, bit for bit.
TEST_P(GemmSliced, TheTunedQkvShapeKeepsRowBitsForEveryM) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const GemmSlicing plan = gemm_slicing(6144, 4096);
  ASSERT_EQ(plan.slices, 5);
  ASSERT_EQ(plan.slice, 896);
  const Problem p = make_problem(6144, 4096, 512, GetParam(), 29, *stream);
  std::vector<std::vector<float>> alone(8);
  for (int64_t r = 0; r < 8; ++r) alone[r] = run_sliced(p, r, 1, *stream);
  for (int64_t m : {2, 4, 5, 8, 16, 64, 512}) {
    const std::vector<float> y = run_sliced(p, 0, m, *stream);
    for (int64_t r = 0; r < std::min<int64_t>(m, 8); ++r)
      ASSERT_TRUE(same_bits(y.data() + r * p.n, alone[r].data(), p.n)) << "m=" << m << " row " << r;
  }
}

TEST(GemmSliced, AShortWorkspaceIsInvalidArgument) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok());
  const Problem p = make_problem(200, 4104, 2, DType::bf16, 23, *stream);
  DeviceBuffer y = testing::poisoned(2 * 200 * sizeof(float), *stream);
  const Status st = gemm_bf16w_sliced(*stream, p.x.data(), DType::bf16, 2, p.w.as<uint16_t>(), p.n, p.k,
                                      y.as<float>(), y.as<float>(), 400);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

// The K-slicing plans of the forward's sliced matrices (ADR 0075: slices of
// multiples of 128 k, ~512 blocks of 32 weight rows, at most 16), the shapes
// the decode figures in docs/benchmarks.md were measured with; a host function
// of (n, k) only, so no device is needed.
TEST(GemmSlicing, PlansOfTheForwardShapes) {
  struct Plan {
    int64_t n, k;
    int slices;
    int64_t slice;
  };
  for (const Plan& p : {Plan{1152, 896, 7, 128},     // Qwen2.5-0.5B qkv (2 slices of 512 before)
                        Plan{896, 896, 7, 128},      // 0.5B o
                        Plan{9728, 896, 2, 512},     // 0.5B gate/up
                        Plan{896, 4864, 13, 384},    // 0.5B down
                        Plan{3072, 2048, 6, 384},    // Llama-3.2-1B qkv
                        Plan{2048, 2048, 8, 256},    // 1B o
                        Plan{16384, 2048, 1, 2048},  // 1B gate/up: 512 blocks, whole
                        Plan{2048, 8192, 8, 1024},   // 1B down
                        Plan{6144, 4096, 5, 896},    // Llama-3.1-8B qkv (tuned, ADR 0088; 3 by the rule)
                        Plan{4096, 4096, 4, 1024},   // 8B o
                        Plan{4096, 14336, 4, 3584}}) {
    const GemmSlicing plan = gemm_slicing(p.n, p.k);
    EXPECT_EQ(plan.slices, p.slices) << p.n << " x " << p.k;
    EXPECT_EQ(plan.slice, p.slice) << p.n << " x " << p.k;
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, GemmSliced, ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

// Every shape of the small tile (TANDEM_CUDA_SMALL_TILE) gives the shipping
// default's bits, plain and K-sliced, at M = 1..16 (8-row shapes fall back
// above M = 8) and on a partial last k tile.
TEST_P(GemmSliced, EverySmallTileVariantGivesTheSameBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const int64_t k : {int64_t{4104}, int64_t{904}}) {
    const Problem p = make_problem(200, k, 16, GetParam(), 23, *stream);
    set_small_tile_variant(-1);  // the default
    std::vector<std::vector<float>> plain(17), sliced(17);
    for (int64_t m = 1; m <= 16; ++m) {
      plain[m] = run(p, 0, m, *stream, GemmTile::small);
      sliced[m] = run_sliced(p, 0, m, *stream, GemmTile::small);
    }
    for (int v = 0; v < small_tile_variants(); ++v) {
      if (small_tile_variant_retired(v)) continue;
      set_small_tile_variant(v);
      for (int64_t m = 1; m <= 16; ++m) {
        ASSERT_TRUE(
            same_bits(run(p, 0, m, *stream, GemmTile::small).data(), plain[m].data(), plain[m].size()))
            << "variant " << v << " k=" << k << " m=" << m;
        ASSERT_TRUE(same_bits(run_sliced(p, 0, m, *stream, GemmTile::small).data(), sliced[m].data(),
                              sliced[m].size()))
            << "variant " << v << " k=" << k << " m=" << m << " (sliced)";
      }
    }
    set_small_tile_variant(-1);
  }
}

// The same on matrices of >= 2^24 weights, where the by-shape default picks
// another variant than below it (ADR 0042, 0052): 4100 x 4104 is K-sliced,
// 16400 x 1032 is not (the shape class of the LM heads, narrower). Every
// variant, the register-direct ones included, gives the default's bits at
// decode and verify-block M, plain and K-sliced; both end in a partial 16-row
// fragment and a partial 32-wide k chunk.
TEST_P(GemmSliced, EverySmallTileVariantGivesTheSameBitsOnLargeMatrices) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t shapes[][2] = {{4100, 4104}, {16400, 1032}};
  ASSERT_GT(gemm_slicing(shapes[0][0], shapes[0][1]).slices, 1);
  ASSERT_EQ(gemm_slicing(shapes[1][0], shapes[1][1]).slices, 1);
  for (const auto& nk : shapes) {
    const Problem p = make_problem(nk[0], nk[1], 16, GetParam(), 29, *stream);
    ASSERT_GE(p.n * p.k, int64_t{1} << 24);
    set_small_tile_variant(-1);
    const int64_t ms[] = {1, 2, 5, 8, 9, 16};
    std::vector<std::vector<float>> plain, sliced;
    for (const int64_t m : ms) {
      plain.push_back(run(p, 0, m, *stream, GemmTile::small));
      sliced.push_back(run_sliced(p, 0, m, *stream, GemmTile::small));
      ASSERT_TRUE(all_finite(plain.back()) && all_finite(sliced.back())) << "m=" << m;
    }
    for (int v = 0; v < small_tile_variants(); ++v) {
      if (small_tile_variant_retired(v)) continue;
      set_small_tile_variant(v);
      for (size_t i = 0; i < std::size(ms); ++i) {
        ASSERT_TRUE(
            same_bits(run(p, 0, ms[i], *stream, GemmTile::small).data(), plain[i].data(), plain[i].size()))
            << "variant " << v << " n=" << p.n << " m=" << ms[i];
        ASSERT_TRUE(same_bits(run_sliced(p, 0, ms[i], *stream, GemmTile::small).data(), sliced[i].data(),
                              sliced[i].size()))
            << "variant " << v << " n=" << p.n << " m=" << ms[i] << " (sliced)";
      }
    }
    set_small_tile_variant(-1);
  }
}

// The small tile at 17..64 x rows (ADR 0060, TANDEM_CUDA_WIDE_TILE): modes 1
// and 2 (32 or 64 x rows per block; 2 adds copy-only warps) and 3 and 4 (the
// m64 TMA wgmma tile, ADR 0066) give mode 0's
// bits (17+ rows on the medium tile, as before), plain and K-sliced, through
// `automatic` and the explicit small tile, on a K-sliced 4100 x 4104 matrix, an
// unsliced 16400 x 1032 one (the LM-head class) and a small 200 x 904 one;
// and each row equals itself computed alone.
TEST_P(GemmSliced, WideSmallTileGivesTheSameBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t shapes[][2] = {{4100, 4104}, {16400, 1032}, {200, 904}};
  const int64_t ms[] = {17, 24, 31, 32, 33, 48, 63, 64};
  for (const auto& nk : shapes) {
    const Problem p = make_problem(nk[0], nk[1], 64, GetParam(), 31, *stream);
    set_wide_small_tile(0);
    std::vector<std::vector<float>> plain, sliced;
    for (const int64_t m : ms) {
      plain.push_back(run(p, 0, m, *stream));
      sliced.push_back(run_sliced(p, 0, m, *stream));
      ASSERT_TRUE(all_finite(plain.back()) && all_finite(sliced.back())) << "m=" << m;
    }
    const std::vector<float> alone = run(p, 63, 1, *stream), alone_sliced = run_sliced(p, 63, 1, *stream);
    for (const int mode : {1, 2, 3, 4}) {
      set_wide_small_tile(mode);
      for (size_t i = 0; i < std::size(ms); ++i) {
        for (const GemmTile tile : {GemmTile::automatic, GemmTile::small}) {
          ASSERT_TRUE(same_bits(run(p, 0, ms[i], *stream, tile).data(), plain[i].data(), plain[i].size()))
              << "mode " << mode << " n=" << p.n << " m=" << ms[i];
          ASSERT_TRUE(
              same_bits(run_sliced(p, 0, ms[i], *stream, tile).data(), sliced[i].data(), sliced[i].size()))
              << "mode " << mode << " n=" << p.n << " m=" << ms[i] << " (sliced)";
        }
      }
      const std::vector<float> all = run(p, 0, 64, *stream), all_sliced = run_sliced(p, 0, 64, *stream);
      ASSERT_TRUE(same_bits(all.data() + 63 * p.n, alone.data(), alone.size())) << "mode " << mode;
      ASSERT_TRUE(same_bits(all_sliced.data() + 63 * p.n, alone_sliced.data(), alone_sliced.size()))
          << "mode " << mode << " (sliced)";
    }
    set_wide_small_tile(-1);
  }
}

TEST(GemmCublas, AgreesWithCublasWithinTheBound) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  testing::CublasReference cublas;
  if (!cublas.ok()) GTEST_SKIP() << "skipped: " << cublas.error();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t n = 1024, k = 4096;
  const Problem p = make_problem(n, k, 100, DType::bf16, 19, *stream);
  for (int64_t m : {1, 16, 100}) {
    const std::vector<float> ours = run(p, 0, m, *stream);
    DeviceBuffer yb = testing::poisoned(static_cast<size_t>(m * n) * sizeof(float), *stream);
    ASSERT_TRUE(cublas.gemm_bf16(stream->handle(), p.x.data(), m, p.w_natural.data(), n, k, yb.as<float>()));
    const std::vector<float> theirs = testing::to_host<float>(yb, m * n, *stream);
    double err2 = 0, ref2 = 0;
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double sum_abs = 0;
        for (int64_t i = 0; i < k; ++i) sum_abs += std::fabs(p.x_values[r * k + i] * p.w_values[j * k + i]);
        const double diff = std::fabs(static_cast<double>(ours[r * n + j]) - theirs[r * n + j]);
        ASSERT_LE(diff, 2 * bound(p, sum_abs)) << "m=" << m << " row " << r << " col " << j;
        err2 += diff * diff;
        ref2 += static_cast<double>(theirs[r * n + j]) * theirs[r * n + j];
      }
    }
    EXPECT_LT(std::sqrt(err2 / ref2), 1e-5) << "m=" << m;
  }
}

// Argument errors come back as Status before any device work, so these run
// on machines without a GPU too.
TEST(GemmArguments, BadShapesAndPointersAreInvalidArgument) {
  const Stream stream;  // never used: validation fails first
  alignas(16) static uint16_t w[64];
  alignas(16) static float y[64];
  EXPECT_EQ(gemm_bf16w(stream, w, DType::bf16, 1, w, 4, 12, y).code(),
            StatusCode::kInvalidArgument);                                                            // k % 8
  EXPECT_EQ(gemm_bf16w(stream, w, DType::f16, 1, w, 4, 16, y).code(), StatusCode::kInvalidArgument);  // dtype
  EXPECT_EQ(gemm_bf16w(stream, w, DType::bf16, -1, w, 4, 16, y).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(gemm_bf16w(stream, w, DType::bf16, 1, w, 0, 16, y).code(), StatusCode::kInvalidArgument);
  const Status misaligned = gemm_bf16w(stream, w + 1, DType::bf16, 1, w, 4, 16, y);
  EXPECT_EQ(misaligned.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(misaligned.message().find("aligned"), std::string::npos) << misaligned.message();
  EXPECT_TRUE(gemm_bf16w(stream, w, DType::bf16, 0, w, 4, 16, y).ok());  // m == 0: nothing to do
}

TEST(DeviceBufferErrors, AFailedAllocationIsAStatusNamingTheCall) {
  // With a device: 2^60 bytes cannot be had. Without one: the runtime refuses.
  Expected<DeviceBuffer> huge = DeviceBuffer::allocate(size_t{1} << 60);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("cudaMalloc"), std::string::npos) << huge.status().to_string();
  if (device_count() > 0) {
    EXPECT_EQ(huge.status().code(), StatusCode::kResourceExhausted);
  }
}

TEST(DeviceBufferErrors, OutOfRangeCopiesAreInvalidArgument) {
  DeviceBuffer empty;
  const Stream stream;
  char host[16] = {};
  EXPECT_EQ(empty.upload(host, 16, stream).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(empty.download(host, 1, stream, 0).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(empty.upload(host, 0, stream).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
