// The wgmma probe (ADR 0053): does Hopper's wgmma.m64n256k16 (x as A from
// registers, weights as B from shared memory) round a chain of k16 steps
// exactly like mma.sync.m16n8k16 (weights as A, x as B: the invariant GEMM's
// chain)? Same 16 products per step and slot, same starting accumulator;
// every output compared with memcmp, over data built to stress the adder:
// wide exponent ranges, exact cancellations across the two 8-slot halves, a
// huge accumulator with small products, subnormal products. Also reported
// (not asserted): whether mma.sync itself changes bits when the 16 slots of a
// step are permuted in both operands, and the error against an f64 sum (a
// layout bug would show as a large one). Skipped without a CUDA device or an
// sm_90a build.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/gemm_wgmma.h"
#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

constexpr int kTrials = 264, kSteps = 4, kN = 256;

struct ProbeData {
  std::vector<uint16_t> x, w;  // [trial][step][row][16 slots]
  std::vector<float> c;        // [trial][64][256]
};

uint16_t bf16_of(std::mt19937& rng, int e_lo, int e_hi) {
  std::uniform_int_distribution<int> e(e_lo, e_hi), man(0, 127), sign(0, 1);
  const int exp = e(rng) + 127;
  return static_cast<uint16_t>((sign(rng) << 15) | (exp << 7) | man(rng));
}

float f32_of(std::mt19937& rng, int e_lo, int e_hi) {
  std::uniform_int_distribution<int> e(e_lo, e_hi), sign(0, 1);
  std::uniform_int_distribution<uint32_t> man(0, (1u << 23) - 1);
  const uint32_t bits =
      (static_cast<uint32_t>(sign(rng)) << 31) | (static_cast<uint32_t>(e(rng) + 127) << 23) | man(rng);
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// kind: 0 uniform [-1, 1]; 1 exponents in [-40, 40]; 2 cancellations (slots
// 8-15 negate slots 0-7's products, one slot perturbed); 3 accumulator near
// 2^24..2^30 with products near 1; 4 subnormal products; 5 exponents in
// [-8, 8] with an accumulator of either sign at [-8, 8].
ProbeData make_data(int kind, uint32_t seed) {
  std::mt19937 rng(seed);
  ProbeData d;
  d.x.resize(static_cast<size_t>(kTrials) * kSteps * 64 * 16);
  d.w.resize(static_cast<size_t>(kTrials) * kSteps * kN * 16);
  d.c.assign(static_cast<size_t>(kTrials) * 64 * kN, 0.0f);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  auto value = [&](int) -> uint16_t {
    switch (kind) {
      case 0:
        return testing::to_bf16({uni(rng)})[0];
      case 1:
        return bf16_of(rng, -40, 40);
      case 3:
        return bf16_of(rng, -4, 1);
      case 4:
        return bf16_of(rng, -72, -60);
      default:
        return bf16_of(rng, -8, 8);
    }
  };
  for (auto& v : d.x) v = value(0);
  for (auto& v : d.w) v = value(1);
  if (kind == 2) {  // x[s + 8] = -x[s], w[s + 8] = w[s], then one slot of x nudged
    for (size_t r = 0; r < d.x.size() / 16; ++r) {
      for (int s = 0; s < 8; ++s) d.x[r * 16 + 8 + s] = static_cast<uint16_t>(d.x[r * 16 + s] ^ 0x8000);
      d.x[r * 16 + (r % 16)] = static_cast<uint16_t>(d.x[r * 16 + (r % 16)] + 1);
    }
    for (size_t r = 0; r < d.w.size() / 16; ++r)
      for (int s = 0; s < 8; ++s) d.w[r * 16 + 8 + s] = d.w[r * 16 + s];
  }
  for (auto& v : d.c) {
    if (kind == 1) v = f32_of(rng, -30, 30);
    if (kind == 3) v = f32_of(rng, 24, 30);
    if (kind == 5) v = f32_of(rng, -8, 8);
  }
  return d;
}

struct Outputs {
  std::vector<float> mma, wgmma;
};

Outputs run_probe(const ProbeData& d, const Stream& stream) {
  DeviceBuffer x = testing::to_device(d.x, stream), w = testing::to_device(d.w, stream),
               c = testing::to_device(d.c, stream);
  DeviceBuffer ym = testing::poisoned(d.c.size() * 4, stream), yw = testing::poisoned(d.c.size() * 4, stream);
  const Status st = wgmma_probe(stream, kTrials, kSteps, x.as<uint16_t>(), w.as<uint16_t>(), c.as<float>(),
                                ym.as<float>(), yw.as<float>());
  EXPECT_TRUE(st.ok()) << st.to_string();
  return {testing::to_host<float>(ym, d.c.size(), stream), testing::to_host<float>(yw, d.c.size(), stream)};
}

size_t differing(const std::vector<float>& a, const std::vector<float>& b, size_t* first) {
  size_t count = 0;
  *first = a.size();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      if (count++ == 0) *first = i;
    }
  return count;
}

// Largest |d - Σ| / (Σ|terms| + |c|) over the first trials (f64 sums).
double worst_relative_error(const ProbeData& d, const std::vector<float>& out, int trials) {
  double worst = 0;
  for (int t = 0; t < trials; ++t)
    for (int r = 0; r < 64; ++r)
      for (int j = 0; j < kN; ++j) {
        const size_t o = (static_cast<size_t>(t) * 64 + r) * kN + j;
        double sum = d.c[o], mag = std::fabs(d.c[o]);
        for (int s = 0; s < kSteps; ++s)
          for (int q = 0; q < 16; ++q) {
            const double p = static_cast<double>(bf16_to_f32(
                                 d.x[((static_cast<size_t>(t) * kSteps + s) * 64 + r) * 16 + q])) *
                             bf16_to_f32(d.w[((static_cast<size_t>(t) * kSteps + s) * kN + j) * 16 + q]);
            sum += p;
            mag += std::fabs(p);
          }
        if (mag > 0) worst = std::max(worst, std::fabs(out[o] - sum) / mag);
      }
  return worst;
}

uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST(WgmmaProbe, WgmmaChainGivesTheMmaSyncBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  if (!wgmma_available()) GTEST_SKIP() << "skipped: no sm_90a build or not a compute 9.0 device";
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  static const char* const kKinds[] = {"uniform",          "wide exponents",     "cancellations",
                                       "huge accumulator", "subnormal products", "signed accumulator"};
  for (int kind = 0; kind < 6; ++kind) {
    const ProbeData d = make_data(kind, 1000 + kind);
    const Outputs o = run_probe(d, *stream);
    size_t first = 0;
    const size_t diff = differing(o.mma, o.wgmma, &first);
    // The same problem with every step's 16 slots reversed in both operands.
    ProbeData p = d;
    for (size_t r = 0; r < p.x.size() / 16; ++r)
      for (int s = 0; s < 16; ++s) p.x[r * 16 + s] = d.x[r * 16 + 15 - s];
    for (size_t r = 0; r < p.w.size() / 16; ++r)
      for (int s = 0; s < 16; ++s) p.w[r * 16 + s] = d.w[r * 16 + 15 - s];
    const Outputs op = run_probe(p, *stream);
    size_t pfirst = 0;
    const size_t pdiff = differing(o.mma, op.mma, &pfirst);
    size_t qfirst = 0;
    const size_t qdiff = differing(op.mma, op.wgmma, &qfirst);
    std::printf(
        "probe %-20s outputs %zu: wgmma != mma.sync: %zu; reversed slots: mma.sync(rev) != mma.sync: %zu, "
        "wgmma(rev) != mma.sync(rev): %zu; worst rel. error vs f64: mma %.3g wgmma %.3g\n",
        kKinds[kind], o.mma.size(), diff, pdiff, qdiff, worst_relative_error(d, o.mma, 4),
        worst_relative_error(d, o.wgmma, 4));
    if (diff > 0)
      std::printf("  first difference at %zu: mma.sync %08x (%.9g) wgmma %08x (%.9g)\n", first,
                  bits_of(o.mma[first]), o.mma[first], bits_of(o.wgmma[first]), o.wgmma[first]);
    if (pdiff > 0)
      std::printf("  first slot-order difference at %zu: %08x (%.9g) reversed %08x (%.9g)\n", pfirst,
                  bits_of(o.mma[pfirst]), o.mma[pfirst], bits_of(op.mma[pfirst]), op.mma[pfirst]);
    EXPECT_EQ(diff, 0u) << kKinds[kind];
    EXPECT_EQ(qdiff, 0u) << kKinds[kind] << " (reversed slots)";
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
