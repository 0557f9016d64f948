// The quantized GEMM on the device (ADR 0077): the activation blocks are the
// CPU's byte for byte, and every output of every quantized type equals the
// CPU scalar reference bit for bit (memcmp) for M = 1 … 100 — the rows the
// GEMM quantizes itself (M <= quant_fused_max_rows()) and those it reads as
// blocks alike, in every lone-row kernel (ADR 0078; scripts/gpu-test.sh
// reruns these tests under TANDEM_CUDA_QUANT_FUSED_ROWS and
// TANDEM_CUDA_QUANT_STREAM) — so a row's bits do not depend on the batch.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda_ops.h"
#include "kernels/ops.h"
#include "quant/layout.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;
using testing::scalar_ctx;

TEST(CudaQuantActivations, AreTheCpuBlocksByteForByte) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t m = 5, k = 256;
  std::vector<float> x = random_floats(m * k, 3, -3.0f, 3.0f);
  for (int64_t i = 0; i < 32; ++i) x[k + i] = 0.0f;  // a zero block
  x[2 * k + 1] = std::numeric_limits<float>::quiet_NaN();
  x[2 * k + 40] = std::numeric_limits<float>::infinity();
  x[3 * k + 5] = 1e-30f;                                                            // a tiny block scale
  for (int64_t i = 64; i < 96; ++i) x[3 * k + i] = 1e-39f * static_cast<float>(i);  // subnormals
  std::vector<quant::ActBlock> want(static_cast<size_t>(m * k / 32));
  for (int64_t r = 0; r < m; ++r)
    quant::quantize_activations(x.data() + r * k, k, want.data() + r * (k / 32));
  DeviceBuffer dx = testing::to_device(x, *stream);
  DeviceBuffer db = testing::poisoned(quant_act_bytes(m, k), *stream);
  ASSERT_EQ(quant_act_bytes(m, k), want.size() * sizeof(quant::ActBlock));
  ASSERT_TRUE(quantize_act_rows(*stream, dx.as<float>(), m, k, db.data()).ok());
  const auto got = testing::to_host<uint8_t>(db, quant_act_bytes(m, k), *stream);
  ASSERT_EQ(std::memcmp(got.data(), want.data(), got.size()), 0);
}

// n rows of k GGUF blocks of `dtype`: the reference quantizer's where there is
// one, else random codes with sane f16 scales (q5_k).
std::vector<uint8_t> gguf_rows(DType dtype, int64_t n, int64_t k, uint32_t seed) {
  std::vector<uint8_t> rows(static_cast<size_t>(n) * dtype_row_bytes(dtype, k));
  if (dtype != DType::q5_k) {
    const std::vector<float> w = random_floats(n * k, seed, -0.05f, 0.05f);
    quantize(w.data(), dtype, n * k, rows.data());
    return rows;
  }
  std::mt19937 rng(seed);
  for (uint8_t& b : rows) b = static_cast<uint8_t>(rng());
  for (size_t b = 0; b < rows.size(); b += 176) {  // d, dmin: f16 in [2^-10, 2^-9)
    for (int f = 0; f < 2; ++f) {
      const uint16_t h = static_cast<uint16_t>(0x1400 | (rng() & 0x3FF));
      std::memcpy(rows.data() + b + 2 * f, &h, 2);
    }
  }
  return rows;
}

size_t packed_bytes(DType dtype, int64_t n, int64_t k) {
  return static_cast<size_t>(quant::group_count(n) * quant::layout_of(dtype).group_bytes(k));
}

TEST(CudaGemmQuant, EveryTypeEqualsTheCpuReferenceForEveryM) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const DType types[] = {DType::q8_0, DType::q4_0, DType::q5_0, DType::q4_k, DType::q5_k, DType::q6_k};
  // n (40: a padded group), k; 8456: a lone row takes four groups per block
  // (529 groups, the last block one group). k = 2304 and 9472: the streamed
  // kernel's stages of 1,024 (the last one partial), and more stages than its
  // ring holds (9472: ten, the ring eight; 8456 x 2304: three, the ring two).
  // k = 64 and 96 (the 32-element types only): Gemma 4's per-layer gate and
  // model projection at a fixture's size (n = 16, 64).
  const int64_t shapes[][2] = {{40, 512},    {272, 768}, {16, 2304}, {8456, 256}, {24, 9472},
                               {8456, 2304}, {16, 64},   {64, 64},   {40, 96}};
  for (DType dtype : types) {
    for (const auto& nk : shapes) {
      const int64_t n = nk[0], k = nk[1];
      if (k % dtype_block_elems(dtype) != 0) continue;
      const bool wide = n > 1000;
      const PackedMatrix w = PackedMatrix::pack(gguf_rows(dtype, n, k, 11).data(), dtype, n, k);
      DeviceBuffer dw =
          testing::to_device(std::vector<uint8_t>(w.data(), w.data() + packed_bytes(dtype, n, k)), *stream);
      const int64_t max_m = 100;
      const std::vector<float> x = random_floats(max_m * k, 5, -2.0f, 2.0f);
      DeviceBuffer dx = testing::to_device(x, *stream);
      DeviceBuffer db = testing::poisoned(quant_act_bytes(max_m, k), *stream);
      ASSERT_TRUE(quantize_act_rows(*stream, dx.as<float>(), max_m, k, db.data()).ok());
      for (int64_t m : {1, 2, 3, 7, 8, 9, 17, 33, 100}) {
        if (wide && m != 1 && m != 3 && m != 17) continue;
        std::vector<float> want(static_cast<size_t>(m * n));
        matmul(scalar_ctx(), x.data(), m, w, want.data());
        DeviceBuffer dy = testing::poisoned(m * n * sizeof(float), *stream);
        const Status st = gemm_quant(*stream, dx.as<float>(), db.data(), m, dw.as<uint8_t>(), dtype, n, k,
                                     dy.as<float>(), n);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const auto got = testing::to_host<float>(dy, m * n, *stream);
        ASSERT_TRUE(same_bits(got.data(), want.data(), want.size()))
            << dtype_name(dtype) << " n=" << n << " k=" << k << " m=" << m << ": first " << got[0] << " vs "
            << want[0];
      }
    }
  }
}

TEST(CudaGemmQuant, WritesOnlyItsColumnsOfAWiderOutput) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t n = 24, k = 256, m = 3, ldy = 40;
  const PackedMatrix w = PackedMatrix::pack(gguf_rows(DType::q4_k, n, k, 2).data(), DType::q4_k, n, k);
  DeviceBuffer dw =
      testing::to_device(std::vector<uint8_t>(w.data(), w.data() + packed_bytes(DType::q4_k, n, k)), *stream);
  const std::vector<float> x = random_floats(m * k, 9);
  std::vector<float> want(static_cast<size_t>(m * n));
  matmul(scalar_ctx(), x.data(), m, w, want.data());
  DeviceBuffer dx = testing::to_device(x, *stream);
  DeviceBuffer db = testing::poisoned(quant_act_bytes(m, k), *stream);
  DeviceBuffer dy = testing::poisoned(m * ldy * sizeof(float), *stream);
  ASSERT_TRUE(quantize_act_rows(*stream, dx.as<float>(), m, k, db.data()).ok());
  // Columns [8, 8 + n) of each 40-wide row, as a stacked matrix's part.
  ASSERT_TRUE(gemm_quant(*stream, dx.as<float>(), db.data(), m, dw.as<uint8_t>(), DType::q4_k, n, k,
                         dy.as<float>() + 8, ldy)
                  .ok());
  const auto got = testing::to_host<float>(dy, m * ldy, *stream);
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t c = 0; c < ldy; ++c) {
      const bool mine = c >= 8 && c < 8 + n;
      if (mine) {
        ASSERT_TRUE(same_bits(&got[r * ldy + c], &want[r * n + c - 8], 1)) << r << "," << c;
      } else {
        ASSERT_TRUE(std::isnan(got[r * ldy + c])) << "column " << c << " of row " << r << " was written";
      }
    }
  }
}

TEST(CudaGemmQuant, RejectsBadShapesAndTypes) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  EXPECT_FALSE(
      gemm_quant(*stream, nullptr, nullptr, 1, nullptr, DType::q4_k, 16, 288, nullptr, 16).ok());  // k % 256
  EXPECT_FALSE(gemm_quant(*stream, nullptr, nullptr, 1, nullptr, DType::bf16, 16, 256, nullptr, 16).ok());
  EXPECT_FALSE(
      gemm_quant(*stream, nullptr, nullptr, 1, nullptr, DType::q8_0, 16, 64, nullptr, 8).ok());  // ldy < n
  EXPECT_FALSE(
      gemm_quant(*stream, nullptr, nullptr, 1, nullptr, DType::q8_0, 16, 64, nullptr, 16).ok());  // no x
  EXPECT_FALSE(quantize_act_rows(*stream, nullptr, 1, 48, nullptr).ok());
  EXPECT_FALSE(gemm_quant_supports(DType::f32));
  EXPECT_TRUE(gemm_quant_supports(DType::q6_k));
}

}  // namespace
}  // namespace tandem::kernels::gpu
