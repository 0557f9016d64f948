// Row-wise and element-wise ops: variants against the reference, row-wise
// invariance (a row's bits do not depend on the other rows, the row count, the
// element count of the call or the thread count).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "test_util.h"

namespace tandem::kernels {
namespace {

using testing::random_floats;
using testing::same_bits;

// Element-wise transcendental ops: the reference evaluates in double and rounds
// once; SIMD variants use an f32 exp polynomial (<= 2 ulp) and a division, so
// a few ulp of the result — 8 ulp (4.8e-7 relative) leaves margin. Near a
// zero of the gate the result is tiny relative to |gate*up|, so the bound
// also admits 8 ulp of |gate*up|.
void expect_elementwise_close(const std::vector<float>& got, const std::vector<float>& want,
                              const std::vector<float>& gate, const std::vector<float>& up,
                              const char* what) {
  for (size_t i = 0; i < got.size(); ++i) {
    const double tol = 8 * testing::kU * 2 * (std::fabs(want[i]) + std::fabs(gate[i] * up[i])) + 1e-30;
    ASSERT_NEAR(got[i], want[i], tol) << what << " i=" << i << " gate=" << gate[i];
  }
}

TEST(Elementwise, VariantsMatchReference) {
  for (int64_t count : {1, 7, 16, 33, 1000, 40000}) {
    auto gate = random_floats(count, 1, -12.0f, 12.0f);
    const auto up = random_floats(count, 2, -3.0f, 3.0f);
    if (count > 3) gate[0] = 0.0f, gate[1] = -90.0f, gate[2] = 90.0f;
    std::vector<float> want(count), got(count);
    ThreadPool pool(2);
    for (Isa isa : testing::simd_isas()) {
      const Ctx ref{&pool, Isa::scalar}, ctx{&pool, isa};
      swiglu(ref, gate.data(), up.data(), want.data(), count);
      swiglu(ctx, gate.data(), up.data(), got.data(), count);
      expect_elementwise_close(got, want, gate, up, "swiglu");
      gelu_tanh_gate(ref, gate.data(), up.data(), want.data(), count);
      gelu_tanh_gate(ctx, gate.data(), up.data(), got.data(), count);
      expect_elementwise_close(got, want, gate, up, "gelu_tanh_gate");
      // add is exact in every variant.
      want = gate, got = gate;
      add_inplace(ref, want.data(), up.data(), count);
      add_inplace(ctx, got.data(), up.data(), count);
      EXPECT_TRUE(same_bits(got.data(), want.data(), count));
    }
  }
}

TEST(Elementwise, ElementBitsDoNotDependOnCallSizeOrOffset) {
  const int64_t count = 100;
  const auto gate = random_floats(count, 3, -8.0f, 8.0f);
  const auto up = random_floats(count, 4);
  for (Isa isa : testing::supported_isas()) {
    const Ctx ctx{nullptr, isa};
    std::vector<float> whole(count), part(count);
    swiglu(ctx, gate.data(), up.data(), whole.data(), count);
    for (int64_t offset : {0, 1, 5, 17, 31}) {
      for (int64_t len : {1, 3, 16, 20}) {
        swiglu(ctx, gate.data() + offset, up.data() + offset, part.data(), len);
        EXPECT_TRUE(same_bits(part.data(), whole.data() + offset, len))
            << isa_name(isa) << offset << "," << len;
      }
    }
    gelu_tanh_gate(ctx, gate.data(), up.data(), whole.data(), count);
    gelu_tanh_gate(ctx, gate.data() + 9, up.data() + 9, part.data(), 13);
    EXPECT_TRUE(same_bits(part.data(), whole.data() + 9, 13)) << isa_name(isa);
  }
}

// RMSNorm: the reference sums squares in double; SIMD variants in f32 with
// lane-parallel partial sums — relative error of the sum <= (dim/lanes + log2
// lanes + 1) u for positive terms, halved by the square root, plus two
// roundings for the scaling. For dim <= 4096 that is < 2.2e-5 worst case;
// 3e-5 relative to |x*w|/rms keeps margin.
TEST(RmsNorm, VariantsMatchReferenceAndRowsAreInvariant) {
  for (int64_t dim : {1, 15, 64, 896, 4096}) {
    const int64_t rows = 9;
    const auto x = random_floats(rows * dim, 5, -4.0f, 4.0f);
    const auto weight = random_floats(dim, 6, 0.5f, 1.5f);
    std::vector<float> want(rows * dim);
    rmsnorm(Ctx{nullptr, Isa::scalar}, x.data(), weight.data(), want.data(), rows, dim, 1e-6f);
    for (Isa isa : testing::supported_isas()) {
      std::vector<float> got(rows * dim), alone(dim);
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        const Ctx ctx{&pool, isa};
        rmsnorm(ctx, x.data(), weight.data(), got.data(), rows, dim, 1e-6f);
        for (int64_t r = 0; r < rows; ++r) {
          rmsnorm(ctx, &x[r * dim], weight.data(), alone.data(), 1, dim, 1e-6f);
          ASSERT_TRUE(same_bits(alone.data(), &got[r * dim], dim)) << isa_name(isa) << " row " << r;
        }
      }
      for (int64_t i = 0; i < rows * dim; ++i) {
        ASSERT_NEAR(got[i], want[i], 3e-5 * std::fabs(want[i]) + 1e-30) << isa_name(isa) << " dim=" << dim;
      }
    }
  }
}

TEST(RmsNorm, InPlace) {
  const int64_t dim = 40;
  auto x = random_floats(dim, 7);
  const auto w = random_floats(dim, 8);
  for (Isa isa : testing::supported_isas()) {
    std::vector<float> out(dim), inplace = x;
    rmsnorm(Ctx{nullptr, isa}, x.data(), w.data(), out.data(), 1, dim, 1e-5f);
    rmsnorm(Ctx{nullptr, isa}, inplace.data(), w.data(), inplace.data(), 1, dim, 1e-5f);
    EXPECT_TRUE(same_bits(out.data(), inplace.data(), dim));
  }
}

// Softmax: outputs are exp(x - max) / sum; exp <= 2 ulp, the sum's relative
// error <= (n/lanes + 5) u for positive terms, one more rounding for the
// scale. 2e-6 + n * 1e-8 relative covers n up to 150k with margin.
TEST(Softmax, VariantsMatchReferenceAndRowsAreInvariant) {
  for (int64_t n : {1, 5, 32, 100, 1000, 151936}) {
    const int64_t rows = n > 10000 ? 2 : 7;
    auto x = random_floats(rows * n, 9, -20.0f, 20.0f);
    if (n > 1) x[0] = -INFINITY;  // masked logit
    std::vector<float> want = x;
    softmax(Ctx{nullptr, Isa::scalar}, want.data(), rows, n);
    for (Isa isa : testing::supported_isas()) {
      for (int threads : {1, 3}) {
        ThreadPool pool(threads);
        std::vector<float> got = x;
        softmax(Ctx{&pool, isa}, got.data(), rows, n);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> alone(x.begin() + r * n, x.begin() + (r + 1) * n);
          softmax(Ctx{nullptr, isa}, alone.data(), 1, n);
          ASSERT_TRUE(same_bits(alone.data(), &got[r * n], n)) << isa_name(isa) << " row " << r;
        }
        const double rel = 2e-6 + n * 1e-8;
        for (int64_t i = 0; i < rows * n; ++i) {
          ASSERT_NEAR(got[i], want[i], rel * want[i] + 1e-37) << isa_name(isa) << " n=" << n << " i=" << i;
        }
      }
    }
  }
}

TEST(Conversions, ToF32AndEmbeddingAreExact) {
  const int64_t vocab = 11, dim = 37;
  for (DType dtype : {DType::f32, DType::bf16, DType::f16}) {
    const auto w = testing::make_weights(dtype, vocab * dim, 10);
    std::vector<float> all(vocab * dim);
    to_f32(w.bytes.data(), dtype, vocab * dim, all.data());
    EXPECT_TRUE(same_bits(all.data(), w.values.data(), all.size())) << dtype_name(dtype);
    const int32_t ids[] = {3, 0, 10, 3};
    for (Isa isa : testing::supported_isas()) {
      std::vector<float> out(4 * dim);
      embedding(Ctx{nullptr, isa}, w.bytes.data(), dtype, dim, ids, 4, out.data());
      for (int r = 0; r < 4; ++r) {
        EXPECT_TRUE(same_bits(&out[r * dim], &w.values[ids[r] * dim], dim))
            << isa_name(isa) << dtype_name(dtype);
      }
    }
  }
}

TEST(Conversions, F16SpecialValues) {
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0xc000), -2.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16_to_f32(0x7c00)));
  EXPECT_TRUE(std::isnan(f16_to_f32(0x7e00)));
  for (uint32_t h = 0; h < 0x7c00; ++h) ASSERT_EQ(f32_to_f16(f16_to_f32(h)), h);  // round trip
  const uint16_t specials[] = {0x0001, 0x03ff, 0x0400, 0x7bff, 0x8001, 0xfbff, 0x7c00, 0xfc00};
  std::vector<float> out(8);
  for (Isa isa : testing::supported_isas()) {
    embedding(Ctx{nullptr, isa}, specials, DType::f16, 8, std::vector<int32_t>{0}.data(), 1, out.data());
    for (int i = 0; i < 8; ++i) EXPECT_EQ(out[i], f16_to_f32(specials[i])) << isa_name(isa);
  }
}

TEST(AddBias, AddsToEveryRow) {
  const int64_t rows = 3, n = 21;
  const auto bias = random_floats(n, 11);
  for (Isa isa : testing::supported_isas()) {
    std::vector<float> y(rows * n, 1.0f);
    add_bias(Ctx{nullptr, isa}, y.data(), bias.data(), rows, n);
    for (int64_t i = 0; i < rows * n; ++i) ASSERT_EQ(y[i], 1.0f + bias[i % n]);
  }
}

TEST(Argmax, LowestIndexOnTiesAndNanNeverWins) {
  const float a[] = {1.0f, 3.0f, 3.0f, -1.0f};
  EXPECT_EQ(argmax(a, 4), 1);
  const float b[] = {NAN, 2.0f, NAN, 2.0f};
  EXPECT_EQ(argmax(b, 4), 1);
  const float c[] = {-INFINITY, -INFINITY};
  EXPECT_EQ(argmax(c, 2), 0);
  const float d[] = {NAN, NAN, 5.0f};
  EXPECT_EQ(argmax(d, 3), 2);
}

// The one-pass scan argmax replaced (ADR 0056): the blocked version must give its index
// on every length (block tails), ties in and across blocks, NaN, infinities and signed zeros.
int32_t argmax_scan(const float* x, int64_t n) {
  int32_t best_index = 0;
  float best = -INFINITY;
  bool found = false;
  for (int64_t i = 0; i < n; ++i) {
    if (x[i] > best || (!found && x[i] == best)) {
      best = x[i];
      best_index = static_cast<int32_t>(i);
      found = true;
    }
  }
  return best_index;
}

TEST(Argmax, EqualsTheOnePassScanEverywhere) {
  uint32_t state = 12345u;
  auto next = [&] { return state = state * 1664525u + 1013904223u; };
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 1.0f, -1.0f};
  for (int64_t n : {int64_t{1}, int64_t{2}, int64_t{15}, int64_t{16}, int64_t{17}, int64_t{31}, int64_t{33},
                    int64_t{100}, int64_t{151936}}) {
    for (int trial = 0; trial < 40; ++trial) {
      std::vector<float> x(static_cast<size_t>(n));
      const int kind =
          trial % 5;  // 0 random, 1 few distinct values (ties), 2 specials, 3 all NaN/-inf, 4 zeros
      for (auto& v : x) {
        const uint32_t r = next();
        if (kind == 0) v = static_cast<float>(static_cast<int32_t>(r)) * 1e-9f;
        if (kind == 1) v = static_cast<float>(r % 3);
        if (kind == 2) v = specials[r % 7];
        if (kind == 3) v = r % 2 ? NAN : -INFINITY;
        if (kind == 4) v = r % 2 ? 0.0f : -0.0f;
      }
      if (kind == 3 && trial % 10 == 3) std::fill(x.begin(), x.end(), NAN);
      ASSERT_EQ(argmax(x.data(), n), argmax_scan(x.data(), n)) << "n=" << n << " trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
