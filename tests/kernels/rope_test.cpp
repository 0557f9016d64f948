// RoPE: frequency tables against transformers' formulas, rotation against a
// double-precision rotation, every variant bitwise equal to the reference (the
// rotation is the same mul/mul/add sequence), row-wise invariance.
#include <gtest/gtest.h>

#include <cmath>

#include "test_util.h"

namespace tandem::kernels {
namespace {

using testing::random_floats;
using testing::same_bits;

TEST(RopeFreq, DefaultMatchesFormula) {
  const auto inv = rope_inv_freq(64, 10000.0, RopeScaling{});
  ASSERT_EQ(inv.size(), 32u);
  EXPECT_EQ(inv[0], 1.0f);
  for (int i = 0; i < 32; ++i) {
    const double want = 1.0 / std::pow(10000.0, (2.0 * i) / 64.0);
    EXPECT_NEAR(inv[i], want, 4e-7 * want) << i;
  }
}

TEST(RopeFreq, LinearDividesByFactor) {
  RopeScaling s;
  s.kind = RopeScaling::Kind::linear;
  s.factor = 4.0;
  const auto base = rope_inv_freq(128, 1e6, RopeScaling{});
  const auto inv = rope_inv_freq(128, 1e6, s);
  for (size_t i = 0; i < inv.size(); ++i) EXPECT_EQ(inv[i], base[i] / 4.0f);
}

// Llama-3.2 settings: theta 500000, factor 32, low 1, high 4, original 8192.
TEST(RopeFreq, Llama3KeepsHighScalesLowAndSmoothsMedium) {
  RopeScaling s;
  s.kind = RopeScaling::Kind::llama3;
  s.factor = 32.0;
  s.low_freq_factor = 1.0;
  s.high_freq_factor = 4.0;
  s.original_max_position = 8192;
  const auto base = rope_inv_freq(64, 500000.0, RopeScaling{});
  const auto inv = rope_inv_freq(64, 500000.0, s);
  int high = 0, low = 0, medium = 0;
  for (size_t i = 0; i < inv.size(); ++i) {
    const double wavelen = 2 * M_PI / base[i];
    if (wavelen < 8192.0 / 4.0) {
      EXPECT_EQ(inv[i], base[i]);
      ++high;
    } else if (wavelen > 8192.0) {
      EXPECT_EQ(inv[i], base[i] / 32.0f);
      ++low;
    } else {
      const double smooth = (8192.0 / wavelen - 1.0) / 3.0;
      const double want = (1 - smooth) * base[i] / 32.0 + smooth * base[i];
      EXPECT_NEAR(inv[i], want, 1e-6 * want);
      ++medium;
    }
  }
  EXPECT_GT(high, 0);
  EXPECT_GT(low, 0);
  EXPECT_GT(medium, 0);
}

TEST(Rope, RotatesPairsLikeTransformers) {
  const int heads = 3, head_dim = 16, rotary = 12;  // partial rotary: last 4 dims untouched
  const auto inv = rope_inv_freq(rotary, 10000.0, RopeScaling{});
  const int32_t positions[] = {0, 7, 4097};
  for (RopeLayout layout : {RopeLayout::neox, RopeLayout::interleaved}) {
    const auto x = random_floats(3 * heads * head_dim, 12);
    std::vector<float> y = x;
    rope(Ctx{nullptr, Isa::scalar}, y.data(), 3, heads, head_dim, positions, inv.data(), rotary, layout);
    for (int r = 0; r < 3; ++r) {
      for (int h = 0; h < heads; ++h) {
        const float* in = &x[(r * heads + h) * head_dim];
        const float* out = &y[(r * heads + h) * head_dim];
        for (int i = 0; i < rotary / 2; ++i) {
          const int a = layout == RopeLayout::neox ? i : 2 * i;
          const int b = layout == RopeLayout::neox ? i + rotary / 2 : 2 * i + 1;
          const double angle = static_cast<double>(static_cast<float>(positions[r]) * inv[i]);
          EXPECT_NEAR(out[a], in[a] * std::cos(angle) - in[b] * std::sin(angle), 3e-7);
          EXPECT_NEAR(out[b], in[b] * std::cos(angle) + in[a] * std::sin(angle), 3e-7);
        }
        for (int i = rotary; i < head_dim; ++i) EXPECT_EQ(out[i], in[i]);
      }
    }
  }
}

TEST(Rope, VariantsEqualReferenceWithPartialRotary) {
  const int heads = 3, head_dim = 80, rotary = 36;  // tails in every vector width
  const auto inv = rope_inv_freq(rotary, 10000.0, RopeScaling{});
  const int32_t positions[] = {5, 40000};
  for (RopeLayout layout : {RopeLayout::neox, RopeLayout::interleaved}) {
    const auto x = random_floats(2 * heads * head_dim, 14);
    std::vector<float> want = x;
    rope(Ctx{nullptr, Isa::scalar}, want.data(), 2, heads, head_dim, positions, inv.data(), rotary, layout);
    for (Isa isa : testing::simd_isas()) {
      std::vector<float> got = x;
      rope(Ctx{nullptr, isa}, got.data(), 2, heads, head_dim, positions, inv.data(), rotary, layout);
      EXPECT_TRUE(same_bits(got.data(), want.data(), got.size())) << isa_name(isa);
    }
  }
}

TEST(Rope, VariantsEqualReferenceAndRowsAreInvariant) {
  const int heads = 14, head_dim = 64;
  const int64_t rows = 9;
  const auto inv = rope_inv_freq(head_dim, 1e6, RopeScaling{});
  std::vector<int32_t> positions(rows);
  for (int64_t r = 0; r < rows; ++r) positions[r] = static_cast<int32_t>(r * 1000 + 31);
  for (RopeLayout layout : {RopeLayout::neox, RopeLayout::interleaved}) {
    const auto x = random_floats(rows * heads * head_dim, 13);
    std::vector<float> want = x;
    rope(Ctx{nullptr, Isa::scalar}, want.data(), rows, heads, head_dim, positions.data(), inv.data(),
         head_dim, layout);
    for (Isa isa : testing::supported_isas()) {
      ThreadPool pool(3);
      std::vector<float> got = x;
      rope(Ctx{&pool, isa}, got.data(), rows, heads, head_dim, positions.data(), inv.data(), head_dim,
           layout);
      EXPECT_TRUE(same_bits(got.data(), want.data(), got.size())) << isa_name(isa);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> alone(x.begin() + r * heads * head_dim, x.begin() + (r + 1) * heads * head_dim);
        rope(Ctx{nullptr, isa}, alone.data(), 1, heads, head_dim, &positions[r], inv.data(), head_dim,
             layout);
        ASSERT_TRUE(same_bits(alone.data(), &got[r * heads * head_dim], alone.size())) << isa_name(isa);
      }
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
