// gumbel.h — the seeded sampler's noise (ADR 0002), written so that the host
// and a CUDA device compute it bit for bit alike (ADR 0072): a sampled row
// picked on the GPU must give the token the host's Sampler gives.
//
//   u(seed, position, token) = (53 high bits of a SplitMix64 hash + 0.5) / 2^53, in (0, 1)
//   G(u) = -log(-log(u))                      (standard Gumbel noise)
//
// std::log and CUDA's log may differ in the last bit, so both sides take
// portable_log: plain IEEE double operations in a fixed order, no library
// call. Every operation below is one correctly rounded +, -, * or /, so the
// result is the same wherever contraction into fused multiply-adds is off
// (tandem_core's users that include this header: sampling, compiled with
// -ffp-contract=off; the CUDA kernels, compiled with --fmad=false).
// Header-only; no state.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TANDEM_HOST_DEVICE __host__ __device__
#else
#define TANDEM_HOST_DEVICE
#endif

namespace tandem::gumbel {

// SplitMix64's finaliser: a bijective 64-bit mix with good avalanche.
TANDEM_HOST_DEVICE inline uint64_t mix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The per-position key every token's noise at that position derives from.
TANDEM_HOST_DEVICE inline uint64_t position_key(uint64_t seed, int64_t position) {
  return mix64(mix64(seed) ^ static_cast<uint64_t>(position));
}

// Uniform in (0, 1] from the 53 high bits of the token's hash: never 0; 1
// (G(u) = +infinity) for the largest hash only, where bits + 0.5 rounds up to 2^53.
TANDEM_HOST_DEVICE inline double uniform_from(uint64_t key, int32_t token) {
  const uint64_t bits = mix64(key ^ static_cast<uint64_t>(static_cast<uint32_t>(token)));
  return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
}

TANDEM_HOST_DEVICE inline uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
#endif
}

TANDEM_HOST_DEVICE inline double double_of(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, sizeof x);
  return x;
#endif
}

// Natural log of a positive normal double (and -infinity at ±0, as std::log
// gives: G(1) = +infinity on both sides), within a few ulp of the true value
// (tests/core/gumbel_test.cpp holds it to std::log). x = 2^e · (1 + f) with
// 1 + f in [√2/2, √2); with s = f / (2 + f) and z = s², log(1 + f) = 2 atanh(s)
// = 2s + s·R, R = Σ_{k=1..11} 2 z^k / (2k + 1) (|s| < 0.1716: the next term is
// below 2^-60 of the sum), and as 2s = f - s·f (f is exact), log(1 + f) =
// f - s·(f - R): the rounding errors sit in a term ~f/2 the size of the result.
// log 2 is split in two so that e · hi is exact.
TANDEM_HOST_DEVICE inline double portable_log(double x) {
  constexpr double kSqrt2 = 0x1.6a09e667f3bcdp+0;
  constexpr double kLn2Hi = 0x1.62e42ff000000p-1;    // log 2 to 32 bits
  constexpr double kLn2Lo = -0x1.718432a1b0e26p-35;  // log 2 - kLn2Hi
  // 2 / (2k + 1), k = 11 down to 1, each correctly rounded.
  constexpr double kCoefficients[11] = {0x1.642c8590b2164p-4, 0x1.8618618618618p-4, 0x1.af286bca1af28p-4,
                                        0x1.e1e1e1e1e1e1ep-4, 0x1.1111111111111p-3, 0x1.3b13b13b13b14p-3,
                                        0x1.745d1745d1746p-3, 0x1.c71c71c71c71cp-3, 0x1.2492492492492p-2,
                                        0x1.999999999999ap-2, 0x1.5555555555555p-1};
  if (x == 0.0) return -static_cast<double>(INFINITY);
  const uint64_t bits = bits_of(x);
  int e = static_cast<int>((bits >> 52) & 0x7ff) - 1023;
  double m = double_of((bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull);  // [1, 2)
  if (m > kSqrt2) {
    m = m * 0.5;  // exact
    e += 1;
  }
  const double f = m - 1.0;  // exact (Sterbenz)
  const double s = f / (2.0 + f);
  const double z = s * s;
  double p = kCoefficients[0];
  for (int i = 1; i < 11; ++i) p = p * z + kCoefficients[i];
  const double log_m = f - s * (f - z * p);
  const double de = static_cast<double>(e);
  return de * kLn2Hi + (log_m + de * kLn2Lo);
}

// Standard Gumbel noise of a uniform from uniform_from.
TANDEM_HOST_DEVICE inline double gumbel_of(double u) { return -portable_log(-portable_log(u)); }

}  // namespace tandem::gumbel
