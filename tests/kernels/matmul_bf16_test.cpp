// bf16 activations (ADR 0082): the rounding of the activations, the bf16
// pairs chain (kernel_table.h) against its definition on row-major weights,
// the vdpbf16ps kernel against the scalar reference bitwise, and batch
// invariance on every ISA and thread count.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "avx512/avx512.h"
#include "core/cpu_features.h"
#include "dtype_convert.h"
#include "kernel_table.h"
#include "reference/reference.h"
#include "test_util.h"

namespace tandem::kernels {
namespace {

using testing::random_floats;
using testing::same_bits;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

Ctx bf16_ctx(ThreadPool* pool, Isa isa, GemmMode mode = GemmMode::invariant) {
  Ctx ctx{pool, isa, mode};
  ctx.act = Activations::bf16;
  return ctx;
}

// vcvtneps2bf16's rounding, value by value (Intel SDM, "convert_fp32_to_bfloat16").
TEST(MatmulBf16, ActivationsRoundAsVcvtneps2bf16) {
  struct Case {
    uint32_t in;
    uint16_t out;
  };
  const Case cases[] = {
      {0x3f800000u, 0x3f80},  // 1
      {0x3f808000u, 0x3f80},  // halfway, even below: down
      {0x3f818000u, 0x3f82},  // halfway, odd below: up
      {0x3f808001u, 0x3f81},  // above halfway
      {0xbf817fffu, 0xbf81},  // below halfway, negative
      {0x00000000u, 0x0000},  // +0
      {0x80000000u, 0x8000},  // -0
      {0x007fffffu, 0x0000},  // the largest denormal: a zero (it would round to FLT_MIN)
      {0x80000001u, 0x8000},  // a negative denormal: -0
      {0x00800000u, 0x0080},  // FLT_MIN stays
      {0x7f7fffffu, 0x7f80},  // FLT_MAX rounds to +inf
      {0xff800000u, 0xff80},  // -inf
      {0x7fc00000u, 0x7fc0},  // quiet NaN
      {0x7f800001u, 0x7fc0},  // signalling NaN: quieted
  };
  for (const Case& c : cases) EXPECT_EQ(round_to_bf16(from_bits(c.in)), c.out) << std::hex << c.in;
}

// vdpbf16ps's step: fma with denormal inputs and results as zeros (kernel_table.h).
float flush(float v) { return std::fabs(v) < std::numeric_limits<float>::min() ? std::copysign(0.0f, v) : v; }
float step(float acc, float x, float w) { return flush(std::fma(flush(x), flush(w), flush(acc))); }

// The chain from row-major [n][k] bf16 weights and bf16-rounded activations.
std::vector<float> pairs_chain(const std::vector<float>& x, int64_t m, const std::vector<uint16_t>& w,
                               int64_t n, int64_t k) {
  std::vector<float> y(m * n);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      auto xv = [&](int64_t i) { return bf16_to_f32(round_to_bf16(x[r * k + i])); };
      auto wv = [&](int64_t i) { return bf16_to_f32(w[c * k + i]); };
      float acc = 0.0f;
      for (int64_t i = 0; i < k; i += 2) {
        acc = i + 1 < k ? step(acc, xv(i + 1), wv(i + 1)) : step(acc, 0.0f, 0.0f);
        acc = step(acc, xv(i), wv(i));
      }
      y[r * n + c] = acc;
    }
  }
  return y;
}

// Values that exercise the chain's edges: denormals, tiny products that
// flush, exact ties after rounding, large and cancelling terms.
std::vector<float> edgy_floats(size_t count, uint32_t seed) {
  std::vector<float> v = random_floats(count, seed);
  std::mt19937 rng(seed + 1);
  for (size_t i = 0; i < count; ++i) {
    switch (rng() % 16) {
      case 0:
        v[i] = from_bits((rng() & 0x807fffffu));  // a denormal (or zero)
        break;
      case 1:
        v[i] =
            from_bits((rng() & 0x807fffffu) | (static_cast<uint32_t>(1 + rng() % 24) << 23));  // near FLT_MIN
        break;
      case 2:
        v[i] = std::ldexp(v[i], 60 - static_cast<int>(rng() % 120));  // far from 1
        break;
      default:
        break;
    }
  }
  return v;
}

std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}

// Every ISA's bf16 pairs chain is the definition above, bit for bit (the
// AVX2 and, without AVX512_BF16, the AVX-512 tables run the scalar reference;
// with it, the vdpbf16ps kernel). Shapes: odd and even k, partial panels,
// M = 1..9 (every row block and the lone row), a wide row for the lone row's
// panel groups; 1-3 threads.
TEST(MatmulBf16, EveryIsaComputesThePairsChain) {
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{9, 150, 160}, {9, 150, 97}, {5, 37, 1}, {1, 12 * kPanel + 37, 97}, {3, 64, 301}};
  for (const Shape& s : shapes) {
    const auto x = edgy_floats(s.m * s.k, 7 + s.k);
    const auto w = to_bf16(edgy_floats(s.n * s.k, 8 + s.k));
    const auto want = pairs_chain(x, s.m, w, s.n, s.k);
    PackedMatrix packed = PackedMatrix::pack(w.data(), DType::bf16, s.n, s.k);
    for (Isa isa : testing::supported_isas()) {
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        for (int64_t m = 1; m <= s.m; ++m) {
          std::vector<float> y(m * s.n);
          matmul(bf16_ctx(&pool, isa), x.data(), m, packed, y.data());
          EXPECT_TRUE(same_bits(y.data(), want.data(), y.size()))
              << isa_name(isa) << " m=" << m << " n=" << s.n << " k=" << s.k << " threads=" << threads;
        }
      }
    }
  }
}

// The AVX-512 kernels without AVX512_BF16 (two FMAs per vdpbf16ps under MXCSR
// DAZ | FTZ) give the reference's bits, called directly so that a CPU with the
// instruction tests them too: every row block, the lone row's panel groups, odd k.
TEST(MatmulBf16, Avx512EmulationIsThePairsChain) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "needs AVX-512";
  struct Shape {
    int64_t m, n, k;
  };
  const Shape shapes[] = {{9, 150, 160}, {9, 150, 97}, {1, 12 * kPanel + 37, 97}, {8, 64, 1}};
  for (const Shape& s : shapes) {
    const auto x = edgy_floats(s.m * s.k, 17 + s.k);
    const auto w = to_bf16(edgy_floats(s.n * s.k, 18 + s.k));
    PackedMatrix packed = PackedMatrix::pack(w.data(), DType::bf16, s.n, s.k);
    const int64_t ldxb = (s.k + 1) & ~int64_t{1};
    std::vector<uint16_t> xb(s.m * ldxb, 0);
    for (int64_t r = 0; r < s.m; ++r)
      for (int64_t i = 0; i < s.k; ++i) xb[r * ldxb + i] = round_to_bf16(x[r * s.k + i]);
    for (int64_t m = 1; m <= s.m; ++m) {
      MatmulArgs a;
      a.xb = xb.data();
      a.ldxb = ldxb;
      a.m = m;
      a.w = packed.data();
      a.dtype = DType::bf16;
      a.k = s.k;
      a.k_end = s.k;
      a.panel_end = panel_count(s.n);
      a.ldy = s.n;
      a.n = s.n;
      std::vector<float> want(m * s.n), got(m * s.n);
      a.y = want.data();
      reference::matmul_bf16_pairs(a);
      a.y = got.data();
      avx512::matmul_bf16_pairs_emulated(a);
      EXPECT_TRUE(same_bits(got.data(), want.data(), got.size()))
          << "m=" << m << " n=" << s.n << " k=" << s.k;
    }
  }
}

// Sanity against a double dot product: the chain is a dot product of the
// rounded values (catches swapped operands or a lost term).
TEST(MatmulBf16, PairsChainIsTheDotOfTheRoundedValues) {
  const int64_t m = 3, n = 70, k = 257;
  const auto x = random_floats(m * k, 3);
  const auto w = to_bf16(random_floats(n * k, 4));
  PackedMatrix packed = PackedMatrix::pack(w.data(), DType::bf16, n, k);
  std::vector<float> y(m * n);
  matmul(bf16_ctx(nullptr, active_isa()), x.data(), m, packed, y.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      double dot = 0.0, mag = 0.0;
      for (int64_t i = 0; i < k; ++i) {
        const double t =
            static_cast<double>(bf16_to_f32(round_to_bf16(x[r * k + i]))) * bf16_to_f32(w[c * k + i]);
        dot += t;
        mag += std::fabs(t);
      }
      EXPECT_NEAR(y[r * n + c], dot, 1e-6 * mag * k) << r << "," << c;
    }
  }
}

// A row alone equals itself in every batch M = 1..33, on every ISA and 1-3
// threads; f32 / f16 weights are untouched by the mode; splitk's slices start
// on pairs and it stays detectably non-invariant.
TEST(MatmulBf16, RowAloneEqualsRowInBatch) {
  const int64_t rows = 33, n = 150, k = 160;
  const auto x = random_floats(rows * k, 11);
  const auto w = to_bf16(random_floats(n * k, 12));
  PackedMatrix packed = PackedMatrix::pack(w.data(), DType::bf16, n, k);
  for (Isa isa : testing::supported_isas()) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> alone(rows * n), batch(rows * n);
      for (int64_t r = 0; r < rows; ++r) matmul(bf16_ctx(&pool, isa), &x[r * k], 1, packed, &alone[r * n]);
      for (int64_t m = 1; m <= rows; ++m) {
        matmul(bf16_ctx(&pool, isa), x.data(), m, packed, batch.data());
        EXPECT_TRUE(same_bits(batch.data(), alone.data(), m * n)) << isa_name(isa) << " m=" << m;
      }
      if (threads == 2) {
        matmul(bf16_ctx(&pool, isa, GemmMode::splitk), x.data(), rows, packed, batch.data());
        EXPECT_FALSE(same_bits(batch.data(), alone.data(), rows * n)) << isa_name(isa);
        for (int64_t i = 0; i < rows * n; ++i)
          ASSERT_NEAR(batch[i], alone[i], 1e-4f) << isa_name(isa) << " " << i;
      }
    }
  }
}

TEST(MatmulBf16, OtherWeightTypesKeepTheF32Chain) {
  const int64_t m = 4, n = 70, k = 96;
  const auto x = random_floats(m * k, 5);
  for (DType dtype : {DType::f32, DType::f16}) {
    const auto wts = testing::make_weights(dtype, n * k, 6);
    PackedMatrix packed = PackedMatrix::pack(wts.bytes.data(), dtype, n, k);
    std::vector<float> a(m * n), b(m * n);
    matmul(Ctx{nullptr, active_isa(), GemmMode::invariant}, x.data(), m, packed, a.data());
    matmul(bf16_ctx(nullptr, active_isa()), x.data(), m, packed, b.data());
    EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << dtype_name(dtype);
  }
}

TEST(MatmulBf16, ModeParsesAndReportsWhereItIsNative) {
  Activations a = Activations::f32;
  EXPECT_TRUE(parse_activations(" BF16 ", &a));
  EXPECT_EQ(a, Activations::bf16);
  EXPECT_TRUE(parse_activations("f32", &a));
  EXPECT_EQ(a, Activations::f32);
  EXPECT_FALSE(parse_activations("fp8", &a));
  EXPECT_STREQ(activations_name(Activations::bf16), "bf16");
  EXPECT_EQ(bf16_activations_native(), active_isa() == Isa::avx512 && cpu_features().avx512bf16);
}

}  // namespace
}  // namespace tandem::kernels
