// The large-tile variants of the CUDA GEMM (ADRs 0044, 0053, 0055, 0057,
// TANDEM_CUDA_LARGE_TILE; 5-17 run wgmma where the build and the device have
// sm_90a; 15-17 by TMA over the relaid weights every variant reads):
// each gives the small tile's bits (memcmp) at M = 1..64 and at large M, plain
// and K-sliced, with rows and columns past a block edge and a partial last k
// tile; and a row of a large product equals the row computed alone.
// Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/gemm_tuning.h"
#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

struct Operands {
  int64_t n, k, max_m;
  DType x_dtype;
  DeviceBuffer w, x;
};

Operands make_operands(int64_t n, int64_t k, int64_t max_m, DType x_dtype, uint32_t seed,
                       const Stream& stream) {
  Operands o{n, k, max_m, x_dtype, {}, {}};
  o.w = testing::to_device_weights(testing::to_bf16(random_floats(n * k, seed)), n, k, stream);
  const std::vector<float> x = random_floats(max_m * k, seed + 1);
  o.x = x_dtype == DType::bf16 ? testing::to_device(testing::to_bf16(x), stream)
                               : testing::to_device(x, stream);
  return o;
}

std::vector<float> product(const Operands& o, int64_t row0, int64_t m, GemmTile tile, bool sliced,
                           const Stream& stream) {
  const size_t x_elem = o.x_dtype == DType::bf16 ? 2 : 4;
  const void* x = static_cast<const char*>(o.x.data()) + row0 * o.k * x_elem;
  DeviceBuffer y = testing::poisoned(static_cast<size_t>(m * o.n) * 4, stream);
  Status st;
  if (sliced) {
    const GemmSlicing plan = gemm_slicing(o.n, o.k);
    const size_t floats = static_cast<size_t>(plan.slices * m * o.n);
    DeviceBuffer ws = testing::poisoned(floats * 4, stream);
    st = gemm_bf16w_sliced(stream, x, o.x_dtype, m, o.w.as<uint16_t>(), o.n, o.k, y.as<float>(),
                           ws.as<float>(), floats, tile);
  } else {
    st = gemm_bf16w(stream, x, o.x_dtype, m, o.w.as<uint16_t>(), o.n, o.k, y.as<float>(), tile);
  }
  EXPECT_TRUE(st.ok()) << st.to_string();
  return testing::to_host<float>(y, static_cast<size_t>(m * o.n), stream);
}

class GemmLargeTile : public ::testing::TestWithParam<DType> {};

TEST_P(GemmLargeTile, EveryVariantGivesTheSmallTileBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // n = 328 (not a multiple of any block's 128 / 256 rows), k = 1288 (a
  // partial last k tile, also in the last of the K slices).
  const Operands o = make_operands(328, 1288, 600, GetParam(), 41, *stream);
  for (const bool sliced : {false, true}) {
    std::vector<std::vector<float>> small(65);
    for (int64_t m = 1; m <= 64; ++m) small[m] = product(o, 0, m, GemmTile::small, sliced, *stream);
    const std::vector<float> big_small = product(o, 0, 600, GemmTile::medium, sliced, *stream);
    for (int v = 0; v < large_tile_variants(); ++v) {
      set_large_tile_variant(v);
      for (int64_t m = 1; m <= 64; ++m) {
        ASSERT_TRUE(same_bits(product(o, 0, m, GemmTile::large, sliced, *stream).data(), small[m].data(),
                              small[m].size()))
            << "variant " << v << " m=" << m << (sliced ? " (sliced)" : "");
      }
      const std::vector<float> big = product(o, 0, 600, GemmTile::large, sliced, *stream);
      ASSERT_TRUE(same_bits(big.data(), big_small.data(), big.size()))
          << "variant " << v << " m=600 != medium tile" << (sliced ? " (sliced)" : "");
      for (const int64_t r :
           {int64_t{0}, int64_t{127}, int64_t{128}, int64_t{255}, int64_t{256}, int64_t{599}}) {
        const std::vector<float> one = product(o, r, 1, GemmTile::small, sliced, *stream);
        ASSERT_TRUE(same_bits(big.data() + r * o.n, one.data(), one.size()))
            << "variant " << v << " row " << r << " alone" << (sliced ? " (sliced)" : "");
      }
    }
    set_large_tile_variant(-1);
  }
}

INSTANTIATE_TEST_SUITE_P(Activations, GemmLargeTile, ::testing::Values(DType::bf16, DType::f32),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace tandem::kernels::gpu
