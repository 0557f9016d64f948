// The tile shape of the CUDA attention (ADR 0043): every query's output is
// bitwise equal (memcmp) to the serial and split shapes' — i.e. a prefill row
// equals the decode row — across chunk boundaries, with GQA groups that do
// and do not divide the tile, windows, head_dim 64/128/256, chunked prefill,
// rows of two sequences in one call (tiles whose rows read different tables)
// and rows out of order. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "cuda_test_util.h"

namespace tandem::kernels::gpu {
namespace {

using testing::random_floats;
using testing::same_bits;

struct TileCase {
  int n_heads, n_kv, head_dim, tokens_per_block, len, window;
};

std::string describe(const TileCase& c) {
  return "heads " + std::to_string(c.n_heads) + "/" + std::to_string(c.n_kv) + " head_dim " +
         std::to_string(c.head_dim) + " tpb " + std::to_string(c.tokens_per_block) + " len " +
         std::to_string(c.len) + " window " + std::to_string(c.window);
}

// Two sequences of `len` positions each (different K/V, q), their blocks
// interleaved and shuffled in one pool.
struct TwoSequences {
  TileCase c;
  int blocks;  // per sequence
  std::vector<int32_t> tables[2];
  DeviceBuffer dk, dv, dq[2];
  DeviceKvPool pool;

  TwoSequences(const TileCase& tc, const Stream& stream) : c(tc) {
    blocks = (c.len + c.tokens_per_block - 1) / c.tokens_per_block + 1;
    const int total = 2 * blocks;
    std::vector<int32_t> order(total);
    std::iota(order.begin(), order.end(), 0);
    std::reverse(order.begin(), order.end());
    std::rotate(order.begin(), order.begin() + total / 3, order.end());
    for (int b = 0; b < blocks; ++b) {
      tables[0].push_back(order[2 * b]);
      tables[1].push_back(order[2 * b + 1]);
    }
    const size_t floats = static_cast<size_t>(total) * c.tokens_per_block * c.n_kv * c.head_dim;
    dk = testing::to_device(std::vector<float>(floats, 0.0f), stream);
    dv = testing::to_device(std::vector<float>(floats, 0.0f), stream);
    pool = DeviceKvPool{dk.as<float>(), dv.as<float>(), c.tokens_per_block, c.n_kv, c.head_dim};
    const int64_t kv_row = static_cast<int64_t>(c.n_kv) * c.head_dim;
    std::vector<int32_t> positions(c.len);
    std::iota(positions.begin(), positions.end(), 0);
    DeviceBuffer dpos = testing::to_device(positions, stream);
    for (int s = 0; s < 2; ++s) {
      std::vector<int32_t> rows_tables;
      for (int r = 0; r < c.len; ++r)
        rows_tables.insert(rows_tables.end(), tables[s].begin(), tables[s].end());
      DeviceBuffer dt = testing::to_device(rows_tables, stream);
      DeviceBuffer kn = testing::to_device(random_floats(c.len * kv_row, 100 + s, -2.0f, 2.0f), stream);
      DeviceBuffer vn = testing::to_device(random_floats(c.len * kv_row, 200 + s), stream);
      const Status st = kv_write(stream, pool, kn.as<float>(), vn.as<float>(), c.len, dpos.as<int32_t>(),
                                 dt.as<int32_t>(), blocks);
      EXPECT_TRUE(st.ok()) << st.to_string();
      dq[s] = testing::to_device(
          random_floats(static_cast<size_t>(c.len) * c.n_heads * c.head_dim, 300 + s, -2.0f, 2.0f), stream);
      EXPECT_TRUE(stream.synchronize().ok());
    }
  }

  int64_t row_floats() const { return static_cast<int64_t>(c.n_heads) * c.head_dim; }

  // One call over rows (sequence, position), in the given order; returns
  // [rows][n_heads][head_dim].
  std::vector<float> run(const std::vector<std::pair<int, int>>& rows, AttentionShape shape,
                         const Stream& stream) const {
    const int64_t n = static_cast<int64_t>(rows.size()), w = row_floats();
    std::vector<float> q_host(static_cast<size_t>(n * w));
    std::vector<int32_t> positions, row_tables;
    std::vector<float> q_all[2] = {testing::to_host<float>(dq[0], c.len * w, stream),
                                   testing::to_host<float>(dq[1], c.len * w, stream)};
    for (int64_t r = 0; r < n; ++r) {
      const auto [s, p] = rows[r];
      std::copy_n(q_all[s].begin() + p * w, w, q_host.begin() + r * w);
      positions.push_back(p);
      row_tables.insert(row_tables.end(), tables[s].begin(), tables[s].end());
    }
    DeviceBuffer q = testing::to_device(q_host, stream), pos = testing::to_device(positions, stream);
    DeviceBuffer tab = testing::to_device(row_tables, stream);
    DeviceBuffer out = testing::poisoned(static_cast<size_t>(n * w) * 4, stream);
    AttentionWorkspace ws;
    DeviceBuffer partials, counters;
    if (shape == AttentionShape::split || shape == AttentionShape::kv_split) {
      const size_t pf = attention_partial_floats(n, c.n_heads, pool, blocks, c.window);
      partials = testing::poisoned(pf * 4, stream);
      counters = testing::to_device(std::vector<uint32_t>(static_cast<size_t>(n) * c.n_heads, 0u), stream);
      ws = AttentionWorkspace{partials.as<float>(), pf, counters.as<uint32_t>(),
                              static_cast<size_t>(n) * c.n_heads};
    }
    const Status st = attention(stream, q.as<float>(), n, c.n_heads, pool, pos.as<int32_t>(),
                                tab.as<int32_t>(), blocks, 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                c.window, out.as<float>(), ws, 0.0f, shape);
    EXPECT_TRUE(st.ok()) << st.to_string();
    return testing::to_host<float>(out, static_cast<size_t>(n * w), stream);
  }
};

std::vector<std::pair<int, int>> positions_of(int seq, int first, int count) {
  std::vector<std::pair<int, int>> rows;
  for (int p = first; p < first + count; ++p) rows.emplace_back(seq, p);
  return rows;
}

// Llama-3.1-8B's attention (32/8, 128), Qwen2.5-0.5B's (14/2, 64: a group of 7
// does not divide the 64 slots), Gemma's head_dim 256 with a group of 8, MHA,
// windows starting mid-chunk, blocks of 16 (a chunk spans two) and 32.
const TileCase kTileCases[] = {{32, 8, 128, 16, 300, 0}, {14, 2, 64, 16, 700, 0},   {8, 1, 256, 16, 150, 0},
                               {8, 8, 128, 32, 200, 40}, {8, 2, 128, 16, 333, 100}, {4, 4, 64, 32, 97, 0},
                               {16, 1, 64, 16, 260, 50}};

TEST(CudaAttentionTile, PrefillRowsEqualSerialAndDecodeRows) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const TileCase& c : kTileCases) {
    const TwoSequences f(c, *stream);
    const int64_t w = f.row_floats();
    const auto rows = positions_of(0, 0, c.len);
    const std::vector<float> tile = f.run(rows, AttentionShape::tile, *stream);
    const std::vector<float> serial = f.run(rows, AttentionShape::serial, *stream);
    ASSERT_TRUE(same_bits(tile.data(), serial.data(), tile.size())) << "tile != serial, " << describe(c);
    const std::vector<float> automatic = f.run(rows, AttentionShape::automatic, *stream);
    ASSERT_TRUE(same_bits(automatic.data(), serial.data(), tile.size()))
        << "automatic != serial, " << describe(c);
    for (int pos : {0, 1, 15, 16, 31, 32, 33, 63, 64, 95, 96, 129, c.len / 2, c.len - 2, c.len - 1}) {
      if (pos >= c.len) continue;
      for (const AttentionShape decode_shape :
           {AttentionShape::serial, AttentionShape::split, AttentionShape::kv_split}) {
        const std::vector<float> decode = f.run(positions_of(0, pos, 1), decode_shape, *stream);
        ASSERT_TRUE(same_bits(decode.data(), tile.data() + pos * w, w))
            << "decode != tile prefill at " << pos << ", " << describe(c);
      }
    }
    // A verify-sized block in the tile shape.
    const std::vector<float> verify = f.run(positions_of(0, c.len - 5, 5), AttentionShape::tile, *stream);
    ASSERT_TRUE(same_bits(verify.data(), tile.data() + (c.len - 5) * w, 5 * w)) << describe(c);
  }
}

TEST(CudaAttentionTile, ChunkedPrefillAndOrderDoNotChangeBits) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const TileCase& c : kTileCases) {
    const TwoSequences f(c, *stream);
    const int64_t w = f.row_floats();
    const std::vector<float> whole = f.run(positions_of(0, 0, c.len), AttentionShape::serial, *stream);
    // A chunk starting mid-chunk (37) and one of 64 rows at the end.
    for (const auto& [first, count] :
         {std::pair<int, int>{37, std::min(100, c.len - 37)}, std::pair<int, int>{c.len - 64, 64}}) {
      const std::vector<float> part = f.run(positions_of(0, first, count), AttentionShape::tile, *stream);
      ASSERT_TRUE(same_bits(part.data(), whole.data() + first * w, count * w))
          << "chunk at " << first << ", " << describe(c);
    }
    // Rows in reverse order (one table, so the tiles still share K/V).
    auto reversed = positions_of(0, 0, c.len);
    std::reverse(reversed.begin(), reversed.end());
    const std::vector<float> rev = f.run(reversed, AttentionShape::tile, *stream);
    for (int r = 0; r < c.len; ++r)
      ASSERT_TRUE(same_bits(rev.data() + r * w, whole.data() + (c.len - 1 - r) * w, w))
          << "reversed row " << r << ", " << describe(c);
  }
}

TEST(CudaAttentionTile, RowsOfTwoSequencesInOneCall) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (const TileCase& c : kTileCases) {
    const TwoSequences f(c, *stream);
    const int64_t w = f.row_floats();
    const std::vector<float> whole[2] = {f.run(positions_of(0, 0, c.len), AttentionShape::serial, *stream),
                                         f.run(positions_of(1, 0, c.len), AttentionShape::serial, *stream)};
    // Concatenated (a tile straddles the boundary) and interleaved (every
    // tile mixes the two tables: one pass per row).
    std::vector<std::pair<int, int>> concat = positions_of(0, 0, 45), interleaved;
    for (const auto& r : positions_of(1, 10, c.len - 10)) concat.push_back(r);
    for (int p = 0; p < c.len; ++p) interleaved.emplace_back(p % 2, p);
    for (const auto* rows : {&concat, &interleaved}) {
      const std::vector<float> got = f.run(*rows, AttentionShape::tile, *stream);
      for (size_t r = 0; r < rows->size(); ++r) {
        const auto [s, p] = (*rows)[r];
        ASSERT_TRUE(same_bits(got.data() + r * w, whole[s].data() + p * w, w))
            << "row " << r << " (sequence " << s << ", position " << p << "), "
            << (rows == &concat ? "concatenated" : "interleaved") << ", " << describe(c);
      }
    }
  }
}

TEST(CudaAttentionTile, GeometryOutsideTheTileFallsBack) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  // head_dim 96 and a group of 128 have no tile: a tile request runs the serial shape.
  for (const TileCase& c : {TileCase{4, 2, 96, 16, 80, 0}, TileCase{128, 1, 64, 16, 40, 0}}) {
    const TwoSequences f(c, *stream);
    const auto rows = positions_of(0, 0, c.len);
    const std::vector<float> tile = f.run(rows, AttentionShape::tile, *stream);
    const std::vector<float> serial = f.run(rows, AttentionShape::serial, *stream);
    ASSERT_TRUE(same_bits(tile.data(), serial.data(), tile.size())) << describe(c);
  }
}

}  // namespace
}  // namespace tandem::kernels::gpu
