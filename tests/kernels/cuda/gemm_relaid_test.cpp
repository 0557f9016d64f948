// The relaid weight layout (ADR 0057): the device relayout equals the
// layout's definition (each 32-k chunk: k16 step 0's k {8q .. 8q+3 : q =
// 0..3}, then step 1's {8q+4 .. 8q+7}, zero past k), and to_bf16_relaid
// relays activations the same way (the cuBLAS option). The GEMM over relaid
// weights: gemm_large_test.cpp (every variant, 15-17 the TMA tile) and
// gemm_test.cpp. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

TEST(RelayWeights, DeviceRelayoutIsTheStepOrder) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const int64_t k : {int64_t{8}, int64_t{32}, int64_t{40}, int64_t{1288}}) {
    const int64_t n = 37, pitch = relaid_row_pitch(k);
    ASSERT_EQ(pitch % 32, 0);
    ASSERT_TRUE(pitch >= k && pitch < k + 32);
    const std::vector<uint16_t> w = testing::to_bf16(random_floats(n * k, 7));
    std::vector<uint16_t> want(static_cast<size_t>(n * pitch), 0xFFFF);
    for (int64_t row = 0; row < n; ++row)
      for (int64_t chunk = 0; chunk < pitch / 32; ++chunk)
        for (int t = 0; t < 2; ++t)
          for (int q = 0; q < 4; ++q)
            for (int r = 0; r < 4; ++r) {
              const int64_t kk = chunk * 32 + 8 * q + 4 * t + r;
              want[row * pitch + chunk * 32 + 16 * t + 4 * q + r] = kk < k ? w[row * k + kk] : uint16_t{0};
            }
    std::vector<uint16_t> host(static_cast<size_t>(n * pitch), 0xFFFF);
    relay_weights_bf16_host(w.data(), n, k, host.data());
    ASSERT_EQ(host, want) << "host relayout, k=" << k;
    const DeviceBuffer dw = testing::to_device(w, *stream);
    DeviceBuffer out = testing::poisoned(static_cast<size_t>(n * pitch) * 2, *stream);
    const Status st = relay_weights_bf16(*stream, dw.as<uint16_t>(), n, k, out.as<uint16_t>());
    ASSERT_TRUE(st.ok()) << st.to_string();
    ASSERT_EQ(testing::to_host<uint16_t>(out, static_cast<size_t>(n * pitch), *stream), want)
        << "device relayout, k=" << k;
  }
}

TEST(RelayWeights, ActivationsRelaidLikeTheWeights) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t m = 5, k = 1288, pitch = relaid_row_pitch(k);
  const std::vector<float> x = random_floats(m * k, 9);
  std::vector<uint16_t> want(static_cast<size_t>(m * pitch));
  relay_weights_bf16_host(testing::to_bf16(x).data(), m, k, want.data());
  const DeviceBuffer dx = testing::to_device(x, *stream);
  DeviceBuffer out = testing::poisoned(static_cast<size_t>(m * pitch) * 2, *stream);
  const Status st = to_bf16_relaid(*stream, dx.as<float>(), m, k, out.as<uint16_t>());
  ASSERT_TRUE(st.ok()) << st.to_string();
  ASSERT_EQ(testing::to_host<uint16_t>(out, static_cast<size_t>(m * pitch), *stream), want);
}

}  // namespace
}  // namespace tandem::kernels::gpu
