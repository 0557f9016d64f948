// The GEMM's norm tail (GemmNormTail, ADR 0068): the residual add + RMSNorm
// run by the GEMM's last block gives exactly the bits of
// residual_add_rmsnorm_partials after gemm_bf16w_partials, in x, h and h's
// bf16 copy; the calls it cannot carry say so (tail_done false) and leave the
// partials as before. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cstring>
#include <utility>
#include <vector>

#include "cuda/gemm_tuning.h"
#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;

struct Case {
  int64_t m, n, k;
  bool bias;
};

struct Outputs {
  std::vector<float> x, h;
  std::vector<uint16_t> hb;
  bool tail_done = false;
  int slices = 0;
};

// One projection of x (f32 or its bf16 rounding) with the add + norm after it,
// by the tail when `tail`, else by residual_add_rmsnorm_partials.
Outputs run(const Case& c, DType dtype, bool tail, const Stream& stream) {
  const std::vector<float> xin = random_floats(c.m * c.k, 41);
  DeviceBuffer x_f32 = testing::to_device(xin, stream);
  DeviceBuffer x_bf16 = testing::poisoned(c.m * c.k * 2, stream);
  EXPECT_TRUE(to_bf16(stream, x_f32.as<float>(), x_bf16.as<uint16_t>(), c.m * c.k).ok());
  const void* in = dtype == DType::f32 ? x_f32.data() : x_bf16.data();
  DeviceBuffer w =
      testing::to_device_weights(testing::to_bf16(random_floats(c.n * c.k, 43)), c.n, c.k, stream);
  DeviceBuffer bias = testing::to_device(random_floats(c.n, 47), stream);
  DeviceBuffer norm = testing::to_device(random_floats(c.n, 53, 0.5f, 1.5f), stream);
  DeviceBuffer resid = testing::to_device(random_floats(c.m * c.n, 59, -4.0f, 4.0f), stream);
  const size_t slab_floats = static_cast<size_t>(gemm_slicing(c.n, c.k).slices) * c.m * c.n;
  DeviceBuffer slabs = testing::poisoned(slab_floats * 4, stream);
  DeviceBuffer h = testing::poisoned(c.m * c.n * 4, stream);  // also y: one slice puts the product here
  DeviceBuffer hb = testing::poisoned(c.m * c.n * 2, stream);
  DeviceBuffer counter = testing::to_device(std::vector<uint32_t>{0}, stream);
  const float eps = 1e-6f;
  const float* b = c.bias ? bias.as<float>() : nullptr;
  const GemmNormTail t{
      b, resid.as<float>(), norm.as<float>(), eps, h.as<float>(), hb.as<uint16_t>(), counter.as<uint32_t>()};
  Expected<GemmPartials> p =
      gemm_bf16w_partials(stream, in, dtype, c.m, w.as<uint16_t>(), c.n, c.k, h.as<float>(),
                          slabs.as<float>(), slab_floats, GemmTile::automatic, tail ? &t : nullptr);
  EXPECT_TRUE(p.ok()) << p.status().to_string();
  Outputs o;
  if (!p.ok()) return o;
  o.tail_done = p->tail_done;
  o.slices = p->slices;
  if (!p->tail_done) {
    const Status st = residual_add_rmsnorm_partials(stream, *p, b, resid.as<float>(), norm.as<float>(), eps,
                                                    h.as<float>(), hb.as<uint16_t>());
    EXPECT_TRUE(st.ok()) << st.to_string();
  }
  o.x = testing::to_host<float>(resid, c.m * c.n, stream);
  o.h = testing::to_host<float>(h, c.m * c.n, stream);
  o.hb = testing::to_host<uint16_t>(hb, c.m * c.n, stream);
  EXPECT_EQ(testing::to_host<uint32_t>(counter, 1, stream)[0], 0u)
      << "the last block leaves the counter at 0";
  return o;
}

// Variants 3 and 8 (the by-shape defaults for small and sliced matrices at
// M <= 8) and 5 (8 < M <= 16, and any M when chosen), every slice count from
// one (h is the product's own buffer) to ten, rows of 896 (not a multiple of
// the block), 1000, 2048 and 4096, with and without a bias, f32 and bf16 x.
TEST(CudaGemmTail, GivesTheResidualNormKernelsBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const Case cases[] = {{1, 896, 4864, true},   {1, 4096, 4096, false}, {3, 896, 896, true},
                        {5, 896, 256, false},   {2, 1000, 2048, true},  {1, 1000, 264, true},
                        {8, 2048, 2048, false}, {12, 896, 4864, true},  {16, 1000, 512, false}};
  int carried = 0;
  for (const int variant : {3, 8, 5}) {
    set_small_tile_variant(variant);
    for (const DType dtype : {DType::bf16, DType::f32}) {
      for (const Case& c : cases) {
        SCOPED_TRACE(::testing::Message() << "variant " << variant << (dtype == DType::f32 ? " f32" : " bf16")
                                          << " m=" << c.m << " n=" << c.n << " k=" << c.k);
        const Outputs ref = run(c, dtype, false, *stream);
        const Outputs got = run(c, dtype, true, *stream);
        EXPECT_FALSE(ref.tail_done);
        carried += got.tail_done ? 1 : 0;
        EXPECT_EQ(std::memcmp(ref.x.data(), got.x.data(), ref.x.size() * sizeof(float)), 0) << "x";
        EXPECT_EQ(std::memcmp(ref.h.data(), got.h.data(), ref.h.size() * sizeof(float)), 0) << "h";
        EXPECT_EQ(std::memcmp(ref.hb.data(), got.hb.data(), ref.hb.size() * sizeof(uint16_t)), 0) << "h bf16";
      }
    }
  }
  set_small_tile_variant(-1);
  // Carried: all 54 calls but those whose rows outgrow the ring (m · n floats
  // > its shared memory): 16 x 1000 with bf16 x on variant 5 (61,440 bytes),
  // which 3 and 8 hand their m > 8 calls to, and 8 x 2048 on 5 with bf16 x.
  EXPECT_EQ(carried, 3 * 2 * 9 - 4);
}

// Where the tail cannot run (more rows than it holds, a row past the shared
// memory, a tile without it) the call says so and the partials are the
// plain call's; a tail without its buffers is an error.
TEST(CudaGemmTail, DeclinesWhatItCannotCarry) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // 8 rows of 4096 (128 KB) exceed variant 8's ring; 32 rows take the wide tile.
  for (const Case& c : {Case{8, 4096, 4096, true}, Case{32, 896, 896, false}}) {
    const Outputs ref = run(c, DType::bf16, false, *stream);
    const Outputs got = run(c, DType::bf16, true, *stream);
    EXPECT_FALSE(got.tail_done) << c.m << " x " << c.n;
    EXPECT_EQ(std::memcmp(ref.h.data(), got.h.data(), ref.h.size() * sizeof(float)), 0);
  }
  set_small_tile_variant(15);  // register-direct: no tail
  const Outputs direct = run(Case{1, 896, 4864, true}, DType::bf16, true, *stream);
  EXPECT_FALSE(direct.tail_done);
  set_small_tile_variant(-1);
  DeviceBuffer x = testing::to_device(std::vector<uint16_t>(64, 0), *stream);
  DeviceBuffer w = testing::to_device_weights(std::vector<uint16_t>(64 * 64, 0), 64, 64, *stream);
  DeviceBuffer y = testing::poisoned(64 * 4, *stream);
  const GemmNormTail incomplete{};
  Expected<GemmPartials> p = gemm_bf16w_partials(*stream, x.data(), DType::bf16, 1, w.as<uint16_t>(), 64, 64,
                                                 y.as<float>(), nullptr, 0, GemmTile::automatic, &incomplete);
  EXPECT_FALSE(p.ok());
}

// The SwiGLU tail (GemmSwigluTail) == swiglu_partials after the plain call,
// in the f32 output and its bf16 copy: one to ten slices, 1..12 rows, with
// and without a bias; n not a multiple of 128 is declined (tail_done false).
TEST(CudaGemmTail, SwigluTailGivesTheSwigluKernelsBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const Case cases[] = {{1, 9728, 896, true},
                        {3, 1280, 4864, false},
                        {8, 2048, 256, true},
                        {12, 640, 512, true},
                        {2, 1000, 512, false}};
  for (const int variant : {3, 8}) {
    set_small_tile_variant(variant);
    for (const Case& c : cases) {
      SCOPED_TRACE(::testing::Message()
                   << "variant " << variant << " m=" << c.m << " n=" << c.n << " k=" << c.k);
      const int64_t inter = c.n / 2;
      DeviceBuffer x = testing::to_device(random_floats(c.m * c.k, 61), *stream);
      DeviceBuffer xb = testing::poisoned(c.m * c.k * 2, *stream);
      ASSERT_TRUE(to_bf16(*stream, x.as<float>(), xb.as<uint16_t>(), c.m * c.k).ok());
      DeviceBuffer w =
          testing::to_device_weights(testing::to_bf16(random_floats(c.n * c.k, 67)), c.n, c.k, *stream);
      DeviceBuffer bias = testing::to_device(random_floats(c.n, 71), *stream);
      const float* b = c.bias ? bias.as<float>() : nullptr;
      const size_t slab_floats = static_cast<size_t>(gemm_slicing(c.n, c.k).slices) * c.m * c.n;
      DeviceBuffer counters = testing::to_device(std::vector<uint32_t>(c.n / 128 + 1, 0), *stream);
      auto run_one = [&](bool tail, bool* done) {
        DeviceBuffer slabs = testing::poisoned(slab_floats * 4, *stream);
        DeviceBuffer y = testing::poisoned(c.m * c.n * 4, *stream);
        DeviceBuffer out = testing::poisoned(c.m * inter * 4, *stream);
        DeviceBuffer out_b = testing::poisoned(c.m * inter * 2, *stream);
        const GemmSwigluTail t{b, out.as<float>(), out_b.as<uint16_t>(), counters.as<uint32_t>()};
        Expected<GemmPartials> p = gemm_bf16w_partials(
            *stream, xb.data(), DType::bf16, c.m, w.as<uint16_t>(), c.n, c.k, y.as<float>(),
            slabs.as<float>(), slab_floats, GemmTile::automatic, nullptr, tail ? &t : nullptr);
        EXPECT_TRUE(p.ok()) << p.status().to_string();
        *done = p.ok() && p->tail_done;
        if (p.ok() && !p->tail_done)
          EXPECT_TRUE(swiglu_partials(*stream, *p, b, out.as<float>(), out_b.as<uint16_t>()).ok());
        return std::make_pair(testing::to_host<float>(out, c.m * inter, *stream),
                              testing::to_host<uint16_t>(out_b, c.m * inter, *stream));
      };
      bool ref_done = true, done = false;
      const auto ref = run_one(false, &ref_done);
      const auto got = run_one(true, &done);
      EXPECT_FALSE(ref_done);
      EXPECT_EQ(done, c.n % 128 == 0);
      EXPECT_EQ(std::memcmp(ref.first.data(), got.first.data(), ref.first.size() * sizeof(float)), 0)
          << "out";
      EXPECT_EQ(std::memcmp(ref.second.data(), got.second.data(), ref.second.size() * sizeof(uint16_t)), 0)
          << "out bf16";
      const auto left = testing::to_host<uint32_t>(counters, c.n / 128 + 1, *stream);
      for (uint32_t v : left) EXPECT_EQ(v, 0u) << "every group's counter back at 0";
    }
  }
  set_small_tile_variant(-1);
}

}  // namespace
}  // namespace tandem::kernels::gpu
