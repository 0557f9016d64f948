// The fused GEMM epilogues (kernels/cuda_ops.h, fused.cu) give exactly the
// bits of the unfused sequence they replace: gemm_bf16w_sliced, add_bias,
// then add_inplace / swiglu_rows / split_qkv + rope + kv_write. Skipped
// without a CUDA device; the argument checks run everywhere.
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

struct Projection {
  int64_t m, n, k;
  DeviceBuffer x, w, bias, slabs, y;
  size_t slab_floats;
};

Projection make_projection(int64_t m, int64_t n, int64_t k, uint32_t seed, const Stream& stream) {
  Projection p{m, n, k, {}, {}, {}, {}, {}, 0};
  p.x = testing::to_device(random_floats(m * k, seed), stream);
  p.w = testing::to_device_weights(testing::to_bf16(random_floats(n * k, seed + 1)), n, k, stream);
  p.bias = testing::to_device(random_floats(n, seed + 2), stream);
  p.slab_floats = static_cast<size_t>(gemm_slicing(n, k).slices) * m * n;
  p.slabs = testing::to_device(std::vector<float>(p.slab_floats, 0.0f), stream);
  p.y = testing::to_device(std::vector<float>(m * n, 0.0f), stream);
  return p;
}

// The unfused reference: y = sliced product + bias.
std::vector<float> unfused_product(Projection& p, const Stream& stream) {
  Status st = gemm_bf16w_sliced(stream, p.x.data(), DType::f32, p.m, p.w.as<uint16_t>(), p.n, p.k,
                                p.y.as<float>(), p.slabs.as<float>(), p.slab_floats);
  EXPECT_TRUE(st.ok()) << st.to_string();
  st = add_bias(stream, p.y.as<float>(), p.bias.as<float>(), p.m, p.n);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return testing::to_host<float>(p.y, p.m * p.n, stream);
}

GemmPartials partials(Projection& p, const Stream& stream) {
  Expected<GemmPartials> g = gemm_bf16w_partials(stream, p.x.data(), DType::f32, p.m, p.w.as<uint16_t>(), p.n,
                                                 p.k, p.y.as<float>(), p.slabs.as<float>(), p.slab_floats);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? *g : GemmPartials{};
}

// The epilogues' bf16 copy (ADR 0054) == to_bf16 of their f32 output, bit for bit.
void expect_bf16_of(const DeviceBuffer& f32, const DeviceBuffer& bf16, int64_t count, const Stream& stream,
                    const char* what) {
  DeviceBuffer ref = testing::poisoned(count * 2, stream);
  ASSERT_TRUE(to_bf16(stream, f32.as<float>(), ref.as<uint16_t>(), count).ok());
  const auto a = testing::to_host<uint16_t>(ref, count, stream);
  const auto b = testing::to_host<uint16_t>(bf16, count, stream);
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(uint16_t)), 0) << what;
}

TEST(CudaFused, ResidualAddAndSwigluEqualTheUnfusedOps) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const int64_t k : {int64_t{4864}, int64_t{896}}) {  // several slices; one slice (n = 9728 is wide)
    Projection p = make_projection(3, k == 896 ? 9728 : 640, k, 5, *stream);
    const std::vector<float> y = unfused_product(p, *stream);
    const std::vector<float> x0 = random_floats(p.m * p.n, 9);
    // Residual.
    DeviceBuffer x_ref = testing::to_device(x0, *stream), x_fused = testing::to_device(x0, *stream);
    DeviceBuffer dy = testing::to_device(y, *stream);
    ASSERT_TRUE(add_inplace(*stream, x_ref.as<float>(), dy.as<float>(), p.m * p.n).ok());
    const GemmPartials g = partials(p, *stream);
    ASSERT_TRUE(residual_add_partials(*stream, g, p.bias.as<float>(), x_fused.as<float>()).ok());
    const std::vector<float> a = testing::to_host<float>(x_ref, x0.size(), *stream);
    const std::vector<float> b = testing::to_host<float>(x_fused, x0.size(), *stream);
    EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << "residual, k=" << k << " slices " << g.slices;
    // SwiGLU over the same rows read as [gate | up].
    const int64_t inter = p.n / 2;
    DeviceBuffer out_ref = testing::poisoned(p.m * inter * 4, *stream);
    DeviceBuffer out_fused = testing::poisoned(p.m * inter * 4, *stream);
    ASSERT_TRUE(swiglu_rows(*stream, dy.as<float>(), p.m, inter, out_ref.as<float>()).ok());
    const GemmPartials g2 = partials(p, *stream);
    DeviceBuffer out_bf16 = testing::poisoned(p.m * inter * 2, *stream);
    ASSERT_TRUE(
        swiglu_partials(*stream, g2, p.bias.as<float>(), out_fused.as<float>(), out_bf16.as<uint16_t>())
            .ok());
    const std::vector<float> c = testing::to_host<float>(out_ref, p.m * inter, *stream);
    const std::vector<float> d = testing::to_host<float>(out_fused, p.m * inter, *stream);
    EXPECT_TRUE(same_bits(c.data(), d.data(), c.size())) << "swiglu, k=" << k;
    expect_bf16_of(out_ref, out_bf16, p.m * inter, *stream, "swiglu bf16 copy");
  }
}

// A residual + norm case: m rows of an n x k projection, with or without a bias.
struct NormCase {
  int64_t m, n, k;
  bool bias;
};

// residual_add_rmsnorm_partials == residual_add_partials then rmsnorm, bit for
// bit, in x and in h: several slices and one (then h is the slab buffer the
// product sits in), with and without a bias, rows of 896 (not a multiple of
// the block), 4096, 1000, 2048, 200 and 1536; up to 64 rows (the few-rows kernels,
// one block or a cluster a row) and 65 (the other kernel).
TEST(CudaFused, ResidualAddRmsnormEqualsTheAddThenTheNorm) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  int single = 0;  // cases with one slice (k < two of gemm_slicing's 128-k granules)
  for (const NormCase& c :
       {NormCase{3, 896, 4864, true}, NormCase{5, 896, 128, false}, NormCase{1, 4096, 4096, false},
        NormCase{2, 1000, 2048, true}, NormCase{4, 9728, 896, true}, NormCase{1, 1000, 136, true},
        NormCase{1, 2048, 8192, false}, NormCase{64, 2048, 2048, true}, NormCase{8, 4096, 14336, false},
        NormCase{2, 200, 2048, true}, NormCase{65, 1536, 1536, false}}) {
    Projection p = make_projection(c.m, c.n, c.k, 21, *stream);
    const float* bias = c.bias ? p.bias.as<float>() : nullptr;
    const std::vector<float> x0 = random_floats(c.m * c.n, 23, -4.0f, 4.0f);
    const std::vector<float> norm = random_floats(c.n, 29, 0.5f, 1.5f);
    DeviceBuffer d_norm = testing::to_device(norm, *stream);
    const float eps = 1e-6f;
    // Unfused: the add, then the norm into its own buffer.
    DeviceBuffer x_ref = testing::to_device(x0, *stream);
    DeviceBuffer h_ref = testing::poisoned(c.m * c.n * 4, *stream);
    const GemmPartials g = partials(p, *stream);
    ASSERT_TRUE(residual_add_partials(*stream, g, bias, x_ref.as<float>()).ok());
    ASSERT_TRUE(
        rmsnorm(*stream, x_ref.as<float>(), d_norm.as<float>(), h_ref.as<float>(), c.m, c.n, eps).ok());
    // Fused, by each kernel (one block a row; a cluster a row, ADR 0091); with one
    // slice h is y itself, where the partials live (rewritten for each kernel).
    for (const RowNormKernel kernel : {RowNormKernel::one_block, RowNormKernel::cluster}) {
      DeviceBuffer x_fused = testing::to_device(x0, *stream);
      DeviceBuffer h_own = testing::poisoned(c.m * c.n * 4, *stream);
      const GemmPartials g2 = partials(p, *stream);
      float* h = g2.slices == 1 ? p.y.as<float>() : h_own.as<float>();
      if (g2.slices == 1) {
        ASSERT_EQ(g2.slabs, p.y.as<float>());
        ++single;
      }
      DeviceBuffer h_bf16 = testing::poisoned(c.m * c.n * 2, *stream);
      const Status st = residual_add_rmsnorm_partials(
          *stream, g2, bias, x_fused.as<float>(), d_norm.as<float>(), eps, h, h_bf16.as<uint16_t>(), kernel);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const auto a = testing::to_host<float>(x_ref, x0.size(), *stream);
      const auto b = testing::to_host<float>(x_fused, x0.size(), *stream);
      EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0)
          << "x, n=" << c.n << " slices " << g2.slices << " kernel " << static_cast<int>(kernel);
      const auto hr = testing::to_host<float>(h_ref, x0.size(), *stream);
      const auto hf = g2.slices == 1 ? testing::to_host<float>(p.y, x0.size(), *stream)
                                     : testing::to_host<float>(h_own, x0.size(), *stream);
      EXPECT_EQ(std::memcmp(hr.data(), hf.data(), hr.size() * sizeof(float)), 0)
          << "h, n=" << c.n << " slices " << g2.slices << " kernel " << static_cast<int>(kernel);
      expect_bf16_of(h_ref, h_bf16, c.m * c.n, *stream, "residual norm bf16 copy");
    }
  }
  EXPECT_EQ(single, 4);  // two cases, each kernel
  const GemmPartials none{nullptr, 1, 0, 8};
  EXPECT_TRUE(residual_add_rmsnorm_partials(*stream, none, nullptr, nullptr, nullptr, 1e-6f, nullptr).ok());
  const GemmPartials bad{nullptr, 1, 2, 8};
  EXPECT_FALSE(residual_add_rmsnorm_partials(*stream, bad, nullptr, nullptr, nullptr, 1e-6f, nullptr).ok());
}

// gemm_bf16w_residual_rmsnorm (the add and the norm in the GEMM's last block,
// ADR 0089) == gemm_bf16w_partials then residual_add_rmsnorm_partials, bit for
// bit in x, h and h's bf16 copy: the forward's o / down shapes on both tiles
// (21: 256 threads; 3: 128, whose norm plays 256; one pass of a thread's float4
// groups and two), with and without a bias,
// m = 1..8; each call twice on one ticket (the last block resets it).
TEST(CudaFused, GemmResidualRmsnormEpilogueEqualsTheTwoCalls) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  DeviceBuffer ticket = testing::to_device(std::vector<uint32_t>{0}, *stream);
  int ran = 0;
  for (const NormCase& c :
       {NormCase{1, 2048, 2048, false}, NormCase{1, 2048, 8192, false}, NormCase{1, 896, 896, true},
        NormCase{1, 896, 4864, true}, NormCase{1, 4096, 4096, false}, NormCase{1, 4096, 14336, false},
        NormCase{2, 1536, 8960, true}, NormCase{5, 1000, 2048, true}, NormCase{8, 4096, 4096, false},
        NormCase{1, 4096, 2048, true}}) {
    ASSERT_TRUE(gemm_residual_rmsnorm_fits(DType::bf16, c.m, c.n, c.k)) << c.n << " x " << c.k;
    Projection p = make_projection(c.m, c.n, c.k, 41, *stream);
    DeviceBuffer xb = testing::poisoned(c.m * c.k * 2, *stream);
    ASSERT_TRUE(to_bf16(*stream, p.x.as<float>(), xb.as<uint16_t>(), c.m * c.k).ok());
    const float* bias = c.bias ? p.bias.as<float>() : nullptr;
    const std::vector<float> x0 = random_floats(c.m * c.n, 43, -4.0f, 4.0f);
    DeviceBuffer d_norm = testing::to_device(random_floats(c.n, 47, 0.5f, 1.5f), *stream);
    const float eps = 1e-5f;
    DeviceBuffer x_ref = testing::to_device(x0, *stream);
    DeviceBuffer h_ref = testing::poisoned(c.m * c.n * 4, *stream);
    DeviceBuffer hb_ref = testing::poisoned(c.m * c.n * 2, *stream);
    Expected<GemmPartials> g =
        gemm_bf16w_partials(*stream, xb.data(), DType::bf16, c.m, p.w.as<uint16_t>(), c.n, c.k,
                            p.y.as<float>(), p.slabs.as<float>(), p.slab_floats);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    ASSERT_TRUE(residual_add_rmsnorm_partials(*stream, *g, bias, x_ref.as<float>(), d_norm.as<float>(), eps,
                                              h_ref.as<float>(), hb_ref.as<uint16_t>())
                    .ok());
    const auto xr = testing::to_host<float>(x_ref, x0.size(), *stream);
    const auto hr = testing::to_host<float>(h_ref, x0.size(), *stream);
    const auto hbr = testing::to_host<uint16_t>(hb_ref, x0.size(), *stream);
    for (int call = 0; call < 2; ++call) {
      DeviceBuffer x_f = testing::to_device(x0, *stream);
      DeviceBuffer h_f = testing::poisoned(c.m * c.n * 4, *stream);
      DeviceBuffer hb_f = testing::poisoned(c.m * c.n * 2, *stream);
      DeviceBuffer slabs = testing::poisoned(p.slab_floats * 4, *stream);
      const ResidualNorm norm{bias,
                              x_f.as<float>(),
                              d_norm.as<float>(),
                              eps,
                              h_f.as<float>(),
                              hb_f.as<uint16_t>(),
                              ticket.as<uint32_t>()};
      const Status st = gemm_bf16w_residual_rmsnorm(*stream, xb.data(), DType::bf16, c.m, p.w.as<uint16_t>(),
                                                    c.n, c.k, slabs.as<float>(), p.slab_floats, norm);
      ASSERT_TRUE(st.ok()) << st.to_string();
      const auto xf = testing::to_host<float>(x_f, x0.size(), *stream);
      const auto hf = testing::to_host<float>(h_f, x0.size(), *stream);
      const auto hbf = testing::to_host<uint16_t>(hb_f, x0.size(), *stream);
      const std::string what =
          std::to_string(c.m) + " x " + std::to_string(c.n) + " x " + std::to_string(c.k);
      EXPECT_EQ(std::memcmp(xr.data(), xf.data(), xr.size() * sizeof(float)), 0) << "x, " << what;
      EXPECT_EQ(std::memcmp(hr.data(), hf.data(), hr.size() * sizeof(float)), 0) << "h, " << what;
      EXPECT_EQ(std::memcmp(hbr.data(), hbf.data(), hbr.size() * sizeof(uint16_t)), 0) << "h bf16, " << what;
      EXPECT_EQ(testing::to_host<uint32_t>(ticket, 1, *stream)[0], 0u) << "ticket reset, " << what;
      ++ran;
    }
  }
  EXPECT_EQ(ran, 20);
  // Where it does not run: f32 x, more rows than kResidualNormMaxRows, one slice, n not a multiple of 4.
  EXPECT_FALSE(gemm_residual_rmsnorm_fits(DType::f32, 1, 2048, 2048));
  EXPECT_FALSE(gemm_residual_rmsnorm_fits(DType::bf16, kResidualNormMaxRows + 1, 2048, 2048));
  EXPECT_FALSE(gemm_residual_rmsnorm_fits(DType::bf16, 1, 896, 128));
  EXPECT_FALSE(gemm_residual_rmsnorm_fits(DType::bf16, 1, 1002, 2048));
}

TEST(CudaFused, QkvRopeKvWriteEqualsSplitRopeAndKvWrite) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const int hd : {64, 128}) {
    const int n_heads = 4, n_kv = 2, tpb = 16, rows = 5;
    const int64_t qd = n_heads * hd, kvd = n_kv * hd;
    Projection p = make_projection(rows, qd + 2 * kvd, 2048, 11, *stream);
    const std::vector<float> y = unfused_product(p, *stream);
    const std::vector<float> inv = rope_inv_freq(hd, 10000.0, RopeScaling{});
    DeviceBuffer d_inv = testing::to_device(inv, *stream);
    const std::vector<int32_t> positions = {17, 18, 40, 3, 63}, rope_positions = {17, 18, 40, 1000, 63};
    DeviceBuffer d_pos = testing::to_device(positions, *stream);
    DeviceBuffer d_rope = testing::to_device(rope_positions, *stream);
    const int blocks = 6;
    std::vector<int32_t> table(blocks);
    std::iota(table.rbegin(), table.rend(), 0);  // reversed block ids
    std::vector<int32_t> tables;
    for (int r = 0; r < rows; ++r) tables.insert(tables.end(), table.begin(), table.end());
    DeviceBuffer d_tables = testing::to_device(tables, *stream);
    const size_t pool_floats = static_cast<size_t>(blocks) * tpb * kvd;
    auto make_pool = [&](DeviceBuffer& k, DeviceBuffer& v) {
      k = testing::to_device(std::vector<float>(pool_floats, 0.5f), *stream);
      v = testing::to_device(std::vector<float>(pool_floats, 0.5f), *stream);
      return DeviceKvPool{k.as<float>(), v.as<float>(), tpb, n_kv, hd};
    };
    DeviceBuffer k_ref, v_ref, k_fused, v_fused;
    const DeviceKvPool pool_ref = make_pool(k_ref, v_ref), pool_fused = make_pool(k_fused, v_fused);
    // Unfused.
    DeviceBuffer dy = testing::to_device(y, *stream);
    DeviceBuffer q = testing::poisoned(rows * qd * 4, *stream),
                 k = testing::poisoned(rows * kvd * 4, *stream),
                 v = testing::poisoned(rows * kvd * 4, *stream);
    ASSERT_TRUE(
        split_qkv(*stream, dy.as<float>(), rows, qd, kvd, q.as<float>(), k.as<float>(), v.as<float>()).ok());
    ASSERT_TRUE(rope(*stream, q.as<float>(), rows, n_heads, hd, d_rope.as<int32_t>(), d_inv.as<float>(), hd,
                     RopeLayout::neox)
                    .ok());
    ASSERT_TRUE(rope(*stream, k.as<float>(), rows, n_kv, hd, d_rope.as<int32_t>(), d_inv.as<float>(), hd,
                     RopeLayout::neox)
                    .ok());
    ASSERT_TRUE(kv_write(*stream, pool_ref, k.as<float>(), v.as<float>(), rows, d_pos.as<int32_t>(),
                         d_tables.as<int32_t>(), blocks)
                    .ok());
    // Fused.
    DeviceBuffer q_fused = testing::poisoned(rows * qd * 4, *stream);
    const GemmPartials g = partials(p, *stream);
    ASSERT_GT(g.slices, 1);
    const Status st = qkv_rope_kv_write(
        *stream, g, p.bias.as<float>(), n_heads, pool_fused, d_rope.as<int32_t>(), d_inv.as<float>(), hd,
        RopeLayout::neox, d_pos.as<int32_t>(), d_tables.as<int32_t>(), blocks, q_fused.as<float>());
    ASSERT_TRUE(st.ok()) << st.to_string();
    const auto a = testing::to_host<float>(q, rows * qd, *stream),
               b = testing::to_host<float>(q_fused, rows * qd, *stream);
    EXPECT_TRUE(same_bits(a.data(), b.data(), a.size())) << "q, head_dim " << hd;
    for (const auto* pair : {&k_ref, &v_ref}) {
      const DeviceBuffer& other = pair == &k_ref ? k_fused : v_fused;
      const auto c = testing::to_host<float>(*pair, pool_floats, *stream);
      const auto d = testing::to_host<float>(other, pool_floats, *stream);
      EXPECT_TRUE(same_bits(c.data(), d.data(), c.size()))
          << (pair == &k_ref ? "k" : "v") << " pool, head_dim " << hd;
    }
  }
}

TEST(CudaFusedArguments, BadShapesAreInvalidArgument) {
  const Stream stream;
  const GemmPartials odd{nullptr, 1, 0, 7};
  EXPECT_EQ(swiglu_partials(stream, odd, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  const GemmPartials no_slabs{nullptr, 1, 2, 8};
  EXPECT_EQ(residual_add_partials(stream, no_slabs, nullptr, nullptr).code(), StatusCode::kInvalidArgument);
  const GemmPartials qkv{nullptr, 1, 0, 100};
  EXPECT_EQ(qkv_rope_kv_write(stream, qkv, nullptr, 4, DeviceKvPool{nullptr, nullptr, 16, 2, 64}, nullptr,
                              nullptr, 64, RopeLayout::neox, nullptr, nullptr, 1, nullptr)
                .code(),
            StatusCode::kInvalidArgument);  // n is not (4 + 2·2)·64
}

}  // namespace
}  // namespace tandem::kernels::gpu
