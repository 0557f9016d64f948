// Quantized weights: GGUF block formats against gguf-py goldens (bit-exact
// dequantize and q8_0/q4_0 quantize), the shape checks, and the quantized
// matmul — every ISA bitwise equal to the reference, batch invariant
// (memcmp, every row blocking up to M = 33, threads 1/2/3), within the documented bound of the
// dequantize-then-f64 product, and splitk detectably not invariant.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "avx2/avx2.h"
#include "avx512/avx512.h"
#include "dtype_convert.h"
#include "kernels/ops.h"
#include "kernels/prefetch.h"
#include "quant/layout.h"
#include "reference/reference.h"
#include "test_util.h"

namespace tandem::kernels {
namespace {

using testing::random_floats;
using testing::supported_isas;

struct Golden {
  std::vector<float> input;  // empty for the K types
  std::vector<uint8_t> blocks;
  std::vector<float> dequantized;
};

std::map<std::string, Golden> load_goldens() {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  const std::string path =
      std::string(root ? root : TANDEM_SOURCE_DIR_DEFAULT) + "/tests/fixtures/quant/goldens.bin";
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f.good()) << path;
  auto u32 = [&] {
    uint32_t v = 0;
    f.read(reinterpret_cast<char*>(&v), 4);
    return v;
  };
  char magic[4];
  f.read(magic, 4);
  EXPECT_EQ(std::string(magic, 4), "TQG1");
  std::map<std::string, Golden> out;
  const uint32_t entries = u32();
  for (uint32_t e = 0; e < entries && f.good(); ++e) {
    char name[9] = {};
    f.read(name, 8);
    Golden g;
    const uint32_t count = u32(), has_input = u32();
    if (has_input != 0) {
      g.input.resize(count);
      f.read(reinterpret_cast<char*>(g.input.data()), count * 4);
    }
    g.blocks.resize(u32());
    f.read(reinterpret_cast<char*>(g.blocks.data()), static_cast<std::streamsize>(g.blocks.size()));
    g.dequantized.resize(count);
    f.read(reinterpret_cast<char*>(g.dequantized.data()), count * 4);
    out[name] = std::move(g);
  }
  EXPECT_EQ(out.size(), 6u);
  return out;
}

DType dtype_named(const std::string& name) {
  for (DType d : {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k, DType::q5_k, DType::q6_k}) {
    if (name == dtype_name(d)) return d;
  }
  ADD_FAILURE() << name;
  return DType::q8_0;
}

const DType kQuantTypes[] = {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k, DType::q5_k, DType::q6_k};

TEST(QuantFormats, SizesAndNames) {
  EXPECT_EQ(dtype_block_elems(DType::q8_0), 32);
  EXPECT_EQ(dtype_block_bytes(DType::q8_0), 34u);
  EXPECT_EQ(dtype_block_bytes(DType::q4_0), 18u);
  EXPECT_EQ(dtype_block_elems(DType::q5_0), 32);
  EXPECT_EQ(dtype_block_bytes(DType::q5_0), 22u);
  EXPECT_EQ(dtype_row_bytes(DType::q5_0, 896), 616u);
  EXPECT_STREQ(dtype_name(DType::q5_0), "q5_0");
  EXPECT_EQ(dtype_block_elems(DType::q4_k), 256);
  EXPECT_EQ(dtype_block_bytes(DType::q4_k), 144u);
  EXPECT_EQ(dtype_block_bytes(DType::q5_k), 176u);
  EXPECT_EQ(dtype_block_bytes(DType::q6_k), 210u);
  EXPECT_EQ(dtype_row_bytes(DType::q4_k, 512), 288u);
  EXPECT_EQ(dtype_row_bytes(DType::bf16, 7), 14u);
  EXPECT_STREQ(dtype_name(DType::q5_k), "q5_k");
  EXPECT_TRUE(dtype_is_quantized(DType::q6_k));
  EXPECT_FALSE(dtype_is_quantized(DType::bf16));
}

TEST(QuantFormats, ShapeCheckNamesTheBlock) {
  EXPECT_TRUE(check_matrix_shape(DType::q4_k, 3, 512).ok());
  EXPECT_TRUE(check_matrix_shape(DType::bf16, 3, 7).ok());
  const Status s = check_matrix_shape(DType::q4_k, 4, 896);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("q4_k"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("256"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("896"), std::string::npos) << s.message();
  EXPECT_FALSE(check_matrix_shape(DType::q8_0, 0, 32).ok());
  EXPECT_FALSE(check_matrix_shape(DType::q8_0, 2, 48).ok());
}

TEST(QuantFormats, DequantizeIsBitExactToGgufPy) {
  for (const auto& [name, g] : load_goldens()) {
    const DType d = dtype_named(name);
    std::vector<float> out(g.dequantized.size(), -1.0f);
    to_f32(g.blocks.data(), d, static_cast<int64_t>(out.size()), out.data());
    EXPECT_EQ(0, std::memcmp(out.data(), g.dequantized.data(), out.size() * 4)) << name;
    // embedding() dequantizes a row the same way.
    const int64_t dim = dtype_block_elems(d) * (dtype_block_elems(d) == 32 ? 4 : 2);
    const int32_t ids[] = {1, 0};
    std::vector<float> rows(2 * dim);
    embedding(Ctx{}, g.blocks.data(), d, dim, ids, 2, rows.data());
    EXPECT_EQ(0, std::memcmp(rows.data(), g.dequantized.data() + dim, dim * 4)) << name;
    EXPECT_EQ(0, std::memcmp(rows.data() + dim, g.dequantized.data(), dim * 4)) << name;
  }
}

TEST(QuantFormats, QuantizeIsBitIdenticalToGgufPy) {
  for (const auto& [name, g] : load_goldens()) {
    if (g.input.empty()) continue;  // gguf-py has no K-quant quantizer
    const DType d = dtype_named(name);
    std::vector<uint8_t> out(g.blocks.size(), 0xee);
    quantize(g.input.data(), d, static_cast<int64_t>(g.input.size()), out.data());
    EXPECT_EQ(out, g.blocks) << name;
  }
}

TEST(QuantFormats, Q4KQuantizerRoundTripsWithinItsStep) {
  const int64_t k = 1024;
  const std::vector<float> x = random_floats(k, 7);
  std::vector<uint8_t> blocks(dtype_row_bytes(DType::q4_k, k));
  quantize(x.data(), DType::q4_k, k, blocks.data());
  std::vector<float> back(k);
  to_f32(blocks.data(), DType::q4_k, k, back.data());
  // Each 32-element sub-block spans max − min ≤ 2 in 15 steps; the 6-bit
  // scale adds at most one part in 63·2 per step: error ≤ ~0.6 step.
  for (int64_t i = 0; i < k; ++i) EXPECT_NEAR(back[i], x[i], 0.6 * 2.0 / 15.0) << i;
}

// A NaN or infinite weight or activation gives meaningless numbers, never
// undefined behaviour (UBSan builds run this) or out-of-range codes.
// q8_0 rounds x / d half away from zero (gguf-py's np_roundf, llama.cpp's
// roundf): with amax 127 the scale is exactly 1, so each code is its value
// rounded by that rule — ties, their float neighbours, and both signs.
TEST(QuantFormats, Q8_0RoundsHalfAwayFromZero) {
  const float below_half = std::nextafter(0.5f, 0.0f), above_half = std::nextafter(0.5f, 1.0f);
  const std::vector<std::pair<float, int>> cases = {
      {127.0f, 127},     {2.5f, 3},       {-2.5f, -3},      {0.5f, 1}, {-0.5f, -1}, {126.5f, 127},
      {-126.5f, -127},   {below_half, 0}, {-below_half, 0}, {1.5f, 2}, {3.5f, 4},   {above_half, 1},
      {-above_half, -1}, {7.25f, 7},      {-7.75f, -8},     {0.0f, 0}, {-0.0f, 0},  {100.49999f, 100}};
  std::vector<float> x(32, 0.0f);
  for (size_t i = 0; i < cases.size(); ++i) x[i] = cases[i].first;
  std::vector<uint8_t> block(dtype_row_bytes(DType::q8_0, 32));
  quantize(x.data(), DType::q8_0, 32, block.data());
  EXPECT_EQ(block[0] | (block[1] << 8), 0x3c00);  // d = 1.0 in f16
  for (size_t i = 0; i < cases.size(); ++i)
    EXPECT_EQ(static_cast<int8_t>(block[2 + i]), cases[i].second) << "x = " << cases[i].first;
}

// `seed`'s random 32-value blocks, then one block per edge list (its values
// first, zeros after).
std::vector<float> blocks_with_edges(uint32_t seed, const std::vector<std::vector<float>>& edges) {
  std::vector<float> x = random_floats(32 * 64, seed);
  for (const auto& e : edges) {
    std::vector<float> block(32, 0.0f);
    std::copy(e.begin(), e.end(), block.begin());
    x.insert(x.end(), block.begin(), block.end());
  }
  return x;
}

// `x` quantized to `dtype` with the kernels limited to `isa`.
std::vector<uint8_t> quantized_on(Isa isa, DType dtype, const std::vector<float>& x) {
  select_isa(isa);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(dtype_row_bytes(dtype, n), 0xee);
  quantize(x.data(), dtype, n, out.data());
  select_isa(best_supported_isa());
  return out;
}

// q8_0 runs through the SIMD activation quantizer where the CPU has one
// (ADR 0064): every ISA gives the scalar rule's bytes, on random blocks and on
// the edges — ties, NaN / inf, an all-zero block, and a block whose scale is
// subnormal so that 1 / d overflows (there the scalar clamp to [-128, 127]
// gives -128 for a negative value, where the activation rule's is -127).
TEST(QuantFormats, Q8_0IsTheSameOnEveryIsa) {
  const std::vector<float> x = blocks_with_edges(9, {{2.5f, -2.5f, 0.5f, -0.5f, 127.0f, -126.5f},
                                                     {NAN, 1.0f, -3.0f, INFINITY},
                                                     {-INFINITY, 2.0f},
                                                     {0.0f},
                                                     {-1e-40f, 1e-40f, 0.0f, -5e-41f}});
  const std::vector<uint8_t> want = quantized_on(Isa::scalar, DType::q8_0, x);
  const uint8_t* sub = want.data() + (want.size() - 34) + 2;  // the subnormal-scale block's codes
  EXPECT_EQ(static_cast<int8_t>(sub[0]), -128);
  EXPECT_EQ(static_cast<int8_t>(sub[1]), 127);
  EXPECT_EQ(static_cast<int8_t>(sub[2]), 0);
  for (Isa isa : testing::supported_isas())
    EXPECT_EQ(quantized_on(isa, DType::q8_0, x), want) << isa_name(isa);
}

// q4_0 has an AVX2 twin (also the AVX-512 table's; ADR 0064): every ISA gives
// the scalar rule's bytes on random blocks and on the edges — the largest
// magnitude tied between signs (the first wins), NaN / ±inf, all-zero and
// all-negative-zero blocks, values landing exactly on x · id + 8.5 integers,
// and a subnormal scale whose inverse overflows.
TEST(QuantFormats, Q4_0IsTheSameOnEveryIsa) {
  const std::vector<float> x = blocks_with_edges(11, {{-3.0f, 3.0f, 1.0f},
                                                      {3.0f, -3.0f, -1.5f},
                                                      {NAN, 2.0f, -1.0f},
                                                      {INFINITY, -2.0f},
                                                      {-INFINITY, 5.0f},
                                                      {0.0f},
                                                      {-0.0f, -0.0f},
                                                      {8.0f, 0.5f, -7.5f, 1.0f, -1.0f, 4.5f},
                                                      {1e-44f, -3e-45f}});
  const std::vector<uint8_t> want = quantized_on(Isa::scalar, DType::q4_0, x);
  for (Isa isa : testing::supported_isas())
    EXPECT_EQ(quantized_on(isa, DType::q4_0, x), want) << isa_name(isa);
}

TEST(QuantFormats, NonFiniteInputsStayDefined) {
  std::vector<float> x = random_floats(256, 3);
  x[5] = NAN;
  x[40] = INFINITY;
  x[77] = -INFINITY;
  for (DType d : {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k, DType::q6_k}) {
    std::vector<uint8_t> blocks(dtype_row_bytes(d, 256));
    quantize(x.data(), d, 256, blocks.data());
    const PackedMatrix pm = PackedMatrix::pack(blocks.data(), d, 1, 256);
    float y = 0;
    matmul(Ctx{}, x.data(), 1, pm, &y);  // activations with NaN/inf too
    SUCCEED() << y;
  }
}

// Quantized [n][k] weights of `dtype`: q8_0/q4_0/q4_k via quantize(), q5_0,
// q5_k and q6_k as random codes with small finite f16 scales.
std::vector<uint8_t> make_quant_weights(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  std::vector<uint8_t> bytes(static_cast<size_t>(n) * dtype_row_bytes(dtype, k));
  if (dtype == DType::q8_0 || dtype == DType::q4_0 || dtype == DType::q4_k) {
    const std::vector<float> v = random_floats(static_cast<size_t>(n * k), seed);
    quantize(v.data(), dtype, n * k, bytes.data());
    return bytes;
  }
  std::mt19937 rng(seed);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
  const size_t bb = dtype_block_bytes(dtype);
  std::uniform_real_distribution<float> scale(0.001f, 0.01f);
  for (size_t off = 0; off < bytes.size(); off += bb) {
    const uint16_t d = f32_to_f16(scale(rng)), dmin = f32_to_f16(scale(rng));
    if (dtype == DType::q5_0) {
      std::memcpy(&bytes[off], &d, 2);
    } else if (dtype == DType::q5_k) {
      std::memcpy(&bytes[off], &d, 2);
      std::memcpy(&bytes[off + 2], &dmin, 2);
    } else {
      std::memcpy(&bytes[off + 208], &d, 2);
    }
  }
  return bytes;
}

std::vector<float> run(Isa isa, ThreadPool* pool, GemmMode mode, const float* x, int64_t m,
                       const PackedMatrix& w) {
  Ctx ctx;
  ctx.pool = pool;
  ctx.isa = isa;
  ctx.gemm = mode;
  std::vector<float> y(static_cast<size_t>(m * w.n()), NAN);
  matmul(ctx, x, m, w, y.data());
  return y;
}

// A matrix of 16 MiB or more is packed by several threads, one group of
// outputs each (split_for_load): every group's bytes equal those of the same
// rows packed alone (one thread) — across the split boundaries and in the
// last, partial group.
TEST(QuantFormats, ThreadedPackingGivesEachGroupsBytes) {
  const int64_t k = 4096, n = quant::kGroup * 301 + 5;  // q8_0: 20.9 MB of blocks
  const size_t row_bytes = dtype_row_bytes(DType::q8_0, k);
  std::vector<uint8_t> blocks(static_cast<size_t>(n) * row_bytes);  // q8_0 blocks: f16 d, 32 codes
  std::mt19937 rng(5);
  for (size_t b = 0; b < blocks.size(); b += 34) {
    const uint16_t d = static_cast<uint16_t>(0x2000 + rng() % 0x2000);  // finite, positive
    std::memcpy(&blocks[b], &d, 2);
    for (int i = 0; i < 32; ++i) blocks[b + 2 + i] = static_cast<uint8_t>(rng());
  }
  const PackedMatrix all = PackedMatrix::pack(blocks.data(), DType::q8_0, n, k);
  const size_t group_bytes = static_cast<size_t>(quant::layout_of(DType::q8_0).group_bytes(k));
  const int64_t groups = quant::group_count(n);
  for (int64_t g : {int64_t{0}, groups / 8, groups / 4, groups / 2, groups / 2 + 1, groups - 2, groups - 1}) {
    const int64_t first = g * quant::kGroup, rows = std::min(quant::kGroup, n - first);
    const PackedMatrix one = PackedMatrix::pack(blocks.data() + first * row_bytes, DType::q8_0, rows, k);
    EXPECT_EQ(std::memcmp(one.data(), all.data() + g * group_bytes, group_bytes), 0) << "group " << g;
  }
}

TEST(QuantMatmul, WithinBoundOfDequantizedProduct) {
  const int64_t n = 83, k = 512, m = 3;
  const std::vector<float> x = random_floats(m * k, 11, -2.0f, 2.0f);
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 5);
    std::vector<float> w(static_cast<size_t>(n * k));
    to_f32(bytes.data(), dtype, n * k, w.data());
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    EXPECT_EQ(pm.weight_bytes() % static_cast<size_t>(n), 0u);
    const std::vector<float> y = run(Isa::scalar, nullptr, GemmMode::invariant, x.data(), m, pm);
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        // x is quantized per 32-block with step d = max|x|/127: |x − x̂| ≤ d/2
        // (round-half-away, plus an ulp-level excess); the f32 chain adds a
        // relative (blocks + 6)·2⁻²⁴ per term (docs/quantized.md).
        double exact = 0, bound = 0;
        for (int64_t b = 0; b < k / 32; ++b) {
          float amax = 0;
          for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[r * k + b * 32 + i]));
          const double step = amax / 127.0;
          for (int i = 0; i < 32; ++i) {
            const double xi = x[r * k + b * 32 + i], wi = w[c * k + b * 32 + i];
            exact += xi * wi;
            bound += std::fabs(wi) *
                     (0.5 * step * (1 + 1e-5) + (k / 32 + 6) * std::ldexp(2.0 * std::fabs(xi), -24));
          }
        }
        EXPECT_NEAR(y[r * n + c], exact, bound) << dtype_name(dtype) << " row " << r << " col " << c;
      }
    }
  }
}

TEST(QuantMatmul, EveryIsaIsBitwiseTheReferenceAndBatchInvariant) {
  // n = 72: five groups, the last partial (a lone row takes 4 + 1 groups).
  const int64_t n = 72, k = 512, max_m = 33;
  const std::vector<float> x = random_floats(max_m * k, 21);
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 9);
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    // Every row computed alone by the reference: the bits all must produce.
    std::vector<float> alone(static_cast<size_t>(max_m * n));
    for (int64_t r = 0; r < max_m; ++r) {
      const std::vector<float> y = run(Isa::scalar, nullptr, GemmMode::invariant, x.data() + r * k, 1, pm);
      std::memcpy(&alone[r * n], y.data(), n * 4);
    }
    for (Isa isa : supported_isas()) {
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        // Every blocking the kernels have (1, 2, 3, 4 rows and their tails
        // over 4-row blocks) and the full 33-row batch.
        for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 31, 33}) {
          const std::vector<float> y =
              run(isa, threads > 1 ? &pool : nullptr, GemmMode::invariant, x.data(), m, pm);
          ASSERT_EQ(0, std::memcmp(y.data(), alone.data(), m * n * 4))
              << dtype_name(dtype) << " " << isa_name(isa) << " threads " << threads << " M " << m;
        }
      }
    }
  }
}

// A lone row walks a thread's groups as 2 (AVX2) or 4 (AVX-512) contiguous
// runs side by side; a wide N gives every run length and leftover (24
// groups, the last partial, split over 1/2/3 threads): the bits stay the
// reference's.
TEST(QuantMatmul, LoneRowRunsKeepBits) {
  const int64_t n = 16 * 23 + 5, k = 256;
  const std::vector<float> x = random_floats(2 * k, 23);
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 29);
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    for (int64_t m : {1, 2}) {
      const std::vector<float> want = run(Isa::scalar, nullptr, GemmMode::invariant, x.data(), m, pm);
      for (Isa isa : supported_isas()) {
        for (int threads : {1, 2, 3}) {
          ThreadPool pool(threads);
          const std::vector<float> y =
              run(isa, threads > 1 ? &pool : nullptr, GemmMode::invariant, x.data(), m, pm);
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4))
              << dtype_name(dtype) << " " << isa_name(isa) << " threads " << threads << " M " << m;
        }
      }
    }
  }
}

// Software prefetch only moves data earlier (ADR 0049): every policy —
// none, near only, far only, odd distances, 1..3 streams for a lone row —
// gives the reference's bits, for dense and quantized weights, M = 1 (the
// multi-stream paths, and one stream; the K types' per-call streams, ADR 0086:
// 8 and 4 over the test's 2 threads; the shared split of ADR 0092, one unit and
// ~20 kB a piece) and M = 9.
TEST(PrefetchPolicy, DoesNotChangeBits) {
  const PrefetchPolicy saved = prefetch_policy();
  const PrefetchPolicy policies[] = {saved,
                                     PrefetchPolicy{0, 0, 0, false, 0, 1},
                                     PrefetchPolicy{4096, 65536, 0, true, 512, 1},
                                     PrefetchPolicy{0, 65536, 65536, true, 0, 2},
                                     PrefetchPolicy{192, 8192, 1024, false, 4096, 3},
                                     PrefetchPolicy{4096, 65536, 0, true, 256, 1, 8},
                                     PrefetchPolicy{4096, 65536, 0, true, 256, 1, 4},
                                     PrefetchPolicy{4096, 65536, 0, true, 256, 1, 2, 1},
                                     PrefetchPolicy{4096, 65536, 0, true, 256, 4, 0, 20000}};
  const int64_t n = 6 * 64 + 16 * 3 + 5, k = 256;
  const std::vector<float> x = random_floats(9 * k, 41);
  std::vector<PackedMatrix> mats;
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 43);
    mats.push_back(PackedMatrix::pack(bytes.data(), dtype, n, k));
  }
  for (DType dtype : {DType::bf16, DType::f16, DType::f32}) {
    const auto wts = testing::make_weights(dtype, n * k, 44);
    mats.push_back(PackedMatrix::pack(wts.bytes.data(), dtype, n, k));
  }
  ThreadPool pool(2);
  for (const PackedMatrix& pm : mats) {
    for (Isa isa : supported_isas()) {
      for (int64_t m : {1, 9}) {
        set_prefetch_policy(saved);
        const std::vector<float> want = run(isa, &pool, GemmMode::invariant, x.data(), m, pm);
        for (const PrefetchPolicy& p : policies) {
          set_prefetch_policy(p);
          const std::vector<float> y = run(isa, &pool, GemmMode::invariant, x.data(), m, pm);
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4))
              << dtype_name(pm.dtype()) << " " << isa_name(isa) << " M " << m << " " << describe(p);
        }
      }
    }
  }
  set_prefetch_policy(saved);
}

TEST(PrefetchPolicy, ParsesOnTopOfABaseAndRejectsJunk) {
  const PrefetchPolicy base = prefetch_policy_for(CpuVendor::intel);
  EXPECT_EQ(
      describe(base),
      "near=4096,far=65536,stream_far=65536,next=1,quant=2048,streams=4,kstreams=0,share=0");  // pre-0049
  EXPECT_EQ(describe(prefetch_policy_for(CpuVendor::other)), describe(base));
  EXPECT_EQ(describe(prefetch_policy_for(CpuVendor::intel, true)), describe(base));
  EXPECT_EQ(prefetch_policy_for(CpuVendor::amd, false).streams, 4);  // Zen 3: ADR 0049
  EXPECT_EQ(describe(prefetch_policy_for(CpuVendor::amd, true)),     // Zen 4 on: ADR 0076
            "near=4096,far=65536,stream_far=0,next=1,quant=256,streams=1,kstreams=2,share=65536");  // 0092
  const auto p = parse_prefetch_policy("far=0, quant=512", base);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(describe(*p), "near=4096,far=0,stream_far=65536,next=1,quant=512,streams=4,kstreams=0,share=0");
  EXPECT_EQ(parse_prefetch_policy("streams=1", base)->streams, 1);
  EXPECT_EQ(parse_prefetch_policy("stream_far=0", base)->stream_far_bytes, 0);
  EXPECT_EQ(describe(*parse_prefetch_policy(describe(*p), base)), describe(*p));
  EXPECT_EQ(describe(*parse_prefetch_policy("", base)), describe(base));
  EXPECT_FALSE(parse_prefetch_policy("near=-1", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("next=2", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("streams=0", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("streams=5", base).has_value());
  EXPECT_EQ(parse_prefetch_policy("kstreams=3", base)->k_call_streams, 3);
  EXPECT_FALSE(parse_prefetch_policy("kstreams=17", base).has_value());
  EXPECT_EQ(parse_prefetch_policy("share=65536", base)->share_bytes, 65536);
  EXPECT_FALSE(parse_prefetch_policy("share=-1", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("far", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("farther=1", base).has_value());
  EXPECT_FALSE(parse_prefetch_policy("near=4k", base).has_value());
}

// ADR 0086: the K types' lone-row streams are the call's, shared by its
// threads; the other types (and k_call_streams = 0) keep `streams` a thread.
TEST(PrefetchPolicy, KCallStreamsAreSharedByTheThreads) {
  PrefetchPolicy p = prefetch_policy_for(CpuVendor::amd, true);
  EXPECT_EQ(row_streams(p, true, 1), 2);
  EXPECT_EQ(row_streams(p, true, 2), 1);
  EXPECT_EQ(row_streams(p, true, 16), 1);
  EXPECT_EQ(row_streams(p, false, 1), 1);
  p.k_call_streams = 16;
  EXPECT_EQ(row_streams(p, true, 1), kMaxRowStreams);
  EXPECT_EQ(row_streams(p, true, 4), 4);
  p.k_call_streams = 0;
  p.streams = 3;
  EXPECT_EQ(row_streams(p, true, 1), 3);
}

// The largest codes against |x| = 127 everywhere: the integer dot products at
// their extremes (the AVX2 path without VNNI keeps <= 5-bit sums in int16).
TEST(QuantMatmul, ExtremeCodesAndActivationsKeepTheReferenceBits) {
  const int64_t n = 16 * 5, k = 512;
  for (DType dtype : kQuantTypes) {
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * dtype_row_bytes(dtype, k), 0xff);
    const size_t bb = dtype_block_bytes(dtype);
    const uint16_t d = f32_to_f16(0.01f);
    for (size_t off = 0; off < bytes.size(); off += bb) {
      if (dtype == DType::q6_k) {
        std::memcpy(&bytes[off + 208], &d, 2);
      } else {
        std::memcpy(&bytes[off], &d, 2);
        if (dtype == DType::q4_k || dtype == DType::q5_k) std::memcpy(&bytes[off + 2], &d, 2);
      }
    }
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    for (float sign : {1.0f, -1.0f}) {
      const std::vector<float> x(static_cast<size_t>(3 * k), sign);
      for (int64_t m : {1, 3}) {
        const std::vector<float> want = run(Isa::scalar, nullptr, GemmMode::invariant, x.data(), m, pm);
        for (Isa isa : supported_isas()) {
          const std::vector<float> y = run(isa, nullptr, GemmMode::invariant, x.data(), m, pm);
          EXPECT_EQ(0, std::memcmp(y.data(), want.data(), y.size() * 4))
              << dtype_name(dtype) << " " << isa_name(isa) << " M " << m << " x " << sign;
        }
      }
    }
  }
}

TEST(QuantMatmul, SplitkIsDetectedAndStaysClose) {
  const int64_t n = 32, k = 1024, m = 4;
  const std::vector<float> x = random_floats(m * k, 31);
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 13);
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    ThreadPool pool(2);
    for (Isa isa : supported_isas()) {
      const std::vector<float> inv = run(isa, &pool, GemmMode::invariant, x.data(), m, pm);
      const std::vector<float> split = run(isa, &pool, GemmMode::splitk, x.data(), m, pm);
      EXPECT_NE(0, std::memcmp(inv.data(), split.data(), inv.size() * 4)) << dtype_name(dtype);
      for (size_t i = 0; i < inv.size(); ++i) EXPECT_NEAR(split[i], inv[i], 1e-4 * (1 + std::fabs(inv[i])));
    }
  }
}

// The AVX-512 and AVX2 paths without VNNI (vpmaddubsw + vpmaddwd) — what
// CPUs without (AVX-512 / AVX) VNNI run — give the reference's bits too.
TEST(QuantMatmul, SimdWithoutVnniIsBitwiseTheReference) {
  if (!isa_supported(Isa::avx512)) GTEST_SKIP() << "no AVX-512";
  const int64_t n = 72, k = 512;
  for (DType dtype : kQuantTypes) {
    const std::vector<uint8_t> bytes = make_quant_weights(dtype, n, k, 17);
    const PackedMatrix pm = PackedMatrix::pack(bytes.data(), dtype, n, k);
    for (int64_t m : {1, 2, 3, 5}) {
      std::vector<float> x = random_floats(m * k, 40 + m, -3.0f, 3.0f);
      std::vector<quant::ActBlock> xq(m * k / 32);
      for (int64_t r = 0; r < m; ++r)
        quant::quantize_activations(x.data() + r * k, k, xq.data() + r * k / 32);
      quant::QuantMatmulArgs a;
      a.x = xq.data();
      a.m = m;
      a.w = pm.data();
      a.dtype = dtype;
      a.k = k;
      a.block_end = k / 32;
      a.group_end = quant::group_count(n);
      a.ldy = a.n = n;
      std::vector<float> want(m * n), got(m * n);
      a.y = want.data();
      reference::matmul_quant(a);
      for (int streams : {1, 3}) {  // a lone row's streams (ADR 0076 / 0086)
        a.streams = streams;
        a.y = got.data();
        avx512::matmul_quant_no_vnni(a);
        EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
            << dtype_name(dtype) << " M " << m << " streams " << streams;
      }
      std::fill(got.begin(), got.end(), NAN);
      avx2::matmul_quant_no_vnni(a);
      EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4))
          << "avx2 " << dtype_name(dtype) << " M " << m;
    }
  }
}

// A stacked matrix (a fused q/k/v whose parts have different block types,
// as in llama.cpp's Q4_K_M): each output has the bits of its part's matrix
// alone, on every ISA, thread count and M; splitk stays close.
TEST(QuantMatmul, StackedPartsKeepEachPartsBits) {
  const int64_t k = 512, max_m = 9;
  const std::vector<std::pair<DType, int64_t>> spec = {
      {DType::q5_0, 40}, {DType::q5_0, 21}, {DType::q8_0, 37}};
  std::vector<PackedMatrix> parts, alone;
  size_t bytes_sum = 0;
  int64_t n = 0;
  for (size_t i = 0; i < spec.size(); ++i) {
    const std::vector<uint8_t> bytes = make_quant_weights(spec[i].first, spec[i].second, k, 50 + i);
    parts.push_back(PackedMatrix::pack(bytes.data(), spec[i].first, spec[i].second, k));
    alone.push_back(PackedMatrix::pack(bytes.data(), spec[i].first, spec[i].second, k));
    bytes_sum += parts.back().weight_bytes();
    n += spec[i].second;
  }
  const PackedMatrix stacked = PackedMatrix::stack(std::move(parts));
  EXPECT_EQ(stacked.n(), n);
  EXPECT_EQ(stacked.k(), k);
  EXPECT_EQ(stacked.weight_bytes(), bytes_sum);
  ASSERT_EQ(stacked.parts().size(), 3u);
  const std::vector<float> x = random_floats(max_m * k, 61);
  // The bits: each part alone, by the reference, row by row.
  std::vector<float> want(static_cast<size_t>(max_m * n));
  for (int64_t r = 0; r < max_m; ++r) {
    int64_t col = 0;
    for (const PackedMatrix& p : alone) {
      const std::vector<float> y = run(Isa::scalar, nullptr, GemmMode::invariant, x.data() + r * k, 1, p);
      std::memcpy(&want[r * n + col], y.data(), p.n() * 4);
      col += p.n();
    }
  }
  for (Isa isa : supported_isas()) {
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      for (int64_t m : {1, 2, 3, 4, 5, 9}) {
        const std::vector<float> y =
            run(isa, threads > 1 ? &pool : nullptr, GemmMode::invariant, x.data(), m, stacked);
        ASSERT_EQ(0, std::memcmp(y.data(), want.data(), m * n * 4))
            << isa_name(isa) << " threads " << threads << " M " << m;
      }
      const std::vector<float> split = run(isa, &pool, GemmMode::splitk, x.data(), max_m, stacked);
      for (size_t i = 0; i < split.size(); ++i)
        EXPECT_NEAR(split[i], want[i], 1e-4 * (1 + std::fabs(want[i])));
    }
  }
}

}  // namespace
}  // namespace tandem::kernels
