#include "speculative/accept_walk.h"

#include <gtest/gtest.h>

#include "sampling/sampler.h"

namespace tandem::speculative {
namespace {

TEST(AcceptWalk, TableOfRounds) {
  struct Case {
    std::vector<int32_t> drafts;
    std::vector<int32_t> target;  // target's pick per row (K = drafts + 1 rows)
    int32_t accepted;
    std::vector<int32_t> emitted;
    int32_t rows_sampled;
  };
  const Case cases[] = {
      {{5, 6, 7}, {5, 6, 7, 8}, 3, {5, 6, 7, 8}, 4},  // all accepted + bonus
      {{5, 6, 7}, {9, 6, 7, 8}, 0, {9}, 1},           // first draft rejected
      {{5, 6, 7}, {5, 9, 7, 8}, 1, {5, 9}, 2},        // stops at first mismatch even if later rows agree
      {{5, 6, 7}, {5, 6, 9, 8}, 2, {5, 6, 9}, 3},    {{}, {4}, 0, {4}, 1},  // K = 1: plain decode
  };
  for (const auto& c : cases) {
    int32_t sampled = 0;
    AcceptResult r = accept_walk(c.drafts, [&](int32_t row) {
      EXPECT_EQ(row, sampled);  // rows are asked for in order
      ++sampled;
      return c.target[row];
    });
    EXPECT_EQ(r.accepted, c.accepted);
    EXPECT_EQ(r.emitted, c.emitted);
    EXPECT_EQ(sampled, c.rows_sampled);
  }
}

// A row that allows no token (sampling::kNoToken) ends the walk: the accepted drafts before it
// stand, nothing is emitted for it, and the rows after it are never sampled.
TEST(AcceptWalk, ARowWithNoTokenEndsTheWalkThere) {
  constexpr int32_t none = sampling::kNoToken;
  struct Case {
    std::vector<int32_t> target;
    std::vector<int32_t> emitted;
    int32_t rows_sampled;
  };
  const std::vector<int32_t> drafts = {5, 6, 7};
  const Case cases[] = {
      {{none, 6, 7, 8}, {}, 1},
      {{5, 6, none, 8}, {5, 6}, 3},
      {{5, 6, 7, none}, {5, 6, 7}, 4},
  };
  for (const auto& c : cases) {
    int32_t sampled = 0;
    AcceptResult r = accept_walk(drafts, [&](int32_t row) {
      ++sampled;
      return c.target[row];
    });
    EXPECT_TRUE(r.dead_end);
    EXPECT_EQ(r.emitted, c.emitted);
    EXPECT_EQ(r.accepted, static_cast<int32_t>(c.emitted.size()));
    EXPECT_EQ(sampled, c.rows_sampled);
  }
  EXPECT_FALSE(accept_walk(drafts, [](int32_t) { return 9; }).dead_end);
}

}  // namespace
}  // namespace tandem::speculative
