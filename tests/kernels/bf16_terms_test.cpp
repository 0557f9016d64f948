// f16 / f32 weights as sums of bf16 terms (ADR 0083): every finite f16 value
// is exactly its two terms' sum; an f32 value is its three terms' sum to
// within 2^-24 of it; the layout is term-major within a row.
#include "kernels/bf16_terms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "dtype_convert.h"

namespace tandem::kernels {
namespace {

double sum_of_terms(const uint16_t* row, int64_t pitch, int64_t i, int terms) {
  double sum = 0;  // exact: the terms' exponents lie within 60 binades of each other
  for (int t = 0; t < terms; ++t) sum += static_cast<double>(bf16_to_f32(row[t * pitch + i]));
  return sum;
}

TEST(Bf16Terms, CountsPerDtype) {
  EXPECT_EQ(bf16_terms(DType::bf16), 1);
  EXPECT_EQ(bf16_terms(DType::f16), 2);
  EXPECT_EQ(bf16_terms(DType::f32), 3);
  EXPECT_EQ(bf16_terms(DType::q8_0), 0);
  EXPECT_EQ(bf16_terms(DType::q4_k), 0);
}

TEST(Bf16Terms, EveryFiniteF16IsExactlyTwoTerms) {
  std::vector<float> values;
  for (uint32_t h = 0; h < 0x10000u; ++h)
    if ((h & 0x7c00u) != 0x7c00u) values.push_back(f16_to_f32(static_cast<uint16_t>(h)));
  const int64_t k = static_cast<int64_t>(values.size());
  std::vector<uint16_t> out(static_cast<size_t>(bf16_terms_k(k, 2)));
  split_bf16_terms(values.data(), 1, k, 2, out.data());
  const int64_t pitch = bf16_terms_k(k, 1);
  int64_t bad = 0;
  for (int64_t i = 0; i < k; ++i) {
    if (sum_of_terms(out.data(), pitch, i, 2) != static_cast<double>(values[i])) ++bad;
    // The first term is the value rounded to bf16 (what a bf16 copy would hold).
    if (out[i] != f32_to_bf16(values[i])) ++bad;
  }
  EXPECT_EQ(bad, 0) << "of " << k << " f16 values";
}

TEST(Bf16Terms, F32IsThreeTermsWithinTwoToTheMinus24) {
  std::mt19937 rng(83);
  std::vector<float> values;
  std::uniform_int_distribution<uint32_t> any_bits;
  while (values.size() < (1u << 20)) {  // random bit patterns over every finite binade
    uint32_t b = any_bits(rng);
    float f;
    std::memcpy(&f, &b, sizeof f);
    if (std::isfinite(f)) values.push_back(f);
  }
  std::normal_distribution<float> normal(0.0f, 0.02f);  // and weight-like values
  for (int i = 0; i < (1 << 18); ++i) values.push_back(normal(rng));
  for (float f :
       {0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
        std::numeric_limits<float>::denorm_min(), 1.0f + 0x1p-23f, 1.0f - 0x1p-24f})
    values.push_back(f);
  const int64_t k = static_cast<int64_t>(values.size());
  std::vector<uint16_t> out(static_cast<size_t>(bf16_terms_k(k, 3)));
  split_bf16_terms(values.data(), 1, k, 3, out.data());
  const int64_t pitch = bf16_terms_k(k, 1);
  int64_t beyond = 0, inexact = 0;
  for (int64_t i = 0; i < k; ++i) {
    const double v = values[i], err = std::fabs(sum_of_terms(out.data(), pitch, i, 3) - v);
    if (err > 0 && std::fabs(v) >= 0x1p-110) ++inexact;  // below: the last terms reach bf16's denormals
    // Relative to |v|, and absolutely at the bottom of the range (bf16 denormals).
    if (err > std::ldexp(std::fabs(v), -24) && err > std::ldexp(1.0, -133)) ++beyond;
  }
  EXPECT_EQ(beyond, 0) << "of " << k;
  EXPECT_EQ(inexact, 0) << "inexact sums above 2^-110";
}

// Each term block is k rounded up to a multiple of 8 (the GEMM's k % 8 == 0), zero past k.
TEST(Bf16Terms, RowsAreTermMajorPaddedAndNonFiniteKeepsOneTerm) {
  EXPECT_EQ(bf16_terms_k(3, 2), 16);
  EXPECT_EQ(bf16_terms_k(4, 3), 24);
  EXPECT_EQ(bf16_terms_k(16, 2), 32);
  EXPECT_EQ(bf16_terms_k(17, 1), 24);
  // The GPU's rule: f16 / f32 always as terms, bf16 only when k needs padding.
  EXPECT_EQ(bf16_split_k(DType::f16, 16), 32);
  EXPECT_EQ(bf16_split_k(DType::f32, 4), 24);
  EXPECT_EQ(bf16_split_k(DType::bf16, 16), 0);
  EXPECT_EQ(bf16_split_k(DType::bf16, 4), 8);
  EXPECT_EQ(bf16_split_k(DType::q8_0, 32), 0);
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> w = {1.0f + 0x1p-10f, -inf, 3.0f,    // row 0
                                std::nanf(""),   0.5f, -2.0f};  // row 1
  std::vector<uint16_t> out(2 * 16, 0xFFFF);
  split_bf16_terms(w.data(), 2, 3, 2, out.data());
  EXPECT_EQ(out[0], f32_to_bf16(1.0f));      // row 0, term 0
  EXPECT_EQ(out[8], f32_to_bf16(0x1p-10f));  // row 0, term 1 of column 0
  EXPECT_EQ(out[1], f32_to_bf16(-inf));
  EXPECT_EQ(out[9], 0);  // no second term for an infinity
  for (int i : {3, 4, 7, 11, 15, 19, 31}) EXPECT_EQ(out[i], 0) << "padding " << i;
  EXPECT_EQ(out[16], f32_to_bf16(std::nanf("")));  // row 1 starts at 2 · 8
  EXPECT_EQ(out[24], 0);
  EXPECT_EQ(out[17], f32_to_bf16(0.5f));
  EXPECT_EQ(out[25], 0);
}

}  // namespace
}  // namespace tandem::kernels
