#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "../kernels/greedy_rows.h"
#include "kernels/ops.h"

namespace tandem::sampling {
namespace {

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  double mx = -1e300, total = 0;
  for (float l : logits) mx = std::max(mx, double(l) / temperature);
  std::vector<double> p;
  for (float l : logits) p.push_back(std::exp(double(l) / temperature - mx)), total += p.back();
  for (double& v : p) v /= total;
  return p;
}

// Chi-square goodness of fit of Gumbel-max draws (one per position, fixed
// seed) against softmax probabilities. 7 degrees of freedom: the 0.1%
// critical value is 24.32, so a correct sampler fails with probability 1e-3
// for a random seed — and never for this fixed one.
void expect_matches_softmax(float temperature) {
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 1.5f, -0.5f, 3.0f};
  const auto probs = softmax(logits, temperature);
  SamplingParams params;
  params.temperature = temperature;
  params.seed = 1234;
  Sampler sampler;
  const int draws = 100000;
  std::vector<int> counts(logits.size(), 0);
  for (int pos = 0; pos < draws; ++pos) ++counts[sampler.pick(logits, params, {}, pos)];
  double chi2 = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    const double expected = probs[i] * draws;
    chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
  }
  EXPECT_LT(chi2, 24.32) << "temperature " << temperature;
}

TEST(Sampler, GumbelMaxFrequenciesMatchSoftmax) {
  expect_matches_softmax(1.0f);
  expect_matches_softmax(0.7f);
}

// The pick skips most ids without computing their noise; it must still equal
// the exhaustive argmax of logit + G(seed, position, id), lowest id on ties.
int32_t exhaustive_pick(const std::vector<float>& logits, uint64_t seed, int64_t position) {
  int32_t best = -1;
  double best_score = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (!(logits[i] > -INFINITY)) continue;
    const double score = double(logits[i]) + gumbel_noise(seed, position, int32_t(i));
    if (score > best_score) best_score = score, best = int32_t(i);
  }
  return best;
}

TEST(Sampler, PrunedGumbelMaxEqualsExhaustive) {
  SamplingParams params;
  params.temperature = 1.0f;  // rows below are already "processed"
  Sampler sampler;
  uint64_t state = 7;
  auto next_unit = [&] {  // deterministic LCG in [0, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return double(state >> 11) * 0x1.0p-53;
  };
  int rows = 0;
  for (double scale : {0.1, 1.0, 5.0, 30.0, 1e6}) {
    for (int shape = 0; shape < 3; ++shape) {
      std::vector<float> logits(5000);
      for (size_t i = 0; i < logits.size(); ++i) {
        const double v = (next_unit() + next_unit() + next_unit() - 1.5) * scale;
        logits[i] = shape == 1 ? std::round(float(v)) : float(v);  // shape 1: many exact ties
        if (shape == 2 && i % 3 == 0) logits[i] = -INFINITY;       // shape 2: a masked third
      }
      for (int64_t pos = 0; pos < 40; ++pos) {
        params.seed = 1000 + rows;
        ASSERT_EQ(sampler.pick(logits, params, {}, pos), exhaustive_pick(logits, params.seed, pos))
            << "scale " << scale << " shape " << shape << " position " << pos;
      }
      ++rows;
    }
  }
  std::vector<float> flat(3000, 2.5f);  // every logit equal: the noise alone decides
  for (int64_t pos = 0; pos < 40; ++pos) {
    params.seed = 5;
    ASSERT_EQ(sampler.pick(flat, params, {}, pos), exhaustive_pick(flat, 5, pos));
  }
}

// A request with only a temperature (SamplingParams::plain_sampled) picks by
// kernels::PickRule's rule, which a GPU forward computes on the device (ADR
// 0072): the exhaustive Gumbel-max over the raw row divided by the temperature.
TEST(Sampler, PlainSampledPickIsThePickRule) {
  SamplingParams params;
  Sampler sampler;
  std::vector<float> logits(4000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 2654435761u) % 1000) * 0.013f - 6.0f;
  logits[17] = -INFINITY;
  logits[18] = std::numeric_limits<float>::quiet_NaN();
  for (float t : {0.3f, 1.0f, 1.7f}) {
    params.temperature = t;
    ASSERT_TRUE(params.plain_sampled());
    std::vector<float> scaled(logits.size());
    for (size_t i = 0; i < logits.size(); ++i) scaled[i] = logits[i] / t;
    for (int64_t pos = 0; pos < 30; ++pos) {
      params.seed = 77 + pos;
      EXPECT_EQ(sampler.pick(logits, params, {}, pos), exhaustive_pick(scaled, params.seed, pos)) << t;
    }
  }
  params.top_p = 0.9f;
  EXPECT_FALSE(params.plain_sampled());
  params.top_p = 1.0f;
  params.top_k = 40;
  EXPECT_FALSE(params.plain_sampled());
  params.top_k = 0;
  params.temperature = 0.0f;
  EXPECT_FALSE(params.plain_sampled());
  EXPECT_TRUE(params.plain_greedy());
}

TEST(Sampler, NoiseIsAPureFunctionOfSeedPositionToken) {
  EXPECT_EQ(gumbel_noise(1, 5, 7), gumbel_noise(1, 5, 7));
  EXPECT_NE(gumbel_noise(1, 5, 7), gumbel_noise(2, 5, 7));
  EXPECT_NE(gumbel_noise(1, 5, 7), gumbel_noise(1, 6, 7));
  EXPECT_NE(gumbel_noise(1, 5, 7), gumbel_noise(1, 5, 8));
  for (int t = 0; t < 1000; ++t) {
    const double u = noise_uniform(99, t, t * 31);
    EXPECT_GT(u, 0.0);
    EXPECT_LT(u, 1.0);
  }
}

TEST(Sampler, SamePositionSamePickAcrossCallsAndInstances) {
  std::vector<float> logits(1000);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(float(i)) * 3;
  SamplingParams params;
  params.temperature = 0.8f;
  params.top_p = 0.9f;
  params.seed = 42;
  Sampler a, b;
  for (int pos = 0; pos < 200; ++pos) {
    const int32_t first = a.pick(logits, params, {}, pos);
    EXPECT_EQ(first, a.pick(logits, params, {}, pos));
    EXPECT_EQ(first, b.pick(logits, params, {}, pos));
  }
}

TEST(Sampler, GreedyIsArgmaxWithLowestIdOnTies) {
  SamplingParams params;
  params.temperature = 0.0f;
  Sampler s;
  EXPECT_EQ(s.pick(std::vector<float>{1, 5, 5, 2}, params, {}, 0), 1);
  params.logit_bias = {{3, 10.0f}};
  EXPECT_EQ(s.pick(std::vector<float>{1, 5, 5, 2}, params, {}, 0), 3);
}

// A temperature below kGreedyTemperature is greedy (vLLM's rule), 0 included. Dividing by 1e-39 (a
// denormal) sent every logit to +-infinity: the pick was the lowest id with a positive logit, or no
// token at all when every logit was negative. Now the pick, the logprobs and the top alternatives are
// those of temperature 0, whatever the seed and position; 1e-5 itself still samples.
// A plain greedy request's pick is kernels::greedy_pick of the model row
// (what a GPU forward computes on the device, ADR 0070), -1 being kNoToken.
TEST(Sampler, PlainGreedyPickIsKernelsGreedyPick) {
  Sampler sampler;
  SamplingParams p;
  p.temperature = 0.0f;
  ASSERT_TRUE(p.plain_greedy());
  for (int64_t vocab : {1L, 2L, 1000L, 1025L}) {
    const int64_t rows = 36;
    const std::vector<float> x = tandem::testing::greedy_edge_rows(rows, vocab, 7);
    for (int64_t r = 0; r < rows; ++r) {
      const std::span<const float> row(x.data() + r * vocab, static_cast<size_t>(vocab));
      const int32_t want = kernels::greedy_pick(row.data(), vocab);
      EXPECT_EQ(sampler.pick(row, p, {}, 0), want < 0 ? kNoToken : want) << "vocab " << vocab << " row " << r;
    }
  }
  SamplingParams biased = p;
  biased.logit_bias.push_back({0, 1.0f});
  SamplingParams penalised = p;
  penalised.presence_penalty = 0.5f;
  SamplingParams warm = p;
  warm.temperature = 0.7f;
  EXPECT_FALSE(biased.plain_greedy());
  EXPECT_FALSE(penalised.plain_greedy());
  EXPECT_FALSE(warm.plain_greedy());
}

TEST(Sampler, TemperaturesTooSmallToDivideByAreGreedy) {
  std::vector<float> mixed(300), negative(300);
  for (size_t i = 0; i < mixed.size(); ++i) {
    mixed[i] = std::sin(float(i) * 0.7f) * 20.0f;
    negative[i] = -50.0f - std::cos(float(i)) * 10.0f;
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  greedy.top_logprobs = 3;
  greedy.logit_bias = {{7, 2.5f}};
  greedy.repetition_penalty = 1.2f;
  const std::vector<int32_t> generated = {5, 9, 5};
  Sampler s;
  for (const float temperature :
       {std::numeric_limits<float>::denorm_min(), 1e-39f, 1e-30f, 1e-7f, std::nextafter(1e-5f, 0.0f)}) {
    SamplingParams tiny = greedy;
    tiny.temperature = temperature;
    EXPECT_TRUE(tiny.greedy()) << temperature;
    for (const auto* row : {&mixed, &negative}) {
      const SampleResult want = s.sample(*row, greedy, {generated, generated}, 4, true);
      ASSERT_NE(want.token, kNoToken);
      for (int64_t position = 0; position < 50; ++position) {
        tiny.seed = static_cast<uint64_t>(position) * 7919;
        const SampleResult got = s.sample(*row, tiny, {generated, generated}, position, true);
        ASSERT_EQ(got.token, want.token) << "temperature " << temperature << " position " << position;
        EXPECT_EQ(got.logprob, want.logprob);
        ASSERT_EQ(got.top.size(), want.top.size());
        for (size_t i = 0; i < got.top.size(); ++i) {
          EXPECT_EQ(got.top[i].token, want.top[i].token);
          EXPECT_EQ(got.top[i].logprob, want.top[i].logprob);
        }
      }
    }
  }
  SamplingParams at_threshold;
  at_threshold.temperature = kGreedyTemperature;
  EXPECT_FALSE(at_threshold.greedy());
  at_threshold.temperature = 0.8f;
  EXPECT_FALSE(at_threshold.greedy());
}

TEST(Sampler, MaskedTokensAreNeverPicked) {
  std::vector<float> logits = {0.0f, 0.1f, 0.2f, 0.3f};
  SamplingParams params;
  params.temperature = 1.0f;
  params.top_k = 2;
  Sampler s;
  for (int pos = 0; pos < 2000; ++pos) {
    const int32_t t = s.pick(logits, params, {}, pos);
    EXPECT_TRUE(t == 2 || t == 3) << t;
  }
}

// A banned token (bias kNeverProduced) is never picked, greedy or sampled, whatever its logit and any
// other bias on it; every processor keeps it at -infinity (no NaN), and the logprobs stay finite.
TEST(Sampler, BannedTokensAreNeverPicked) {
  const std::vector<float> logits = {0.0f, 9.0f, 0.5f, 8.0f};
  SamplingParams params;
  params.logit_bias = {{1, kNeverProduced}, {1, 100.0f}, {3, kNeverProduced}};
  params.repetition_penalty = 1.3f;
  params.presence_penalty = 1.0f;
  params.frequency_penalty = -1.0f;
  params.top_logprobs = 2;
  const std::vector<int32_t> generated = {1, 3, 1};
  Sampler s;
  params.temperature = 0.0f;
  EXPECT_EQ(s.pick(logits, params, {generated, generated}, 0), 2);
  params.temperature = 2.0f;
  params.top_p = 0.99f;
  params.min_p = 0.01f;
  for (int pos = 0; pos < 500; ++pos) {
    params.seed = static_cast<uint64_t>(pos);
    SampleResult r = s.sample(logits, params, {generated, generated}, pos, true);
    EXPECT_TRUE(r.token == 0 || r.token == 2) << r.token;
    EXPECT_TRUE(std::isfinite(r.logprob)) << r.logprob;
    for (const auto& alt : r.top) EXPECT_TRUE(std::isfinite(alt.logprob)) << alt.token;
  }
}

TEST(Sampler, LogprobsComeFromTheProcessedDistribution) {
  std::vector<float> logits = {0.0f, 1.0f, 2.0f, 3.0f};
  SamplingParams params;
  params.temperature = 0.5f;
  params.top_logprobs = 3;
  params.seed = 3;
  Sampler s;
  SampleResult r = s.sample(logits, params, {}, 17, true);
  const auto probs = softmax(logits, 0.5);
  ASSERT_EQ(r.top.size(), 3u);
  EXPECT_EQ(r.top[0].token, 3);
  EXPECT_EQ(r.top[1].token, 2);
  EXPECT_NEAR(r.top[0].logprob, std::log(probs[3]), 1e-5);
  EXPECT_NEAR(r.top[2].logprob, std::log(probs[1]), 1e-5);
  EXPECT_NEAR(r.logprob, std::log(probs[r.token]), 1e-5);
}

}  // namespace
}  // namespace tandem::sampling
