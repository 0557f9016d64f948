// The GPU's picks (pick_rows): greedy (ADR 0070) against the host's
// kernels::greedy_pick on rows of edge cases (tests/kernels/greedy_rows.h):
// the same index for every row, -1 where nothing is above -infinity, and a
// row's pick independent of the rows beside it, the workspace reused call after
// call (each row's counter back at zero); sampled (ADR 0072) against every
// score computed on the host with core/gumbel.h — the rule the Sampler's
// pruned scan is held to (tests/sampling/sampler_test.cpp). Skipped without a
// CUDA device.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "../greedy_rows.h"
#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

// A zeroed PickWorkspace for `rows` rows of `vocab`.
struct Workspace {
  DeviceBuffer best, index, counters;
  PickWorkspace view;
  Workspace(int64_t rows, int64_t vocab, const Stream& stream) {
    const int64_t pairs = rows * pick_slices(vocab, /*rules=*/true);
    best = testing::poisoned(pairs * 8, stream);
    index = testing::poisoned(pairs * 4, stream);
    counters = testing::to_device(std::vector<uint32_t>(rows, 0), stream);
    view = PickWorkspace{best.as<double>(), index.as<int32_t>(), counters.as<uint32_t>(), pairs, rows};
  }
};

TEST(CudaPick, GreedyEqualsTheHostPickOnEveryEdgeCase) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (int64_t vocab : {1L, 2L, 1000L, 1025L, 128256L, 151936L}) {
    const int64_t rows = 24;
    const std::vector<float> x = tandem::testing::greedy_edge_rows(rows, vocab, 11);
    DeviceBuffer xd = testing::to_device(x, *stream);
    DeviceBuffer picks = testing::poisoned(rows * 4, *stream);
    Workspace ws(rows, vocab, *stream);
    ASSERT_TRUE(pick_rows(*stream, xd.as<float>(), rows, vocab, nullptr, picks.as<int32_t>(), ws.view).ok());
    const std::vector<int32_t> got = testing::to_host<int32_t>(picks, rows, *stream);
    // A second destination (ADR 0090) gets the same picks.
    DeviceBuffer copy = testing::poisoned(rows * 4, *stream);
    ASSERT_TRUE(pick_rows(*stream, xd.as<float>(), rows, vocab, nullptr, picks.as<int32_t>(), ws.view,
                          copy.as<int32_t>())
                    .ok());
    EXPECT_EQ(testing::to_host<int32_t>(copy, rows, *stream), got) << "vocab " << vocab;
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], greedy_pick(x.data() + r * vocab, vocab)) << "vocab " << vocab << " row " << r;
      DeviceBuffer one = testing::poisoned(4, *stream);
      ASSERT_TRUE(
          pick_rows(*stream, xd.as<float>() + r * vocab, 1, vocab, nullptr, one.as<int32_t>(), ws.view).ok());
      EXPECT_EQ(testing::to_host<int32_t>(one, 1, *stream)[0], got[r]) << "vocab " << vocab << " row " << r;
    }
  }
}

// Sampled rows (a mix of temperatures, seeds and positions, greedy rows and
// rows whose rule needs the row among them) equal the host's score-by-score
// pick (-1 for the last), on the edge-case rows and on rows whose scores are
// close (small logits, so the noise decides).
TEST(CudaPick, SampledEqualsEveryScoreOnTheHost) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (int64_t vocab : {1L, 3L, 1000L, 8193L, 151936L}) {
    const int64_t rows = 36;
    std::vector<float> x = tandem::testing::greedy_edge_rows(rows, vocab, 5);
    for (int64_t i = 24 * vocab; i < rows * vocab; ++i)
      x[i] = static_cast<float>(i % 7) * 0.01f;  // near ties
    std::vector<PickRule> rules(rows);
    const float temperatures[] = {1.0f, 0.7f, 1.3f, 0.05f, 2.0f, 0.0f};
    for (int64_t r = 0; r < rows; ++r)  // every seventh row needs the row itself: no pick
      rules[r] = PickRule{temperatures[r % 6], r % 7 == 3 ? 1u : 0u, 1000003u * static_cast<uint64_t>(r) + 17,
                          5 + 3 * r};
    DeviceBuffer xd = testing::to_device(x, *stream);
    DeviceBuffer rd = DeviceBuffer();
    {
      auto b = DeviceBuffer::allocate(rules.size() * sizeof(PickRule));
      ASSERT_TRUE(b.ok());
      rd = std::move(b).value();
      ASSERT_TRUE(rd.upload(rules.data(), rules.size() * sizeof(PickRule), *stream).ok());
    }
    DeviceBuffer picks = testing::poisoned(rows * 4, *stream);
    Workspace ws(rows, vocab, *stream);
    for (int round = 0; round < 2; ++round) {  // the counters are back at zero after a call
      ASSERT_TRUE(
          pick_rows(*stream, xd.as<float>(), rows, vocab, rd.as<PickRule>(), picks.as<int32_t>(), ws.view)
              .ok());
      const std::vector<int32_t> got = testing::to_host<int32_t>(picks, rows, *stream);
      for (int64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * vocab;
        const int32_t want =
            rules[r].needs_row != 0 ? -1 : tandem::testing::every_score_pick(row, vocab, rules[r]);
        EXPECT_EQ(got[r], want) << "vocab " << vocab << " row " << r << " T " << rules[r].temperature;
      }
    }
  }
}

TEST(CudaPick, RefusesBadShapes) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  Workspace ws(2, 10000, *stream);
  EXPECT_FALSE(pick_rows(*stream, nullptr, 1, 0, nullptr, nullptr, ws.view).ok());
  EXPECT_FALSE(pick_rows(*stream, nullptr, -1, 10, nullptr, nullptr, ws.view).ok());
  EXPECT_TRUE(pick_rows(*stream, nullptr, 0, 10, nullptr, nullptr, ws.view).ok());
  // Too small a workspace: 3 rows, or rows longer than it was sized for.
  EXPECT_FALSE(pick_rows(*stream, nullptr, 3, 10000, nullptr, nullptr, ws.view).ok());
  EXPECT_FALSE(pick_rows(*stream, nullptr, 2, 2000000, nullptr, nullptr, ws.view).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
