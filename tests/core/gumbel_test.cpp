// core/gumbel.h: portable_log against std::log (the noise the host and the GPU
// share, ADR 0072), and the noise's range.
#include "core/gumbel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tandem::gumbel {
namespace {

// Distance in units in the last place between two finite doubles of the same sign.
int64_t ulps(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return ia > ib ? ia - ib : ib - ia;
}

TEST(Gumbel, PortableLogIsWithinOneUlpOfStdLog) {
  uint64_t state = 11;
  int64_t worst = 0;
  for (int i = 0; i < 2000000; ++i) {
    state = mix64(state);
    // Every exponent the noise reaches (u in (2^-54, 1), -log(u) up to ~37.4) and beyond.
    const double x =
        std::ldexp(1.0 + static_cast<double>(state >> 12) * 0x1.0p-52, static_cast<int>(state % 140) - 80);
    const double want = std::log(x);
    const double got = portable_log(x);
    if (want == 0.0) {
      EXPECT_EQ(got, 0.0);
      continue;
    }
    ASSERT_EQ(std::signbit(got), std::signbit(want)) << x;
    worst = std::max(worst, ulps(got, want));
  }
  EXPECT_LE(worst, 1);
  EXPECT_EQ(portable_log(1.0), 0.0);
  EXPECT_EQ(portable_log(2.0), std::log(2.0));
  EXPECT_NEAR(portable_log(1.0 - 0x1.0p-53), -0x1.0p-53, 0x1.0p-105);
}

TEST(Gumbel, NoiseIsFiniteAndNearTheLibraryValue) {
  for (int t = 0; t < 200000; ++t) {
    const double u = uniform_from(position_key(42, t), t * 7);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    const double g = gumbel_of(u);
    ASSERT_TRUE(std::isfinite(g));
    EXPECT_NEAR(g, -std::log(-std::log(u)), 1e-12 * (1.0 + std::fabs(g)));
  }
  // The extremes of the uniforms: the smallest; the largest below 1; 1 itself
  // (the largest hash: bits + 0.5 rounds to 2^53), +infinity as with std::log.
  EXPECT_TRUE(std::isfinite(gumbel_of(0.5 * 0x1.0p-53)));
  EXPECT_TRUE(std::isfinite(gumbel_of(1.0 - 0x1.0p-53)));
  EXPECT_EQ(gumbel_of(1.0), -std::log(-std::log(1.0)));
  EXPECT_EQ(gumbel_of(1.0), HUGE_VAL);
  EXPECT_EQ(portable_log(0.0), -HUGE_VAL);
  EXPECT_EQ(portable_log(-0.0), -HUGE_VAL);
}

}  // namespace
}  // namespace tandem::gumbel
