// f16 / f32 weights on the device (ADR 0083): stored as bf16 terms
// (kernels/bf16_terms.h) and multiplied by the one invariant GEMM over
// k' = bf16_terms_k(k, terms) against x repeated (repeat_cols; each copy
// zero-padded to a multiple of 8). Checked: repeat_cols's copies and padding;
// the product within f32 accumulation of the exact product with the
// unrounded weights (bf16 and f32 activations); a row's bits alone == in every
// batch M = 1..24. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "dtype_convert.h"
#include "kernels/bf16_terms.h"
#include "kernels/cuda_ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

TEST(CudaRepeatCols, EveryRowRepeatedInOrder) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t rows = 5, k = 1001, pitch = 1008;
  const std::vector<float> x = random_floats(rows * k, 3);
  DeviceBuffer dx = testing::to_device(x, *stream);
  for (int copies : {1, 2, 3}) {
    const size_t count = static_cast<size_t>(rows * pitch * copies);
    DeviceBuffer out = testing::poisoned(count * sizeof(float), *stream);
    ASSERT_TRUE(repeat_cols(*stream, dx.as<float>(), rows, k, copies, pitch, out.as<float>()).ok());
    const auto got = testing::to_host<float>(out, count, *stream);
    for (int64_t r = 0; r < rows; ++r) {
      for (int c = 0; c < copies; ++c) {
        const float* copy = got.data() + (r * copies + c) * pitch;
        ASSERT_TRUE(same_bits(copy, x.data() + r * k, static_cast<size_t>(k)))
            << "row " << r << " copy " << c;
        for (int64_t i = k; i < pitch; ++i)
          ASSERT_EQ(copy[i], 0.0f) << "row " << r << " copy " << c << " pad " << i;
      }
    }
  }
  EXPECT_FALSE(repeat_cols(*stream, dx.as<float>(), rows, k, 0, pitch, dx.as<float>()).ok());
  EXPECT_FALSE(repeat_cols(*stream, dx.as<float>(), rows, k, 2, k - 1, dx.as<float>()).ok());
}

struct SplitCase {
  DType weights;  // f16 or f32 (or bf16: one term, padded where k % 8 != 0)
  DType x;        // the GEMM input: bf16-rounded or f32 (hi + lo)
};

class CudaSplitGemm : public ::testing::TestWithParam<SplitCase> {};

TEST_P(CudaSplitGemm, WithinAccumulationOfTheExactProductAndBatchInvariant) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const SplitCase c = GetParam();
  const int terms = bf16_terms(c.weights);
  for (const int64_t k : {int64_t{1540}, int64_t{4}}) {  // k % 8 != 0: padded term blocks
    const int64_t n = 200, max_m = 24, kk = bf16_terms_k(k, terms), pitch = bf16_terms_k(k, 1);
    // Weights exactly of the dtype, with bits below bf16's precision.
    std::vector<float> w = random_floats(n * k, 11, -0.1f, 0.1f);
    if (c.weights == DType::f16)
      for (float& v : w) v = f16_to_f32(f32_to_f16(v));
    if (c.weights == DType::bf16)
      for (float& v : w) v = bf16_to_f32(f32_to_bf16(v));
    std::vector<uint16_t> split(static_cast<size_t>(n * kk));
    split_bf16_terms(w.data(), n, k, terms, split.data());
    DeviceBuffer dw = testing::to_device_weights(split, n, kk, *stream);
    const std::vector<float> x = random_floats(max_m * k, 12, -2.0f, 2.0f);
    DeviceBuffer dx = testing::to_device(x, *stream);
    DeviceBuffer rep = testing::poisoned(static_cast<size_t>(max_m * kk) * sizeof(float), *stream);
    DeviceBuffer rep_bf16 = testing::poisoned(static_cast<size_t>(max_m * kk) * sizeof(uint16_t), *stream);
    const GemmSlicing plan = gemm_slicing(n, kk);
    const size_t ws_floats = static_cast<size_t>(plan.slices * max_m * n);
    DeviceBuffer ws = testing::poisoned(ws_floats * sizeof(float), *stream);
    auto run = [&](int64_t row0, int64_t m) {
      DeviceBuffer y = testing::poisoned(static_cast<size_t>(m * n) * sizeof(float), *stream);
      EXPECT_TRUE(repeat_cols(*stream, dx.as<float>() + row0 * k, m, k, terms, pitch, rep.as<float>()).ok());
      const void* input = rep.data();
      if (c.x == DType::bf16) {
        EXPECT_TRUE(to_bf16(*stream, rep.as<float>(), rep_bf16.as<uint16_t>(), m * kk).ok());
        input = rep_bf16.data();
      }
      const Status st = gemm_bf16w_sliced(*stream, input, c.x, m, dw.as<uint16_t>(), n, kk, y.as<float>(),
                                          ws.as<float>(), ws_floats);
      EXPECT_TRUE(st.ok()) << st.to_string();
      return testing::to_host<float>(y, static_cast<size_t>(m * n), *stream);
    };
    const std::vector<float> all = run(0, max_m);
    // Against the exact product (double) of the GEMM's input and the unrounded weights:
    // any order of kk f32 additions, rounded or truncated (gemm_test.cpp's bound), and
    // the f32 input's hi + lo split (2^-18).
    for (int64_t r = 0; r < max_m; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double exact = 0, magnitude = 0;
        for (int64_t i = 0; i < k; ++i) {
          const float xi = c.x == DType::bf16 ? bf16_to_f32(f32_to_bf16(x[r * k + i])) : x[r * k + i];
          exact += static_cast<double>(xi) * w[j * k + i];
          magnitude += std::fabs(static_cast<double>(xi) * w[j * k + i]);
        }
        const double bound = magnitude * (kk * 0x1p-23 + (c.x == DType::f32 ? 0x1p-18 : 0.0)) + 1e-30;
        ASSERT_LE(std::fabs(all[r * n + j] - exact), bound) << "k " << k << " row " << r << " output " << j;
      }
    }
    // A row's bits do not depend on its batch.
    for (int64_t m = 1; m <= max_m; ++m) {
      const std::vector<float> y = run(0, m);
      ASSERT_TRUE(same_bits(y.data(), all.data(), static_cast<size_t>(m * n))) << "k " << k << " m " << m;
    }
    for (int64_t r = 0; r < max_m; r += 5)
      ASSERT_TRUE(same_bits(run(r, 1).data(), all.data() + r * n, static_cast<size_t>(n)))
          << "k " << k << " row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Dtypes, CudaSplitGemm,
    ::testing::Values(SplitCase{DType::f16, DType::bf16}, SplitCase{DType::f16, DType::f32},
                      SplitCase{DType::f32, DType::bf16}, SplitCase{DType::f32, DType::f32},
                      SplitCase{DType::bf16, DType::bf16}),
    [](const auto& info) {
      return std::string(dtype_name(info.param.weights)) + "_weights_" + dtype_name(info.param.x) + "_x";
    });

}  // namespace
}  // namespace tandem::kernels::gpu
