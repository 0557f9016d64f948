// CUDA paged attention (kernels/cuda_ops.h): kv_write places rows exactly where
// the CPU kv_write does; attention matches a double-precision softmax and a
// query's bits are the same alone (decode), in a verify block and in a whole
// prefill, across chunk boundaries, with GQA and a window. Skipped without a
// CUDA device. (First run on an H200 on 2026-12-02: all passed.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

struct AttentionCase {
  int n_heads, n_kv, head_dim, tokens_per_block, len, window;
};

// One sequence of `len` positions in a pool whose blocks are shuffled; the
// same K/V written on the host (CPU kv_write) and on the device.
struct Fixture {
  AttentionCase ac;
  std::vector<float> k, v, k_new, v_new, q;
  std::vector<int32_t> table;
  KvPool host_pool;
  DeviceBuffer dk, dv, dtable_rows, dpos, dq;
  DeviceKvPool pool;

  Fixture(const AttentionCase& c, const Stream& stream) : ac(c) {
    const int blocks = (c.len + c.tokens_per_block - 1) / c.tokens_per_block + 2;  // two spare blocks
    const size_t floats = static_cast<size_t>(blocks) * c.tokens_per_block * c.n_kv * c.head_dim;
    k.assign(floats, 0.0f);
    v.assign(floats, 0.0f);
    host_pool = KvPool{k.data(), v.data(), c.tokens_per_block, c.n_kv, c.head_dim};
    table.resize(blocks);
    std::iota(table.begin(), table.end(), 0);
    std::reverse(table.begin(), table.end());
    std::rotate(table.begin(), table.begin() + blocks / 3, table.end());
    const int64_t row = static_cast<int64_t>(c.n_kv) * c.head_dim;
    k_new = random_floats(c.len * row, 100, -2.0f, 2.0f);
    v_new = random_floats(c.len * row, 200);
    std::vector<int32_t> positions(c.len);
    std::iota(positions.begin(), positions.end(), 0);
    std::vector<const int32_t*> bt(c.len, table.data());
    kv_write(host_pool, k_new.data(), v_new.data(), c.len, positions.data(), bt.data());
    q = random_floats(static_cast<size_t>(c.len) * c.n_heads * c.head_dim, 300, -2.0f, 2.0f);

    dk = testing::to_device(std::vector<float>(floats, 0.0f), stream);
    dv = testing::to_device(std::vector<float>(floats, 0.0f), stream);
    pool = DeviceKvPool{dk.as<float>(), dv.as<float>(), c.tokens_per_block, c.n_kv, c.head_dim};
    // Every row uses the same table: a [len][blocks] array of copies.
    std::vector<int32_t> rows_tables;
    for (int r = 0; r < c.len; ++r) rows_tables.insert(rows_tables.end(), table.begin(), table.end());
    dtable_rows = testing::to_device(rows_tables, stream);
    dpos = testing::to_device(positions, stream);
    dq = testing::to_device(q, stream);
    DeviceBuffer dkn = testing::to_device(k_new, stream), dvn = testing::to_device(v_new, stream);
    const Status st = kv_write(stream, pool, dkn.as<float>(), dvn.as<float>(), c.len, dpos.as<int32_t>(),
                               dtable_rows.as<int32_t>(), blocks);
    EXPECT_TRUE(st.ok()) << st.to_string();
    EXPECT_TRUE(stream.synchronize().ok());
  }

  int64_t row_floats() const { return static_cast<int64_t>(ac.n_heads) * ac.head_dim; }

  // Queries at positions [first, first + count) in one call; split: one block
  // per (row, head, chunk) (a workspace), kv_split: one per (row, kv head,
  // chunk) (ADR 0087), serial: one block per (row, head) walks the chunks
  // (shapes forced: the automatic choice would take the tile shape for more
  // than 16 rows, which attention_tile_test.cpp compares with these).
  // bf16, when not null, gets the bf16 copy the kernel writes beside out (ADR 0056).
  std::vector<float> run(int first, int count, const Stream& stream, AttentionShape shape,
                         std::vector<uint16_t>* bf16 = nullptr) const {
    const bool split = shape != AttentionShape::serial;
    DeviceBuffer out = testing::poisoned(static_cast<size_t>(count * row_floats()) * 4, stream);
    DeviceBuffer out_bf16 = bf16 != nullptr
                                ? testing::poisoned(static_cast<size_t>(count * row_floats()) * 2, stream)
                                : DeviceBuffer();
    const int64_t stride = static_cast<int64_t>(table.size());
    AttentionWorkspace ws;
    if (split) {
      const size_t partials = attention_partial_floats(count, ac.n_heads, pool, stride, ac.window);
      EXPECT_GT(partials, 0u);
      if (partial_buffer.bytes() < partials * 4) partial_buffer = testing::poisoned(partials * 4, stream);
      const size_t counters = static_cast<size_t>(count) * ac.n_heads;
      if (counter_buffer.bytes() < counters * 4)
        counter_buffer = testing::to_device(std::vector<uint32_t>(counters, 0u), stream);
      ws = AttentionWorkspace{partial_buffer.as<float>(), partial_buffer.bytes() / 4,
                              counter_buffer.as<uint32_t>(), counter_buffer.bytes() / 4};
    }
    const Status st =
        attention(stream, dq.as<float>() + first * row_floats(), count, ac.n_heads, pool,
                  dpos.as<int32_t>() + first, dtable_rows.as<int32_t>() + first * table.size(), stride,
                  1.0f / std::sqrt(static_cast<float>(ac.head_dim)), ac.window, out.as<float>(), ws, 0.0f,
                  shape, bf16 != nullptr ? out_bf16.as<uint16_t>() : nullptr);
    EXPECT_TRUE(st.ok()) << st.to_string();
    if (bf16 != nullptr) *bf16 = testing::to_host<uint16_t>(out_bf16, count * row_floats(), stream);
    return testing::to_host<float>(out, count * row_floats(), stream);
  }
  // Shared by every split call of the fixture, as the forward shares one per
  // layer sequence: counters zero-filled once (the kernel leaves them zero).
  mutable DeviceBuffer partial_buffer, counter_buffer;

  // Double-precision softmax attention for (pos, head).
  std::vector<double> exact(int pos, int head) const {
    const int kvh = head / (ac.n_heads / ac.n_kv);
    const int lo = ac.window > 0 ? std::max(0, pos - ac.window + 1) : 0;
    const double scale = 1.0 / std::sqrt(static_cast<double>(static_cast<float>(ac.head_dim)));
    const float* qv = &q[pos * row_floats() + head * ac.head_dim];
    auto row = [&](const std::vector<float>& plane, int p) {
      return &plane[(static_cast<int64_t>(p) * ac.n_kv + kvh) * ac.head_dim];
    };
    std::vector<double> s;
    for (int p = lo; p <= pos; ++p) {
      double dot = 0;
      for (int d = 0; d < ac.head_dim; ++d) dot += static_cast<double>(qv[d]) * row(k_new, p)[d];
      s.push_back(dot * static_cast<float>(scale));
    }
    const double mx = *std::max_element(s.begin(), s.end());
    double sum = 0;
    for (double& x : s) sum += (x = std::exp(x - mx));
    std::vector<double> o(ac.head_dim, 0.0);
    for (int p = lo; p <= pos; ++p) {
      for (int d = 0; d < ac.head_dim; ++d) o[d] += s[p - lo] / sum * row(v_new, p)[d];
    }
    return o;
  }
};

// The shapes that walk 32-key chunks one block at a time (the tile shape is
// attention_tile_test.cpp's).
const AttentionShape kShapes[] = {AttentionShape::serial, AttentionShape::split, AttentionShape::kv_split};
const char* shape_name(AttentionShape shape) {
  return shape == AttentionShape::serial ? "serial" : shape == AttentionShape::split ? "split" : "kv_split";
}

// Chunk boundaries every 32 positions: 140 and 600 keys cross several (600:
// 19 chunks, the length of a decode step at a 600-token context); windows of
// 40 and 100 start mid-chunk. head_dim 36 and 30 take the split and serial
// shapes only (no tile): 36 stages with 16-byte copies, 30 with scalar loads.
const AttentionCase kCases[] = {{4, 2, 64, 16, 140, 0},  {8, 8, 128, 32, 100, 40},  {2, 1, 256, 16, 70, 0},
                                {14, 2, 64, 16, 600, 0}, {8, 2, 128, 16, 300, 100}, {3, 1, 36, 16, 90, 0},
                                {2, 2, 30, 8, 75, 20}};

TEST(CudaKvWrite, PlacesRowsExactlyWhereTheCpuDoes) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const AttentionCase& c : kCases) {
    const Fixture f(c, *stream);
    const std::vector<float> k = testing::to_host<float>(f.dk, f.k.size(), *stream);
    const std::vector<float> v = testing::to_host<float>(f.dv, f.v.size(), *stream);
    EXPECT_TRUE(same_bits(k.data(), f.k.data(), k.size())) << "head_dim=" << c.head_dim;
    EXPECT_TRUE(same_bits(v.data(), f.v.data(), v.size())) << "head_dim=" << c.head_dim;
  }
}

TEST(CudaAttention, MatchesDoubleSoftmax) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const AttentionCase& c : kCases) {
    const Fixture f(c, *stream);
    const std::vector<float> all = f.run(0, c.len, *stream, AttentionShape::serial);
    // 2e-5 at head_dim 64 (the CPU bound), scaled with head_dim.
    const double tol = 2e-5 * std::max(1.0, c.head_dim / 64.0);
    for (int pos : {0, 1, 31, 32, 33, 64, c.len - 1}) {
      for (int h = 0; h < c.n_heads; ++h) {
        const std::vector<double> ref = f.exact(pos, h);
        for (int d = 0; d < c.head_dim; ++d) {
          ASSERT_NEAR(all[pos * f.row_floats() + h * c.head_dim + d], ref[d], tol)
              << "head_dim=" << c.head_dim << " pos=" << pos << " head=" << h << " d=" << d;
        }
      }
    }
  }
}

TEST(CudaAttention, QueryBitsIndependentOfGroupingAndLaunchShape) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const AttentionCase& c : kCases) {
    const Fixture f(c, *stream);
    const std::vector<float> prefill = f.run(0, c.len, *stream, AttentionShape::serial);
    const int64_t w = f.row_floats();
    // The whole prefill with a block per chunk: the same bits as the serial walk.
    for (const AttentionShape shape : {AttentionShape::split, AttentionShape::kv_split}) {
      const std::vector<float> prefill_split = f.run(0, c.len, *stream, shape);
      ASSERT_TRUE(same_bits(prefill_split.data(), prefill.data(), prefill.size()))
          << shape_name(shape) << " prefill != serial prefill, len " << c.len;
    }
    for (int pos : {0, 1, 30, 31, 32, 33, 63, 64, 65, 127, 128, 129, 299, 511, 512, c.len - 1}) {
      if (pos >= c.len) continue;
      for (const AttentionShape shape : kShapes) {
        const std::vector<float> decode = f.run(pos, 1, *stream, shape);
        ASSERT_TRUE(same_bits(decode.data(), prefill.data() + pos * w, w))
            << "decode != prefill at " << pos << " (" << shape_name(shape) << ")";
        const int first = std::max(0, pos - 2), count = std::min(c.len - first, 5);  // a verify block
        const std::vector<float> verify = f.run(first, count, *stream, shape);
        ASSERT_TRUE(same_bits(verify.data() + (pos - first) * w, prefill.data() + pos * w, w))
            << "verify != prefill at " << pos << " (" << shape_name(shape) << ")";
      }
    }
    // The split kernels leave their counters at zero: the workspace is reusable.
    for (const AttentionShape shape : {AttentionShape::split, AttentionShape::kv_split}) {
      const std::vector<float> again = f.run(0, c.len, *stream, shape);
      ASSERT_TRUE(same_bits(again.data(), prefill.data(), prefill.size()))
          << "second " << shape_name(shape) << " call differs";
    }
  }
}

// The bf16 copy the split and serial kernels write beside their output (the o
// projection's GEMM input, ADR 0056) is to_bf16's bits of that output, and the
// f32 output is unchanged by it.
TEST(CudaAttention, Bf16CopyIsToBf16OfTheOutput) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const AttentionCase& c : kCases) {
    const Fixture f(c, *stream);
    for (const AttentionShape shape : kShapes) {
      for (const int first : {0, c.len - 3}) {
        const int count = first == 0 ? c.len : 3;
        const std::vector<float> plain = f.run(first, count, *stream, shape);
        std::vector<uint16_t> bf16;
        const std::vector<float> out = f.run(first, count, *stream, shape, &bf16);
        ASSERT_TRUE(same_bits(out.data(), plain.data(), plain.size()))
            << "len " << c.len << " " << shape_name(shape);
        DeviceBuffer d_out = testing::to_device(out, *stream);
        DeviceBuffer d_ref = testing::poisoned(out.size() * 2, *stream);
        ASSERT_TRUE(
            to_bf16(*stream, d_out.as<float>(), d_ref.as<uint16_t>(), static_cast<int64_t>(out.size())).ok());
        const std::vector<uint16_t> ref = testing::to_host<uint16_t>(d_ref, out.size(), *stream);
        ASSERT_EQ(ref.size(), bf16.size());
        EXPECT_EQ(std::memcmp(ref.data(), bf16.data(), ref.size() * 2), 0)
            << "len " << c.len << " " << shape_name(shape) << " first " << first;
      }
    }
  }
}

TEST(CudaAttention, SmallWorkspaceFallsBackToTheSameBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  const AttentionCase c{4, 2, 64, 16, 140, 0};
  const Fixture f(c, *stream);
  const std::vector<float> serial = f.run(0, c.len, *stream, AttentionShape::serial);
  DeviceBuffer small = testing::to_device(std::vector<float>(64, 0.0f), *stream);
  DeviceBuffer counters = testing::to_device(std::vector<uint32_t>(c.len * c.n_heads, 0u), *stream);
  DeviceBuffer out = testing::poisoned(static_cast<size_t>(c.len * f.row_floats()) * 4, *stream);
  const Status st = attention(*stream, f.dq.as<float>(), c.len, c.n_heads, f.pool, f.dpos.as<int32_t>(),
                              f.dtable_rows.as<int32_t>(), static_cast<int64_t>(f.table.size()),
                              1.0f / std::sqrt(64.0f), 0, out.as<float>(),
                              AttentionWorkspace{small.as<float>(), 64, counters.as<uint32_t>(),
                                                 static_cast<size_t>(c.len * c.n_heads)},
                              0.0f, AttentionShape::split);  // too small a workspace: serial
  ASSERT_TRUE(st.ok()) << st.to_string();
  const std::vector<float> got = testing::to_host<float>(out, serial.size(), *stream);
  EXPECT_TRUE(same_bits(got.data(), serial.data(), serial.size()));
}

TEST(CudaAttentionArguments, BadShapesAreInvalidArgument) {
  const Stream stream;
  const DeviceKvPool pool{nullptr, nullptr, 16, 2, 64};
  EXPECT_EQ(attention(stream, nullptr, 1, 3, pool, nullptr, nullptr, 1, 1.0f, 0, nullptr).code(),
            StatusCode::kInvalidArgument);  // 3 heads over 2 kv heads
  const DeviceKvPool wide{nullptr, nullptr, 16, 2, 1024};
  EXPECT_EQ(attention(stream, nullptr, 1, 2, wide, nullptr, nullptr, 1, 1.0f, 0, nullptr).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(kv_write(stream, DeviceKvPool{}, nullptr, nullptr, 1, nullptr, nullptr, 1).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(attention(stream, nullptr, 1, 2, pool, nullptr, nullptr, 1, 1.0f, 0, nullptr,
                      AttentionWorkspace{reinterpret_cast<float*>(uintptr_t{4}), 100, nullptr, 0})
                .code(),
            StatusCode::kInvalidArgument);  // a misaligned workspace
  EXPECT_TRUE(attention(stream, nullptr, 0, 2, pool, nullptr, nullptr, 1, 1.0f, 0, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
