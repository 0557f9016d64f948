// The f32-weight GEMM on the device (ADR 0080: llama.cpp's F32 MoE routers):
// every output is the chain acc = fma(x[k], w[k], acc) from 0 over k in
// order — checked bit for bit against that chain written out on the host
// (std::fma) for M = 1 … 33 (so a row's bits do not depend on the batch), and
// against the CPU's AVX2 / AVX-512 matmul where the host has one. Skipped
// without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda_ops.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

std::vector<float> fma_chains(const std::vector<float>& x, int64_t m, const std::vector<float>& w, int64_t n,
                              int64_t k) {
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t i = 0; i < k; ++i) acc = std::fma(x[r * k + i], w[j * k + i], acc);
      y[r * n + j] = acc;
    }
  }
  return y;
}

TEST(CudaGemmF32w, EveryOutputIsItsFmaChainForEveryM) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // n: a partial block of outputs (40), one output (a shared-expert gate);
  // k: a partial tile (100), a router's hidden size (2048).
  const int64_t shapes[][2] = {{40, 100}, {1, 2048}, {128, 2048}, {72, 96}};
  for (const auto& [n, k] : shapes) {
    const int64_t max_m = 33;
    const std::vector<float> w = random_floats(n * k, 7, -0.5f, 0.5f);
    const std::vector<float> x = random_floats(max_m * k, 8, -2.0f, 2.0f);
    const std::vector<float> want = fma_chains(x, max_m, w, n, k);
    DeviceBuffer dw = testing::to_device(w, *stream), dx = testing::to_device(x, *stream);
    for (int64_t m = 1; m <= max_m; ++m) {
      // A row r of an m-row call: x's rows 0..m-1, y with a wider stride.
      const int64_t ldy = n + 3;
      DeviceBuffer dy = testing::poisoned(static_cast<size_t>(m * ldy) * sizeof(float), *stream);
      ASSERT_TRUE(gemm_f32w(*stream, dx.as<float>(), m, dw.as<float>(), n, k, dy.as<float>(), ldy).ok());
      const auto got = testing::to_host<float>(dy, static_cast<size_t>(m * ldy), *stream);
      for (int64_t r = 0; r < m; ++r)
        ASSERT_TRUE(same_bits(got.data() + r * ldy, want.data() + r * n, static_cast<size_t>(n)))
            << "n " << n << " k " << k << " m " << m << " row " << r;
    }
  }
}

TEST(CudaGemmF32w, EqualsTheCpuVectorKernels) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  if (active_isa() == Isa::scalar)
    GTEST_SKIP() << "the host has no AVX2 (the scalar reference rounds a·b, then adds)";
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t m = 5, n = 64, k = 2048;
  const std::vector<float> w = random_floats(n * k, 11, -0.5f, 0.5f);
  const std::vector<float> x = random_floats(m * k, 12, -2.0f, 2.0f);
  const PackedMatrix packed = PackedMatrix::pack(w.data(), DType::f32, n, k);
  std::vector<float> cpu(static_cast<size_t>(m * n));
  matmul(Ctx{}, x.data(), m, packed, cpu.data());
  DeviceBuffer dw = testing::to_device(w, *stream), dx = testing::to_device(x, *stream);
  DeviceBuffer dy = testing::poisoned(cpu.size() * sizeof(float), *stream);
  ASSERT_TRUE(gemm_f32w(*stream, dx.as<float>(), m, dw.as<float>(), n, k, dy.as<float>(), n).ok());
  const auto got = testing::to_host<float>(dy, cpu.size(), *stream);
  EXPECT_TRUE(same_bits(got.data(), cpu.data(), cpu.size())) << isa_name(active_isa());
}

TEST(CudaGemmF32w, RefusesABadShape) {
  Expected<Stream> stream = Stream::create();
  if (!stream.ok()) GTEST_SKIP() << "skipped: no CUDA device";
  EXPECT_FALSE(gemm_f32w(*stream, nullptr, 1, nullptr, 0, 16, nullptr, 0).ok());
  EXPECT_FALSE(gemm_f32w(*stream, nullptr, 1, nullptr, 4, 16, nullptr, 2).ok());
  EXPECT_TRUE(gemm_f32w(*stream, nullptr, 0, nullptr, 4, 16, nullptr, 4).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
