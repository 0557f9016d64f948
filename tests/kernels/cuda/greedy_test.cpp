// The GPU's greedy pick (greedy_pick_rows, ADR 0070) against the host's
// kernels::greedy_pick on rows of edge cases (tests/kernels/greedy_rows.h):
// the same index for every row, -1 where nothing is above -infinity, and a
// row's pick independent of the rows beside it. Skipped without a CUDA device.
#include <gtest/gtest.h>

#include <vector>

#include "../greedy_rows.h"
#include "cuda_test_util.h"
#include "kernels/ops.h"

namespace tandem::kernels::gpu {
namespace {

TEST(CudaGreedyPick, EqualsTheHostPickOnEveryEdgeCase) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  for (int64_t vocab : {1L, 2L, 1000L, 1025L, 128256L, 151936L}) {
    const int64_t rows = 24;
    const std::vector<float> x = tandem::testing::greedy_edge_rows(rows, vocab, 11);
    DeviceBuffer xd = testing::to_device(x, *stream);
    DeviceBuffer picks = testing::poisoned(rows * 4, *stream);
    ASSERT_TRUE(greedy_pick_rows(*stream, xd.as<float>(), rows, vocab, picks.as<int32_t>()).ok());
    const std::vector<int32_t> got = testing::to_host<int32_t>(picks, rows, *stream);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(got[r], greedy_pick(x.data() + r * vocab, vocab)) << "vocab " << vocab << " row " << r;
      DeviceBuffer one = testing::poisoned(4, *stream);
      ASSERT_TRUE(greedy_pick_rows(*stream, xd.as<float>() + r * vocab, 1, vocab, one.as<int32_t>()).ok());
      EXPECT_EQ(testing::to_host<int32_t>(one, 1, *stream)[0], got[r]) << "vocab " << vocab << " row " << r;
    }
  }
}

TEST(CudaGreedyPick, RefusesBadShapes) {
  TANDEM_REQUIRE_CUDA_DEVICE();
  Expected<Stream> stream = Stream::create();
  ASSERT_TRUE(stream.ok()) << stream.status().to_string();
  EXPECT_FALSE(greedy_pick_rows(*stream, nullptr, 1, 0, nullptr).ok());
  EXPECT_FALSE(greedy_pick_rows(*stream, nullptr, -1, 10, nullptr).ok());
  EXPECT_TRUE(greedy_pick_rows(*stream, nullptr, 0, 10, nullptr).ok());
}

}  // namespace
}  // namespace tandem::kernels::gpu
