// CUDA row-wise ops (kernels/cuda_ops.h): RMSNorm and SiLU·mul against the
// CPU double-precision reference within the CPU tests' tolerances (docs/kernels.md),
// RoPE bitwise equal to the CPU rope(), and each row's bits independent of the
// number of rows in the call. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/cuda_pinned.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;
using testing::scalar_ctx;

TEST(CudaRmsNorm, MatchesTheCpuReferenceAndIsRowInvariant) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (int64_t dim : {7, 896, 4096, 4097}) {
    const int64_t rows = 37;
    const std::vector<float> x = random_floats(rows * dim, 3, -3.0f, 3.0f);
    const std::vector<float> w = random_floats(dim, 4, 0.5f, 1.5f);
    std::vector<float> ref(rows * dim);
    rmsnorm(scalar_ctx(), x.data(), w.data(), ref.data(), rows, dim, 1e-6f);
    DeviceBuffer xd = testing::to_device(x, *stream), wd = testing::to_device(w, *stream);
    DeviceBuffer yd = testing::poisoned(x.size() * 4, *stream);
    ASSERT_TRUE(rmsnorm(*stream, xd.as<float>(), wd.as<float>(), yd.as<float>(), rows, dim, 1e-6f).ok());
    const std::vector<float> y = testing::to_host<float>(yd, rows * dim, *stream);
    for (int64_t i = 0; i < rows * dim; ++i) {
      ASSERT_NEAR(y[i], ref[i], 3e-5 * std::fabs(ref[i]) + 1e-30) << "dim=" << dim << " i=" << i;
    }
    for (int64_t r : {0L, 5L, 36L}) {
      DeviceBuffer one = testing::poisoned(dim * 4, *stream);
      ASSERT_TRUE(
          rmsnorm(*stream, xd.as<float>() + r * dim, wd.as<float>(), one.as<float>(), 1, dim, 1e-6f).ok());
      const std::vector<float> alone = testing::to_host<float>(one, dim, *stream);
      ASSERT_TRUE(same_bits(alone.data(), y.data() + r * dim, dim)) << "dim=" << dim << " row " << r;
    }
    // In place gives the same bits.
    ASSERT_TRUE(rmsnorm(*stream, xd.as<float>(), wd.as<float>(), xd.as<float>(), rows, dim, 1e-6f).ok());
    const std::vector<float> in_place = testing::to_host<float>(xd, rows * dim, *stream);
    ASSERT_TRUE(same_bits(in_place.data(), y.data(), y.size())) << "dim=" << dim;
  }
}

TEST(CudaSiluMul, MatchesDoubleWithinEightUlpAndIgnoresTheCallRange) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t count = 100003;
  const std::vector<float> g = random_floats(count, 5, -12.0f, 12.0f),
                           u = random_floats(count, 6, -2.0f, 2.0f);
  DeviceBuffer gd = testing::to_device(g, *stream), ud = testing::to_device(u, *stream);
  DeviceBuffer out = testing::poisoned(count * 4, *stream);
  ASSERT_TRUE(silu_mul(*stream, gd.as<float>(), ud.as<float>(), out.as<float>(), count).ok());
  const std::vector<float> y = testing::to_host<float>(out, count, *stream);
  const double ulp = std::ldexp(1.0, -24);
  for (int64_t i = 0; i < count; ++i) {
    const double gi = g[i];
    const double ref = gi / (1.0 + std::exp(-gi)) * u[i];
    ASSERT_NEAR(y[i], ref, 8 * ulp * (std::fabs(ref) + std::fabs(gi * u[i])) + 1e-38) << "i=" << i;
  }
  DeviceBuffer part = testing::poisoned(1000 * 4, *stream);
  ASSERT_TRUE(silu_mul(*stream, gd.as<float>() + 777, ud.as<float>() + 777, part.as<float>(), 1000).ok());
  const std::vector<float> p = testing::to_host<float>(part, 1000, *stream);
  EXPECT_TRUE(same_bits(p.data(), y.data() + 777, 1000));
}

struct RopeCase {
  int n_heads, head_dim, rotary_dim;
  RopeLayout layout;
  RopeScaling::Kind scaling;
};

TEST(CudaRope, BitwiseEqualToTheCpuRopeAndRowInvariant) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const RopeCase cases[] = {{4, 128, 128, RopeLayout::neox, RopeScaling::Kind::llama3},
                            {3, 64, 32, RopeLayout::neox, RopeScaling::Kind::none},
                            {2, 64, 64, RopeLayout::interleaved, RopeScaling::Kind::linear}};
  for (const RopeCase& rc : cases) {
    RopeScaling scaling;
    scaling.kind = rc.scaling;
    scaling.factor = rc.scaling == RopeScaling::Kind::none ? 1.0 : 8.0;
    const std::vector<float> inv = rope_inv_freq(rc.rotary_dim, 500000.0, scaling);
    const int64_t rows = 33, width = static_cast<int64_t>(rc.n_heads) * rc.head_dim;
    std::vector<int32_t> pos(rows);
    for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(r < 8 ? r : (r * 7919) % 131072);
    const std::vector<float> x = random_floats(rows * width, 9, -2.0f, 2.0f);
    std::vector<float> ref = x;
    rope(scalar_ctx(), ref.data(), rows, rc.n_heads, rc.head_dim, pos.data(), inv.data(), rc.rotary_dim,
         rc.layout);
    DeviceBuffer xd = testing::to_device(x, *stream), pd = testing::to_device(pos, *stream),
                 fd = testing::to_device(inv, *stream);
    ASSERT_TRUE(rope(*stream, xd.as<float>(), rows, rc.n_heads, rc.head_dim, pd.as<int32_t>(), fd.as<float>(),
                     rc.rotary_dim, rc.layout)
                    .ok());
    const std::vector<float> y = testing::to_host<float>(xd, rows * width, *stream);
    for (int64_t r = 0; r < rows; ++r) {
      ASSERT_TRUE(same_bits(y.data() + r * width, ref.data() + r * width, width))
          << "head_dim=" << rc.head_dim << " row " << r << " position " << pos[r];
    }
    // One row alone: the same bits.
    DeviceBuffer one =
        testing::to_device(std::vector<float>(x.begin() + 20 * width, x.begin() + 21 * width), *stream);
    ASSERT_TRUE(rope(*stream, one.as<float>(), 1, rc.n_heads, rc.head_dim, pd.as<int32_t>() + 20,
                     fd.as<float>(), rc.rotary_dim, rc.layout)
                    .ok());
    const std::vector<float> alone = testing::to_host<float>(one, width, *stream);
    EXPECT_TRUE(same_bits(alone.data(), y.data() + 20 * width, width));
  }
}

// A graphed step's row inputs copied by its first kernel from mapped page-locked
// memory (ADR 0090): the first `rows` of each of five arrays, the tables, the rules;
// nothing else of dst is written.
TEST(CudaStageInputs, CopiesTheRowsTablesAndRulesFromMappedMemory) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const int64_t spacing = 16, rows = 3, table_ints = rows * 8, rule_words = 6 * rows;
  const int64_t words = 5 * spacing + table_ints;
  auto src = PinnedBuffer::allocate(sizeof(int32_t) * (words + rule_words), /*mapped=*/true);
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  int32_t* host = src->as<int32_t>();
  for (int64_t i = 0; i < words + rule_words; ++i) host[i] = static_cast<int32_t>(1000 + i);
  DeviceBuffer dst = testing::poisoned(sizeof(int32_t) * words, *stream);
  DeviceBuffer rules = testing::poisoned(sizeof(int32_t) * (rule_words + 2), *stream);
  const auto* device = static_cast<const int32_t*>(src->device_data());
  ASSERT_TRUE(stage_inputs(*stream, device, dst.as<int32_t>(), spacing, rows, table_ints, device + words,
                           rules.as<int32_t>(), sizeof(int32_t) * rule_words)
                  .ok());
  const std::vector<int32_t> got = testing::to_host<int32_t>(dst, words, *stream);
  for (int64_t i = 0; i < words; ++i) {
    const bool copied = i >= 5 * spacing || i % spacing < rows;
    EXPECT_EQ(got[i], copied ? host[i] : -1) << "word " << i;
  }
  const std::vector<int32_t> r = testing::to_host<int32_t>(rules, rule_words + 2, *stream);
  for (int64_t i = 0; i < rule_words + 2; ++i) EXPECT_EQ(r[i], i < rule_words ? host[words + i] : -1) << i;
  EXPECT_FALSE(
      stage_inputs(*stream, device, dst.as<int32_t>(), spacing, spacing + 1, 0, nullptr, nullptr, 0).ok());
  EXPECT_FALSE(stage_inputs(*stream, device, dst.as<int32_t>(), spacing, 1, 0, nullptr, nullptr, 3).ok());
}

TEST(CudaRowwiseArguments, BadShapesAreInvalidArgument) {
  const Stream stream;
  EXPECT_EQ(rmsnorm(stream, nullptr, nullptr, nullptr, 1, 0, 1e-6f).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(silu_mul(stream, nullptr, nullptr, nullptr, -1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(rope(stream, nullptr, 1, 2, 64, nullptr, nullptr, 63, RopeLayout::neox).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(rope(stream, nullptr, 1, 2, 1024, nullptr, nullptr, 64, RopeLayout::neox).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(rmsnorm(stream, nullptr, nullptr, nullptr, 0, 16, 1e-6f).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
