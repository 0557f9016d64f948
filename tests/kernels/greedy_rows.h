// greedy_rows.h — logits rows that try a greedy pick's edge cases (ties, NaN,
// -infinity, signed zeros, the largest value first or last), for the tests
// that hold kernels::greedy_pick to the sampler's greedy pick and the GPU's
// pick_rows to kernels::greedy_pick (ADR 0070); and every_score_pick, a
// PickRule's pick with every Gumbel score computed (ADR 0072). Header-only.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "core/gumbel.h"
#include "kernels/ops.h"

namespace tandem::testing {

// `count` rows of `vocab` floats each; row r's case is r % 12.
inline std::vector<float> greedy_edge_rows(int64_t count, int64_t vocab, uint32_t seed) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-8.0f, 8.0f);
  std::uniform_int_distribution<int64_t> at(0, vocab - 1);
  std::vector<float> rows(static_cast<size_t>(count * vocab));
  for (int64_t r = 0; r < count; ++r) {
    float* x = rows.data() + r * vocab;
    for (int64_t i = 0; i < vocab; ++i) x[i] = u(rng);
    const int64_t a = at(rng), b = at(rng);
    switch (r % 12) {
      case 0:  // random: one clear maximum
        break;
      case 1:  // a tie: the lower index wins
        x[a] = x[b] = 9.0f;
        break;
      case 2:  // the maximum at the very end, NaN before it
        x[vocab - 1] = 20.0f;
        x[a] = nan;
        break;
      case 3:  // the maximum at index 0
        x[0] = 20.0f;
        break;
      case 4:  // every entry NaN: nothing to pick
        for (int64_t i = 0; i < vocab; ++i) x[i] = nan;
        break;
      case 5:  // every entry -infinity: nothing to pick
        for (int64_t i = 0; i < vocab; ++i) x[i] = -inf;
        break;
      case 6:  // -infinity and NaN with one finite value
        for (int64_t i = 0; i < vocab; ++i) x[i] = i % 2 != 0 ? -inf : nan;
        x[a] = -1e30f;
        break;
      case 7:  // signed zeros tie: the first one wins
        for (int64_t i = 0; i < vocab; ++i) x[i] = -1.0f;
        x[a] = -0.0f;
        x[b] = 0.0f;
        break;
      case 8:  // +infinity twice
        x[a] = x[b] = inf;
        break;
      case 9:  // many equal maxima
        for (int64_t i = 0; i < vocab; i += 3) x[i] = 8.5f;
        break;
      case 10:  // the maximum next to a NaN, ties with the largest finite float
        x[a] = std::numeric_limits<float>::max();
        x[b] = std::numeric_limits<float>::max();
        if (a > 0) x[a - 1] = nan;
        break;
      default:  // all equal
        for (int64_t i = 0; i < vocab; ++i) x[i] = 0.25f;
        break;
    }
  }
  return rows;
}

// A row's pick by `rule` (its needs_row ignored) with every score computed:
// greedy_pick at temperature 0, else the lowest id with the largest
// double(x / T) + G among values above -infinity, -1 if none — the rule the
// Sampler's pruned scan and the GPU's pick_rows are held to.
inline int32_t every_score_pick(const float* x, int64_t vocab, const kernels::PickRule& rule) {
  if (!(rule.temperature > 0.0f)) return kernels::greedy_pick(x, vocab);
  const uint64_t key = gumbel::position_key(rule.seed, rule.position);
  int32_t best = -1;
  double best_score = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) {
    const float value = x[i] / rule.temperature;
    if (!(value > -INFINITY)) continue;
    const double score =
        static_cast<double>(value) + gumbel::gumbel_of(gumbel::uniform_from(key, static_cast<int32_t>(i)));
    if (score > best_score) {
      best_score = score;
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

}  // namespace tandem::testing
