// The Gemma and sparse-MoE device ops (kernels/cuda_family_ops.h, ADR 0045)
// and attention's soft-capping: the router's top-k picks exactly the experts
// the CPU rule picks (ties to the lower index, ascending order), GELU-tanh and
// soft-capped attention track the CPU reference kernels, and every op gives a
// row the same bits alone as inside a call of many rows. Skipped without a
// CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda_family_ops.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;
using testing::scalar_ctx;

// forward_moe.cpp's route_row, on CPU-softmaxed probabilities.
void cpu_route(const float* probs, int n, int k, bool renormalise, int32_t* experts, float* weights) {
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float sum = 0.0f;
  for (int j = 0; j < k; ++j) sum += probs[order[j]];
  std::sort(order.begin(), order.begin() + k);
  for (int j = 0; j < k; ++j) {
    experts[j] = order[j];
    weights[j] = renormalise ? probs[order[j]] / sum : probs[order[j]];
  }
}

TEST(CudaMoeRoute, PicksTheCpuRulesExpertsWithTiesToTheLowerIndex) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (int n : {4, 8, 60}) {
    for (bool renormalise : {false, true}) {
      const int k = n == 4 ? 2 : 4;
      const int64_t rows = 41;
      std::vector<float> logits = random_floats(rows * n, 7 + n, -4.0f, 4.0f);
      // Ties: rows 0-2 repeat values so the top-k boundary falls inside a tie.
      for (int i = 0; i < n; ++i) logits[i] = static_cast<float>(i % 3);
      for (int i = 0; i < n; ++i) logits[n + i] = 1.0f;
      for (int i = 0; i < n; ++i) logits[2 * n + i] = i == n - 1 ? 2.0f : 0.5f;
      std::vector<float> probs = logits;
      softmax(scalar_ctx(), probs.data(), rows, n);
      DeviceBuffer dl = testing::to_device(logits, *stream);
      DeviceBuffer de = testing::poisoned(rows * k * 4, *stream),
                   dw = testing::poisoned(rows * k * 4, *stream);
      ASSERT_TRUE(
          moe_route(*stream, dl.as<float>(), rows, n, k, renormalise, de.as<int32_t>(), dw.as<float>()).ok());
      const auto experts = testing::to_host<int32_t>(de, rows * k, *stream);
      const auto weights = testing::to_host<float>(dw, rows * k, *stream);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<int32_t> want_e(k);
        std::vector<float> want_w(k);
        cpu_route(probs.data() + r * n, n, k, renormalise, want_e.data(), want_w.data());
        for (int j = 0; j < k; ++j) {
          ASSERT_EQ(experts[r * k + j], want_e[j]) << "n=" << n << " row " << r << " slot " << j;
          ASSERT_NEAR(weights[r * k + j], want_w[j], 1e-6f * want_w[j]) << "n=" << n << " row " << r;
        }
      }
      // A row alone: the same bits.
      for (int64_t r : {0L, 2L, 40L}) {
        DeviceBuffer e1 = testing::poisoned(k * 4, *stream), w1 = testing::poisoned(k * 4, *stream);
        ASSERT_TRUE(
            moe_route(*stream, dl.as<float>() + r * n, 1, n, k, renormalise, e1.as<int32_t>(), w1.as<float>())
                .ok());
        const auto we = testing::to_host<float>(w1, k, *stream);
        const auto ee = testing::to_host<int32_t>(e1, k, *stream);
        ASSERT_TRUE(same_bits(we.data(), weights.data() + r * k, k)) << "row " << r;
        ASSERT_TRUE(std::equal(ee.begin(), ee.end(), experts.begin() + r * k)) << "row " << r;
      }
    }
  }
}

TEST(CudaGeluTanh, TracksTheCpuReferenceAndIsRowInvariant) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t rows = 19, inter = 300;
  const std::vector<float> gate_up = random_floats(rows * 2 * inter, 11, -6.0f, 6.0f);
  std::vector<float> ref(rows * inter);
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = gate_up.data() + r * 2 * inter;
    gelu_tanh_gate(scalar_ctx(), row, row + inter, ref.data() + r * inter, inter);
  }
  DeviceBuffer dg = testing::to_device(gate_up, *stream), dout = testing::poisoned(rows * inter * 4, *stream);
  ASSERT_TRUE(gelu_tanh_rows(*stream, dg.as<float>(), rows, inter, dout.as<float>()).ok());
  const auto out = testing::to_host<float>(dout, rows * inter, *stream);
  for (int64_t i = 0; i < rows * inter; ++i)
    ASSERT_NEAR(out[i], ref[i], 2e-7 * std::fabs(ref[i]) + 1e-30) << "i=" << i;
  DeviceBuffer one = testing::poisoned(inter * 4, *stream);
  ASSERT_TRUE(gelu_tanh_rows(*stream, dg.as<float>() + 7 * 2 * inter, 1, inter, one.as<float>()).ok());
  const auto alone = testing::to_host<float>(one, inter, *stream);
  EXPECT_TRUE(same_bits(alone.data(), out.data() + 7 * inter, inter));
}

TEST(CudaMoeCombine, SumsTheSlotsInOrderThenTheSharedExpert) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t rows = 5, dim = 33;
  const int k = 3;
  const auto y = random_floats(rows * k * dim, 21), w = random_floats(rows * k, 22, 0.0f, 1.0f);
  const auto shared = random_floats(rows * dim, 23), scale = random_floats(rows, 24, 0.0f, 1.0f);
  DeviceBuffer dy = testing::to_device(y, *stream), dw = testing::to_device(w, *stream);
  DeviceBuffer ds = testing::to_device(shared, *stream), dsc = testing::to_device(scale, *stream);
  DeviceBuffer dout = testing::poisoned(rows * dim * 4, *stream);
  ASSERT_TRUE(moe_combine(*stream, dy.as<float>(), dw.as<float>(), rows, k, dim, dsc.as<float>(),
                          ds.as<float>(), dout.as<float>())
                  .ok());
  const auto out = testing::to_host<float>(dout, rows * dim, *stream);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < dim; ++i) {
      float acc = 0.0f;
      for (int j = 0; j < k; ++j) acc = acc + y[(r * k + j) * dim + i] * w[r * k + j];
      acc = acc + scale[r] * shared[r * dim + i];
      ASSERT_EQ(out[r * dim + i], acc) << "r=" << r << " i=" << i;  // the same f32 operations
    }
  }
}

TEST(CudaAttentionSoftcap, TracksTheCpuAttentionAndIsRowInvariant) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int n_heads = 4, n_kv = 2, hd = 16, tpb = 16, len = 70;
  const float softcap = 3.0f, scale = 1.0f / std::sqrt(24.0f);
  const int blocks = (len + tpb - 1) / tpb;
  const size_t floats = static_cast<size_t>(blocks) * tpb * n_kv * hd;
  std::vector<float> hk(floats, 0.0f), hv(floats, 0.0f);
  const KvPool host_pool{hk.data(), hv.data(), tpb, n_kv, hd};
  std::vector<int32_t> table(blocks);
  std::iota(table.rbegin(), table.rend(), 0);
  std::vector<int32_t> positions(len);
  std::iota(positions.begin(), positions.end(), 0);
  const auto k_new = random_floats(len * n_kv * hd, 31, -3.0f, 3.0f),
             v_new = random_floats(len * n_kv * hd, 32);
  const auto q = random_floats(len * n_heads * hd, 33, -3.0f, 3.0f);
  std::vector<const int32_t*> tables(len, table.data());
  kv_write(host_pool, k_new.data(), v_new.data(), len, positions.data(), tables.data());
  std::vector<float> ref(q.size());
  attention(scalar_ctx(), q.data(), len, n_heads, host_pool, positions.data(), tables.data(), scale, 0,
            ref.data(), softcap);

  DeviceBuffer dk = testing::to_device(std::vector<float>(floats, 0.0f), *stream);
  DeviceBuffer dv = testing::to_device(std::vector<float>(floats, 0.0f), *stream);
  const DeviceKvPool pool{dk.as<float>(), dv.as<float>(), tpb, n_kv, hd};
  std::vector<int32_t> row_tables;
  for (int r = 0; r < len; ++r) row_tables.insert(row_tables.end(), table.begin(), table.end());
  DeviceBuffer dt = testing::to_device(row_tables, *stream), dp = testing::to_device(positions, *stream);
  DeviceBuffer dkn = testing::to_device(k_new, *stream), dvn = testing::to_device(v_new, *stream);
  DeviceBuffer dq = testing::to_device(q, *stream), dout = testing::poisoned(q.size() * 4, *stream);
  ASSERT_TRUE(kv_write(*stream, pool, dkn.as<float>(), dvn.as<float>(), len, dp.as<int32_t>(),
                       dt.as<int32_t>(), blocks)
                  .ok());
  ASSERT_TRUE(attention(*stream, dq.as<float>(), len, n_heads, pool, dp.as<int32_t>(), dt.as<int32_t>(),
                        blocks, scale, 0, dout.as<float>(), {}, softcap)
                  .ok());
  const auto out = testing::to_host<float>(dout, q.size(), *stream);
  double err = 0;
  for (size_t i = 0; i < q.size(); ++i) err = std::max(err, std::fabs(double(out[i]) - ref[i]));
  EXPECT_LE(err, 2e-5) << "soft-capped attention vs the CPU";
  // Without the cap the result differs (the cap is applied at all).
  DeviceBuffer plain = testing::poisoned(q.size() * 4, *stream);
  ASSERT_TRUE(attention(*stream, dq.as<float>(), len, n_heads, pool, dp.as<int32_t>(), dt.as<int32_t>(),
                        blocks, scale, 0, plain.as<float>())
                  .ok());
  EXPECT_FALSE(same_bits(testing::to_host<float>(plain, q.size(), *stream).data(), out.data(), q.size()));
  // The last query alone (decode): the same bits as inside the prefill call.
  const int64_t row = static_cast<int64_t>(n_heads) * hd;
  DeviceBuffer one = testing::poisoned(row * 4, *stream);
  ASSERT_TRUE(attention(*stream, dq.as<float>() + (len - 1) * row, 1, n_heads, pool,
                        dp.as<int32_t>() + len - 1, dt.as<int32_t>() + (len - 1) * blocks, blocks, scale, 0,
                        one.as<float>(), {}, softcap)
                  .ok());
  EXPECT_TRUE(
      same_bits(testing::to_host<float>(one, row, *stream).data(), out.data() + (len - 1) * row, row));
  // The split shapes with a workspace (a block per q head, a block per kv head): the same bits.
  const size_t pf = attention_partial_floats(len, n_heads, pool, blocks, 0);
  DeviceBuffer partials = testing::poisoned(pf * 4, *stream);
  DeviceBuffer counters =
      testing::to_device(std::vector<uint32_t>(static_cast<size_t>(len) * n_heads, 0u), *stream);
  const AttentionWorkspace ws{partials.as<float>(), pf, counters.as<uint32_t>(),
                              static_cast<size_t>(len) * n_heads};
  for (const AttentionShape shape : {AttentionShape::split, AttentionShape::kv_split}) {
    DeviceBuffer got = testing::poisoned(q.size() * 4, *stream);
    ASSERT_TRUE(attention(*stream, dq.as<float>(), len, n_heads, pool, dp.as<int32_t>(), dt.as<int32_t>(),
                          blocks, scale, 0, got.as<float>(), ws, softcap, shape)
                    .ok());
    EXPECT_TRUE(same_bits(testing::to_host<float>(got, q.size(), *stream).data(), out.data(), q.size()))
        << (shape == AttentionShape::split ? "split" : "kv_split");
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
