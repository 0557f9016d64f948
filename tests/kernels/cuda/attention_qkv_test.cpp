// attention_from_qkv (ADR 0073) == qkv_rope_kv_write then attention(), bit
// for bit: the attention output, its bf16 copy and the K/V pool, over rows of
// different sequences (each row its sequence's only new key) and over verify
// blocks (several rows of one sequence at consecutive positions, ADR 0081),
// positions on and across chunk boundaries, with and without a window and a
// bias, head dims 64 and 128; and the fallback (no split workspace) gives the
// same bits.
// Skipped without a CUDA device; the argument checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

struct Case {
  int head_dim, n_heads, n_kv, window;
  bool bias;
};

// Sequence s owns blocks [s·B, (s+1)·B) of the pool, whose earlier keys hold
// random values (the cache before the step). The decode layout: rows 0..5,
// each its own sequence; the verify layout: blocks of 3, 4, 1 and 2 rows (one
// across a chunk boundary, one from position 0).
constexpr int kTpb = 16, kBlocksPerRow = 16;
struct Layout {
  std::vector<int32_t> positions, sequence;
};
const Layout kDecode{{0, 31, 32, 77, 200, 255}, {0, 1, 2, 3, 4, 5}};
const Layout kVerify{{30, 31, 32, 252, 253, 254, 255, 77, 0, 1}, {0, 0, 0, 1, 1, 1, 1, 2, 3, 3}};

struct Outputs {
  std::vector<float> out, k_pool, v_pool;
  std::vector<uint16_t> out_bf16;
};

class AttentionFromQkv {
 public:
  AttentionFromQkv(const Case& c, const Layout& layout, const Stream& stream) : c_(c), stream_(stream) {
    const int64_t hd = c.head_dim;
    n_ = (c.n_heads + 2 * c.n_kv) * hd;
    rows_ = static_cast<int64_t>(layout.positions.size());
    x_ = testing::to_device(random_floats(rows_ * kK, 3), stream);
    w_ = testing::to_device_weights(testing::to_bf16(random_floats(n_ * kK, 4, -0.2f, 0.2f)), n_, kK, stream);
    if (c.bias) bias_ = testing::to_device(random_floats(n_, 5), stream);
    slab_floats_ = static_cast<size_t>(gemm_slicing(n_, kK).slices) * rows_ * n_;
    slabs_ = testing::to_device(std::vector<float>(slab_floats_, 0.0f), stream);
    y_ = testing::to_device(std::vector<float>(rows_ * n_, 0.0f), stream);
    inv_ = testing::to_device(rope_inv_freq(c.head_dim, 10000.0, RopeScaling{}), stream);
    std::vector<int32_t> rope_positions = layout.positions;
    for (int32_t& p : rope_positions) p += 1000;  // the rotation's positions may differ from the cache's
    pos_ = testing::to_device(layout.positions, stream);
    rope_ = testing::to_device(rope_positions, stream);
    std::vector<int32_t> tables, news;
    for (int64_t r = 0; r < rows_; ++r) {
      const int32_t seq = layout.sequence[r];
      for (int b = 0; b < kBlocksPerRow; ++b) tables.push_back(seq * kBlocksPerRow + b);
      news.push_back(r > 0 && layout.sequence[r - 1] == seq ? news.back() + 1 : 0);
    }
    tables_ = testing::to_device(tables, stream);
    news_ = testing::to_device(news, stream);
    const int32_t sequences = *std::max_element(layout.sequence.begin(), layout.sequence.end()) + 1;
    pool_floats_ = static_cast<size_t>(sequences) * kBlocksPerRow * kTpb * c.n_kv * hd;
    cache_k_ = random_floats(pool_floats_, 6);
    cache_v_ = random_floats(pool_floats_, 7);
  }

  int64_t rows() const { return rows_; }
  int64_t out_floats() const { return rows_ * c_.n_heads * c_.head_dim; }

  // fused: attention_from_qkv; else qkv_rope_kv_write then attention (split).
  // small_workspace: too small for the split shape (the fallback).
  Outputs run(bool fused, bool small_workspace = false) {
    DeviceBuffer k = testing::to_device(cache_k_, stream_), v = testing::to_device(cache_v_, stream_);
    const DeviceKvPool pool{k.as<float>(), v.as<float>(), kTpb, c_.n_kv, c_.head_dim};
    Expected<GemmPartials> g = gemm_bf16w_partials(stream_, x_.data(), DType::f32, rows_, w_.as<uint16_t>(),
                                                   n_, kK, y_.as<float>(), slabs_.as<float>(), slab_floats_);
    EXPECT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_GT(g->slices, 1);
    const size_t partial_floats =
        small_workspace ? 64 : attention_partial_floats(rows_, c_.n_heads, pool, kBlocksPerRow, c_.window);
    DeviceBuffer partials = testing::to_device(std::vector<float>(partial_floats, 0.0f), stream_);
    DeviceBuffer counters =
        testing::to_device(std::vector<uint32_t>(static_cast<size_t>(rows_) * c_.n_heads, 0u), stream_);
    const AttentionWorkspace ws{partials.as<float>(), partial_floats, counters.as<uint32_t>(),
                                static_cast<size_t>(rows_) * c_.n_heads};
    DeviceBuffer q = testing::poisoned(out_floats() * 4, stream_);
    DeviceBuffer out = testing::poisoned(out_floats() * 4, stream_);
    DeviceBuffer out_bf16 = testing::poisoned(out_floats() * 2, stream_);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c_.head_dim));
    const float* bias = c_.bias ? bias_.as<float>() : nullptr;
    Status st;
    if (fused) {
      st = attention_from_qkv(stream_, *g, bias, c_.n_heads, pool, rope_.as<int32_t>(), inv_.as<float>(),
                              c_.head_dim, RopeLayout::neox, pos_.as<int32_t>(), tables_.as<int32_t>(),
                              kBlocksPerRow, scale, c_.window, out.as<float>(), ws, q.as<float>(), 0.0f,
                              out_bf16.as<uint16_t>(), news_.as<int32_t>());
    } else {
      st = qkv_rope_kv_write(stream_, *g, bias, c_.n_heads, pool, rope_.as<int32_t>(), inv_.as<float>(),
                             c_.head_dim, RopeLayout::neox, pos_.as<int32_t>(), tables_.as<int32_t>(),
                             kBlocksPerRow, q.as<float>());
      if (st.ok())
        st = attention(stream_, q.as<float>(), rows_, c_.n_heads, pool, pos_.as<int32_t>(),
                       tables_.as<int32_t>(), kBlocksPerRow, scale, c_.window, out.as<float>(), ws, 0.0f,
                       AttentionShape::split, out_bf16.as<uint16_t>());
    }
    EXPECT_TRUE(st.ok()) << st.to_string();
    Outputs r;
    r.out = testing::to_host<float>(out, out_floats(), stream_);
    r.out_bf16 = testing::to_host<uint16_t>(out_bf16, out_floats(), stream_);
    r.k_pool = testing::to_host<float>(k, pool_floats_, stream_);
    r.v_pool = testing::to_host<float>(v, pool_floats_, stream_);
    return r;
  }

 private:
  static constexpr int64_t kK = 1024;  // 8 slices of 128 at these widths
  Case c_;
  const Stream& stream_;
  int64_t n_ = 0, rows_ = 0;
  size_t slab_floats_ = 0, pool_floats_ = 0;
  DeviceBuffer x_, w_, bias_, slabs_, y_, inv_, pos_, rope_, tables_, news_;
  std::vector<float> cache_k_, cache_v_;
};

void expect_same(const Outputs& a, const Outputs& b, const std::string& what) {
  EXPECT_TRUE(same_bits(a.out.data(), b.out.data(), a.out.size())) << "out, " << what;
  EXPECT_EQ(std::memcmp(a.out_bf16.data(), b.out_bf16.data(), a.out_bf16.size() * 2), 0)
      << "bf16 out, " << what;
  EXPECT_TRUE(same_bits(a.k_pool.data(), b.k_pool.data(), a.k_pool.size())) << "k pool, " << what;
  EXPECT_TRUE(same_bits(a.v_pool.data(), b.v_pool.data(), a.v_pool.size())) << "v pool, " << what;
}

TEST(CudaAttentionFromQkv, EqualsQkvRopeKvWriteThenAttention) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const Case cases[] = {
      {64, 14, 2, 0, true}, {128, 8, 2, 0, false}, {128, 4, 4, 40, true}, {64, 6, 1, 100, false}};
  for (const Case& c : cases) {
    for (const Layout* layout : {&kDecode, &kVerify}) {
      AttentionFromQkv f(c, *layout, *stream);
      const std::string what = std::string(layout == &kDecode ? "decode" : "verify") + " rows, head_dim " +
                               std::to_string(c.head_dim) + ", heads " + std::to_string(c.n_heads) + "/" +
                               std::to_string(c.n_kv) + ", window " + std::to_string(c.window);
      const Outputs ref = f.run(/*fused=*/false);
      const Outputs fused = f.run(/*fused=*/true);
      expect_same(ref, fused, what);
      expect_same(ref, f.run(/*fused=*/true, /*small_workspace=*/true), what + ", fallback");
    }
  }
}

TEST(CudaAttentionFromQkvArguments, BadShapesAreInvalidArgument) {
  const Stream stream;
  const DeviceKvPool pool{nullptr, nullptr, 16, 2, 64};
  const GemmPartials qkv{nullptr, 1, 0, 100};  // n is not (4 + 2·2)·64
  EXPECT_EQ(attention_from_qkv(stream, qkv, nullptr, 4, pool, nullptr, nullptr, 64, RopeLayout::neox, nullptr,
                               nullptr, 1, 0.125f, 0, nullptr, AttentionWorkspace{}, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
  const GemmPartials odd_rotary{nullptr, 1, 0, 512};
  EXPECT_EQ(attention_from_qkv(stream, odd_rotary, nullptr, 4, pool, nullptr, nullptr, 63, RopeLayout::neox,
                               nullptr, nullptr, 1, 0.125f, 0, nullptr, AttentionWorkspace{}, nullptr)
                .code(),
            StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tandem::kernels::gpu
