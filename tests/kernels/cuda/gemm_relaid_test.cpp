// The relaid weight layout and the TMA wgmma tile over it (ADR 0057):
// the device relayout equals the layout's definition (each 32-k chunk: k16
// step 0's k {8q .. 8q+3 : q = 0..3}, then step 1's {8q+4 .. 8q+7}, zero past
// k), and every configuration of gemm_bf16w_relaid(_sliced) gives, on relaid
// weights, the bits of the large tile's variant 5 on the natural weights
// (memcmp), M = 1..64 and 600, plain and K-sliced, N not a multiple of the
// tile, a partial last k tile (also in the last slice). Skipped without a
// CUDA device; the GEMM part also without wgmma (an sm_90a build, Hopper).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/gemm_tuning.h"
#include "cuda/gemm_wgmma.h"
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

class GemmRelaid : public ::testing::TestWithParam<DType> {};

TEST_P(GemmRelaid, EveryConfigGivesVariant5Bits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  if (!wgmma_available()) GTEST_SKIP() << "no wgmma (sm_90a build and a Hopper device)";
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const DType xt = GetParam();
  const int64_t n = 328, k = 1288, max_m = 600;  // n: no tile multiple; k: partial last k tile
  const std::vector<uint16_t> w = testing::to_bf16(random_floats(n * k, 41));
  std::vector<uint16_t> wr(static_cast<size_t>(n * relaid_row_pitch(k)));
  relay_weights_bf16_host(w.data(), n, k, wr.data());
  const DeviceBuffer dw = testing::to_device(w, *stream), dwr = testing::to_device(wr, *stream);
  const std::vector<float> xf = random_floats(max_m * k, 42);
  const DeviceBuffer dx =
      xt == DType::bf16 ? testing::to_device(testing::to_bf16(xf), *stream) : testing::to_device(xf, *stream);
  const GemmSlicing plan = gemm_slicing(n, k);
  ASSERT_GT(plan.slices, 1);  // the sliced pass really slices
  const size_t ws_floats = static_cast<size_t>(plan.slices * max_m * n);
  DeviceBuffer ws = testing::poisoned(ws_floats * 4, *stream);
  std::vector<int64_t> ms;
  for (int64_t m = 1; m <= 64; ++m) ms.push_back(m);
  ms.push_back(max_m);
  set_large_tile_variant(5);
  for (const bool sliced : {false, true})
    for (const int64_t m : ms) {
      DeviceBuffer ref = testing::poisoned(static_cast<size_t>(m * n) * 4, *stream);
      const Status sr = sliced
                            ? gemm_bf16w_sliced(*stream, dx.data(), xt, m, dw.as<uint16_t>(), n, k,
                                                ref.as<float>(), ws.as<float>(), ws_floats, GemmTile::large)
                            : gemm_bf16w(*stream, dx.data(), xt, m, dw.as<uint16_t>(), n, k, ref.as<float>(),
                                         GemmTile::large);
      ASSERT_TRUE(sr.ok()) << sr.to_string();
      const std::vector<float> want = testing::to_host<float>(ref, static_cast<size_t>(m * n), *stream);
      for (int config = 0; config < 3; ++config) {
        DeviceBuffer y = testing::poisoned(static_cast<size_t>(m * n) * 4, *stream);
        const Status st = sliced
                              ? gemm_bf16w_relaid_sliced(*stream, dx.data(), xt, m, dwr.as<uint16_t>(), n, k,
                                                         y.as<float>(), ws.as<float>(), ws_floats, config)
                              : gemm_bf16w_relaid(*stream, dx.data(), xt, m, dwr.as<uint16_t>(), n, k,
                                                  y.as<float>(), config);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const std::vector<float> got = testing::to_host<float>(y, static_cast<size_t>(m * n), *stream);
        ASSERT_TRUE(same_bits(got.data(), want.data(), want.size()))
            << "config " << config << " m=" << m << (sliced ? " (sliced)" : "");
      }
    }
  set_large_tile_variant(-1);
}

INSTANTIATE_TEST_SUITE_P(Activations, GemmRelaid, ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem::kernels::gpu
