// Matmul: packing, variants against the reference, bitwise batch invariance,
// and proof that the invariance test can fail (splitk).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>

#include "kernel_table.h"
#include "kernels/unpack.h"
#include "test_util.h"

namespace tandem::kernels {
namespace {

using testing::make_weights;
using testing::random_floats;
using testing::same_bits;

const DType kDtypes[] = {DType::f32, DType::bf16, DType::f16};

TEST(Matmul, Bf16SlotsInterleaveHalvesOf32ColumnGroups) {
  EXPECT_EQ(packed_slot(DType::bf16, 0), 0);
  EXPECT_EQ(packed_slot(DType::bf16, 16), 1);
  EXPECT_EQ(packed_slot(DType::bf16, 1), 2);
  EXPECT_EQ(packed_slot(DType::bf16, 31), 31);
  EXPECT_EQ(packed_slot(DType::bf16, 32), 32);
  EXPECT_EQ(packed_slot(DType::bf16, 48), 33);
  EXPECT_EQ(packed_slot(DType::f16, 16), 16);
}

// Safetensors data need not be aligned to the element size.
TEST(Matmul, PackAndConvertAcceptUnalignedSources) {
  const int64_t n = 70, k = 5;
  const auto w = random_floats(n * k, 3);
  std::vector<uint8_t> shifted(n * k * 4 + 2);
  std::memcpy(shifted.data() + 2, w.data(), n * k * 4);
  PackedMatrix a = PackedMatrix::pack(w.data(), DType::f32, n, k);
  PackedMatrix b = PackedMatrix::pack(shifted.data() + 2, DType::f32, n, k);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), panel_count(n) * kPanel * k * 4), 0);
  for (Isa isa : testing::supported_isas()) {
    std::vector<float> out(k);
    const int32_t id = 3;
    embedding(Ctx{nullptr, isa}, shifted.data() + 2, DType::f32, k, &id, 1, out.data());
    EXPECT_TRUE(same_bits(out.data(), &w[3 * k], k)) << isa_name(isa);
  }
}

// unpack() is the exact inverse of pack() (the CUDA backend uploads unpacked
// rows): every dtype, a partial panel and a partial bf16 32-column group.
TEST(Matmul, UnpackRestoresTheRowMajorBytes) {
  const int64_t n = 100, k = 37;
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const size_t bytes = static_cast<size_t>(n * k) * dtype_size(dtype);
    std::vector<uint8_t> src(bytes);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + 7);
    const PackedMatrix packed = PackedMatrix::pack(src.data(), dtype, n, k);
    std::vector<uint8_t> back(bytes, 0xAB);
    packed.unpack(back.data());
    EXPECT_EQ(std::memcmp(src.data(), back.data(), bytes), 0) << dtype_name(dtype);
  }
}

// release_data() (ADR 0067: a model placed on a device) frees the weights and
// keeps what the shape-only callers read; a stacked matrix frees its parts.
// data_bytes() is what a device copy takes (ADR 0077), 0 once released.
TEST(Matmul, ReleasedMatrixKeepsItsShapeAndFreesItsWeights) {
  const int64_t n = 4096, k = 520;  // 4 MiB of bf16: a buffer of its own mapping
  std::vector<uint16_t> src(static_cast<size_t>(n * k), 0x3F80);
  PackedMatrix packed = PackedMatrix::pack(src.data(), DType::bf16, n, k);
  const size_t bytes = packed.weight_bytes();
  ASSERT_NE(packed.data(), nullptr);
  EXPECT_FALSE(packed.released());
  EXPECT_GE(packed.data_bytes(), bytes);
  packed.release_data();
  EXPECT_TRUE(packed.released());
  EXPECT_EQ(packed.data(), nullptr);
  EXPECT_EQ(packed.data_bytes(), size_t{0});
  EXPECT_EQ(packed.n(), n);
  EXPECT_EQ(packed.k(), k);
  EXPECT_EQ(packed.dtype(), DType::bf16);
  EXPECT_EQ(packed.weight_bytes(), bytes);

  std::vector<uint8_t> q(static_cast<size_t>(dtype_row_bytes(DType::q8_0, 64)) * 8, 0);
  std::vector<PackedMatrix> parts;
  parts.push_back(PackedMatrix::pack(q.data(), DType::q8_0, 8, 64));
  parts.push_back(PackedMatrix::pack(q.data(), DType::q8_0, 8, 64));
  // A quantized part's bytes at data() are whole 16-output groups (what a device copy takes, ADR 0077):
  // 8 rows pad to one group of 16 outputs: two 32-element blocks, each a 32-byte header and a 512-byte tile.
  EXPECT_EQ(parts[0].data_bytes(), size_t{2} * (32 + 512));
  PackedMatrix stacked = PackedMatrix::stack(std::move(parts));
  EXPECT_EQ(stacked.data_bytes(), size_t{0});  // the parts hold the bytes
  stacked.release_data();
  EXPECT_EQ(stacked.n(), 16);
  for (const PackedMatrix& p : stacked.parts()) EXPECT_TRUE(p.released() && p.data() == nullptr);
}

// unpack_rows() (kernels/unpack.h) gives unpack()'s bytes for any row range: ranges inside one
// panel, across panels and partial groups, the tail, empty; k spans several
// of its 64-element blocks.
TEST(Matmul, UnpackRowsGivesTheRangeOfUnpack) {
  const int64_t n = 200, k = 136;
  const int64_t ranges[][2] = {{0, 200}, {5, 65}, {64, 64}, {63, 2}, {130, 70}, {199, 1}, {17, 0}};
  for (DType dtype : {DType::f32, DType::f16, DType::bf16}) {
    const size_t esize = dtype_size(dtype), bytes = static_cast<size_t>(n * k) * esize;
    std::vector<uint8_t> src(bytes);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<uint8_t>(i * 131 + i / 251 + 7);
    const PackedMatrix packed = PackedMatrix::pack(src.data(), dtype, n, k);
    for (const auto& r : ranges) {
      const size_t row_bytes = static_cast<size_t>(k) * esize, part = static_cast<size_t>(r[1]) * row_bytes;
      std::vector<uint8_t> back(part + 1, 0xAB);
      unpack_rows(packed, r[0], r[1], back.data());
      EXPECT_EQ(std::memcmp(src.data() + r[0] * row_bytes, back.data(), part), 0)
          << dtype_name(dtype) << " rows " << r[0] << " +" << r[1];
      EXPECT_EQ(back[part], 0xAB) << "wrote past the range";
    }
  }
}

// A matrix of 16 MiB or more is packed by several threads (panels split
// among them): every element still sits where the layout says, and unpack
// gives the source back (n not a multiple of the panel).
TEST(Matmul, LargePackIsThreadedWithTheSameLayout) {
  const int64_t n = 2050, k = 4096;
  std::vector<uint16_t> src(static_cast<size_t>(n * k));
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(i * 40503u + (i >> 13));
  const PackedMatrix packed = PackedMatrix::pack(src.data(), DType::bf16, n, k);
  const auto* data = reinterpret_cast<const uint16_t*>(packed.data());
  int64_t misplaced = 0;
  for (int64_t col = 0; col < n; col += 7) {
    const int64_t p = col / kPanel, j = col % kPanel;
    for (int64_t kk = 0; kk < k; kk += 13)
      misplaced += data[(p * k + kk) * kPanel + packed_slot(DType::bf16, j)] != src[col * k + kk];
  }
  EXPECT_EQ(misplaced, 0);
  std::vector<uint16_t> back(src.size());
  packed.unpack(back.data());
  EXPECT_EQ(std::memcmp(src.data(), back.data(), src.size() * sizeof(uint16_t)), 0);
}

TEST(Matmul, PackLayoutIsKMajorPanels) {
  const int64_t n = 70, k = 3;
  std::vector<float> w(n * k);
  for (int64_t i = 0; i < n * k; ++i) w[i] = static_cast<float>(i);
  PackedMatrix p = PackedMatrix::pack(w.data(), DType::f32, n, k);
  EXPECT_EQ(p.n(), n);
  EXPECT_EQ(p.k(), k);
  EXPECT_EQ(p.weight_bytes(), static_cast<size_t>(n * k * 4));
  const auto* d = reinterpret_cast<const float*>(p.data());
  for (int64_t col = 0; col < panel_count(n) * kPanel; ++col) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float want = col < n ? w[col * k + kk] : 0.0f;
      EXPECT_EQ(d[((col / kPanel) * k + kk) * kPanel + col % kPanel], want) << col << "," << kk;
    }
  }
}

// Tolerance: any summation order of K products has |error| <= gamma_K * sum|x||w|
// (gamma_K = K u / (1 - K u), u = 2^-24; products of f32 x and exactly widened
// weights are exact inside an FMA and round once outside one, hence K + 1).
// Two variants each within that of the exact value are within twice it of
// each other. Weight precision does not enter: bf16/f16 widen exactly.
double dot_tolerance(const float* x, const float* wrow_values, int64_t k) {
  double abs_sum = 0.0;
  for (int64_t i = 0; i < k; ++i) abs_sum += std::fabs(static_cast<double>(x[i]) * wrow_values[i]);
  const double g = (k + 1) * testing::kU / (1.0 - (k + 1) * testing::kU);
  return 2.0 * g * abs_sum + 1e-30;
}

void check_against_reference(Isa isa, DType dtype, int64_t m, int64_t n, int64_t k, GemmMode mode,
                             int threads) {
  const auto wts = make_weights(dtype, n * k, static_cast<uint32_t>(n * 131 + k));
  const auto x = random_floats(m * k, static_cast<uint32_t>(m * 7 + k));
  PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, n, k);
  ThreadPool pool(threads);
  Ctx ref_ctx{&pool, Isa::scalar, GemmMode::invariant};
  Ctx ctx{&pool, isa, mode};
  std::vector<float> want(m * n), got(m * n, -1.0f);
  matmul(ref_ctx, x.data(), m, w, want.data());
  matmul(ctx, x.data(), m, w, got.data());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < n; ++c) {
      const double tol = dot_tolerance(&x[r * k], &wts.values[c * k], k);
      ASSERT_NEAR(got[r * n + c], want[r * n + c], tol)
          << isa_name(isa) << " " << dtype_name(dtype) << " m=" << m << " n=" << n << " k=" << k << " r=" << r
          << " c=" << c;
    }
  }
}

TEST(Matmul, ReferenceMatchesDoubleDot) {
  const int64_t m = 3, n = 67, k = 129;
  for (DType dtype : kDtypes) {
    const auto wts = make_weights(dtype, n * k, 5);
    const auto x = random_floats(m * k, 6);
    PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, n, k);
    std::vector<float> y(m * n);
    matmul(Ctx{nullptr, Isa::scalar, GemmMode::invariant}, x.data(), m, w, y.data());
    for (int64_t r = 0; r < m; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        double exact = 0.0;
        for (int64_t i = 0; i < k; ++i) exact += static_cast<double>(x[r * k + i]) * wts.values[c * k + i];
        ASSERT_NEAR(y[r * n + c], exact, dot_tolerance(&x[r * k], &wts.values[c * k], k) / 2);
      }
    }
  }
}

TEST(Matmul, VariantsMatchReference) {
  const int64_t shapes[][3] = {{1, 1, 1},    {1, 64, 7},    {3, 65, 160},
                               {5, 200, 33}, {8, 128, 300}, {13, 63, 64}};
  for (Isa isa : testing::supported_isas()) {
    for (DType dtype : kDtypes) {
      for (const auto& s : shapes)
        check_against_reference(isa, dtype, s[0], s[1], s[2], GemmMode::invariant, 2);
    }
  }
}

TEST(Matmul, SplitkMatchesReferenceWithinTolerance) {
  for (Isa isa : testing::supported_isas()) {
    check_against_reference(isa, DType::bf16, 6, 150, 400, GemmMode::splitk, 1);
    check_against_reference(isa, DType::f32, 9, 70, 700, GemmMode::splitk, 3);
  }
}

// Runs each of `rows` rows alone, then every M in [1, rows] as one call, and
// counts the rows whose bits differ from the row alone. Also returns the
// single-row results so callers can compare across thread counts.
int64_t count_batch_differences(const Ctx& ctx, const PackedMatrix& w, const std::vector<float>& x,
                                int64_t rows, std::vector<float>* singles) {
  const int64_t n = w.n(), k = w.k();
  singles->assign(rows * n, 0.0f);
  for (int64_t r = 0; r < rows; ++r) matmul(ctx, &x[r * k], 1, w, &(*singles)[r * n]);
  std::vector<float> y(rows * n);
  int64_t differences = 0;
  for (int64_t m = 1; m <= rows; ++m) {
    matmul(ctx, x.data(), m, w, y.data());
    for (int64_t r = 0; r < m; ++r) differences += same_bits(&y[r * n], &(*singles)[r * n], n) ? 0 : 1;
  }
  return differences;
}

constexpr int64_t kRows = 33;
constexpr int64_t kInvN = 150;  // two full panels and a partial one
constexpr int64_t kInvK = 160;  // long enough for splitk to split

// Every dtype on `isa`, kInvN x k weights (seed w_seed): each of the kRows rows of x
// alone equals itself in the batch, on 1, 2 and 3 threads, and the rows computed alone have the
// same bits on every thread count.
void check_rows_invariant(Isa isa, int64_t k, const std::vector<float>& x, uint32_t w_seed) {
  for (DType dtype : kDtypes) {
    const auto wts = make_weights(dtype, kInvN * k, w_seed);
    PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, kInvN, k);
    std::vector<float> first_singles;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> singles;
      const int64_t diffs =
          count_batch_differences(Ctx{&pool, isa, GemmMode::invariant}, w, x, kRows, &singles);
      EXPECT_EQ(diffs, 0) << isa_name(isa) << " " << dtype_name(dtype) << " threads=" << threads;
      if (first_singles.empty()) {
        first_singles = singles;
      } else {
        EXPECT_TRUE(same_bits(singles.data(), first_singles.data(), singles.size()))
            << isa_name(isa) << " " << dtype_name(dtype) << " differs between 1 and " << threads
            << " threads";
      }
    }
  }
}

TEST(MatmulInvariance, RowAloneEqualsRowInBatchForEveryIsaDtypeAndThreadCount) {
  const auto x = random_floats(kRows * kInvK, 11);
  for (Isa isa : testing::supported_isas()) {
    check_rows_invariant(isa, kInvK, x, 12);
  }
}

// A wide N puts several full panels in each thread's range, so a lone row
// (M = 1) takes the multi-stream path (2-4 panels at once; on AVX2 in turns
// of two k steps, accumulators parked in between) while
// batched rows and the leftover/partial panels take the one-panel blocks:
// a row must still have the same bits alone, in any batch, on any thread
// count, and the two SIMD variants must agree bitwise. Shapes: 12 full panels
// and a partial one; 6 full panels (1/2/3 threads: groups of 4+2, 3, 2) —
// together every group size and the one-panel leftovers.
void check_wide_row(int64_t n) {
  const int64_t rows = 9, k = 97;
  const auto x = random_floats(rows * k, 31);
  for (DType dtype : kDtypes) {
    const auto wts = make_weights(dtype, n * k, 32);
    PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, n, k);
    std::vector<std::vector<float>> per_isa;
    for (Isa isa : testing::supported_isas()) {
      std::vector<float> first_singles;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        std::vector<float> singles;
        const int64_t diffs =
            count_batch_differences(Ctx{&pool, isa, GemmMode::invariant}, w, x, rows, &singles);
        EXPECT_EQ(diffs, 0) << isa_name(isa) << " " << dtype_name(dtype) << " n=" << n
                            << " threads=" << threads;
        if (first_singles.empty()) {
          first_singles = singles;
        } else {
          EXPECT_TRUE(same_bits(singles.data(), first_singles.data(), singles.size()))
              << isa_name(isa) << " " << dtype_name(dtype) << " n=" << n << " differs between 1 and "
              << threads << " threads";
        }
      }
      if (isa != Isa::scalar) per_isa.push_back(first_singles);
    }
    for (size_t i = 1; i < per_isa.size(); ++i) {
      EXPECT_TRUE(same_bits(per_isa[i].data(), per_isa[0].data(), per_isa[0].size()))
          << dtype_name(dtype) << " n=" << n;
    }
  }
  for (Isa isa : testing::supported_isas())
    check_against_reference(isa, DType::bf16, 1, n, k, GemmMode::invariant, 2);
}

TEST(MatmulInvariance, WideRowStreamsPathKeepsBits) {
  check_wide_row(12 * kPanel + 37);
  check_wide_row(6 * kPanel);
}

// A long K: the AVX2 M > 1 path takes K in chunks of 128 k steps, every
// chunk after the first resuming from the partial sums stored in y (masked
// on the partial panel). K = 2 * 128 + 37 gives two full chunks and a short
// one; M = 1..33 covers every row-block size (1-6) and its tails. A row must
// keep its bits alone, in any batch and on 1-3 threads.
TEST(MatmulInvariance, LongKInChunksKeepsBits) {
  const int64_t k = 2 * 128 + 37;
  const auto x = random_floats(kRows * k, 41);
  for (Isa isa : testing::supported_isas()) {
    check_rows_invariant(isa, k, x, 42);
    check_against_reference(isa, DType::bf16, 13, kInvN, k, GemmMode::invariant, 2);
  }
}

// The same test with splitk must fail: this proves it can detect a
// shape-dependent reduction order.
TEST(MatmulInvariance, SplitkIsDetected) {
  const auto x = random_floats(kRows * kInvK, 11);
  for (Isa isa : testing::supported_isas()) {
    for (DType dtype : kDtypes) {
      const auto wts = make_weights(dtype, kInvN * kInvK, 12);
      PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, kInvN, kInvK);
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        std::vector<float> singles;
        const int64_t diffs =
            count_batch_differences(Ctx{&pool, isa, GemmMode::splitk}, w, x, kRows, &singles);
        EXPECT_GT(diffs, 0) << isa_name(isa) << " " << dtype_name(dtype) << " threads=" << threads;
      }
    }
  }
}

// Both SIMD kernels run one FMA chain per output in increasing k, so they
// agree bitwise with each other (not required by the contract, but a cheap
// cross-check of the two register blockings).
TEST(MatmulInvariance, SimdVariantsAgreeBitwise) {
  const auto isas = testing::simd_isas();
  if (isas.size() < 2) GTEST_SKIP() << "needs AVX2 and AVX-512";
  const int64_t m = 11, n = 200, k = 301;
  const auto x = random_floats(m * k, 21);
  for (DType dtype : kDtypes) {
    const auto wts = make_weights(dtype, n * k, 22);
    PackedMatrix w = PackedMatrix::pack(wts.bytes.data(), dtype, n, k);
    std::vector<float> a(m * n), b(m * n);
    matmul(Ctx{nullptr, Isa::avx2, GemmMode::invariant}, x.data(), m, w, a.data());
    matmul(Ctx{nullptr, Isa::avx512, GemmMode::invariant}, x.data(), m, w, b.data());
    EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << dtype_name(dtype);
  }
}

TEST(MatmulInvariance, SplitkPartsDependOnMAndThreads) {
  EXPECT_EQ(splitk_parts(1, 896, 4864, 2), 1);
  EXPECT_GE(splitk_parts(2, 896, 4864, 1), 2);
  EXPECT_GT(splitk_parts(4, 64, 4864, 4), splitk_parts(4, 64, 4864, 1));
  EXPECT_EQ(splitk_parts(4, 896, 100, 2), 1);  // K too short to split
}

}  // namespace
}  // namespace tandem::kernels
