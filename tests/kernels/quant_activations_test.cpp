// The activation quantizer (quant::quantize_activations, the q8_0 rule with
// an f32 scale): every KernelTable's quantize_act gives the scalar rule's
// bytes (ADR 0062) — on random rows, on exact ties of round-half-away-from-
// zero, and on the inputs that stress it (NaN, ±inf, −0, subnormals, a
// subnormal scale whose inverse overflows, all-zero blocks, huge values).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernel_table.h"
#include "quant/layout.h"
#include "test_util.h"

namespace tandem::kernels {
namespace {

// Blocks of 32 whose codes land on every rounding case the rule has.
std::vector<float> hard_rows() {
  std::vector<float> x;
  auto block = [&x](std::vector<float> v) {
    v.resize(32, 0.0f);
    x.insert(x.end(), v.begin(), v.end());
  };
  // amax 127 -> d = 1, id = 1: x itself is p, so these are exact ties.
  block({127.0f,     0.5f,    -0.5f,       1.5f,         -1.5f,       2.5f,   -2.5f,
         126.5f,     -126.5f, 0.49999997f, -0.49999997f, 0.50000006f, -0.0f,  0.0f,
         3.4999998f, 63.5f,   -63.5f,      100.5f,       -100.5f,     1e-30f, -1e-30f});
  block({});              // all zero
  block({-0.0f, -0.0f});  // only −0
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  block({nan, 1.0f, -2.0f, 3.0f});                                                  // NaN ignored by amax
  block({inf, 1.0f, -1.0f, 0.0f, -inf});                                            // d = inf
  block({1e-40f, -1e-40f, 5e-41f, 0.0f, 1e-45f});                                   // subnormal d, id = inf
  block({3.0e38f, -3.0e38f, 1.0e38f, 2.5e37f});                                     // near the top
  block({1.0f, 0.1f, 0.2f, 0.3f, 0.7f, -0.9f, 0.33333334f, 1e-7f, 0.0039370079f});  // amax 1
  std::vector<float> r = testing::random_floats(32 * 40, 7, -6.0f, 6.0f);
  for (int i = 0; i < 32 * 40; i += 37) r[i] = std::ldexp(r[i], (i % 60) - 30);  // wide magnitudes
  x.insert(x.end(), r.begin(), r.end());
  return x;
}

TEST(QuantActivations, EveryIsaGivesTheScalarBytes) {
  const std::vector<float> x = hard_rows();
  const int64_t k = static_cast<int64_t>(x.size());
  ASSERT_EQ(k % 32, 0);
  std::vector<quant::ActBlock> want(k / 32);
  quant::quantize_activations(x.data(), k, want.data());
  // Spot-check the rule itself on the tie block (round half away from zero).
  EXPECT_EQ(want[0].q[1], 1);
  EXPECT_EQ(want[0].q[2], -1);
  EXPECT_EQ(want[0].q[5], 3);
  EXPECT_EQ(want[0].q[6], -3);
  EXPECT_EQ(want[0].q[9], 0);
  for (Isa isa : testing::supported_isas()) {
    std::vector<quant::ActBlock> got(k / 32);
    std::memset(got.data(), 0x5a, got.size() * sizeof(quant::ActBlock));
    kernels_for(isa).quantize_act(x.data(), k, got.data());
    for (size_t b = 0; b < want.size(); ++b)
      ASSERT_EQ(std::memcmp(&want[b], &got[b], sizeof(quant::ActBlock)), 0)
          << isa_name(isa) << ": block " << b << " (first value " << x[32 * b] << ")";
  }
}

// Values as p itself (a 127 first in each block keeps id = 1): every
// multiple of 1/64 in [-127, 127] — all codes, both signs of every tie —
// and the floats either side of each tie, on each variant.
TEST(QuantActivations, EveryIsaAgreesOnADenseSweep) {
  std::vector<float> x;
  auto add = [&x](float v) {
    if (x.size() % 32 == 0) x.push_back(127.0f);
    x.push_back(v);
  };
  for (int i = -127 * 64; i <= 127 * 64; ++i) add(static_cast<float>(i) / 64.0f);
  for (int t = -127; t < 127; ++t) {
    const float tie = static_cast<float>(t) + 0.5f;
    add(std::nextafter(tie, -200.0f));
    add(std::nextafter(tie, 200.0f));
  }
  x.resize((x.size() + 31) / 32 * 32, 0.0f);
  const int64_t k = static_cast<int64_t>(x.size());
  std::vector<quant::ActBlock> want(k / 32), got(k / 32);
  quant::quantize_activations(x.data(), k, want.data());
  for (Isa isa : testing::supported_isas()) {
    kernels_for(isa).quantize_act(x.data(), k, got.data());
    ASSERT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(quant::ActBlock)), 0)
        << isa_name(isa);
  }
}

}  // namespace
}  // namespace tandem::kernels
