// Processors against hand-computed references.
#include "sampling/processors.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>

namespace tandem::sampling {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> log_probs(std::vector<double> p) {
  std::vector<float> out;
  for (double v : p) out.push_back(static_cast<float>(std::log(v)));
  return out;
}

std::vector<int> kept(const std::vector<float>& row) {
  std::vector<int> ids;
  for (size_t i = 0; i < row.size(); ++i)
    if (row[i] != -kInf) ids.push_back(static_cast<int>(i));
  return ids;
}

TEST(Processors, TopKKeepsLargestAndBreaksTiesByLowerId) {
  ProcessorScratch s;
  std::vector<float> row = {1, 3, 2, 3, 0};
  apply_top_k(row, 2, s);
  EXPECT_EQ(kept(row), (std::vector<int>{1, 3}));
  row = {1, 3, 2, 3, 0};
  apply_top_k(row, 1, s);
  EXPECT_EQ(kept(row), (std::vector<int>{1}));
  row = {1, 3, 2};
  apply_top_k(row, 0, s);  // disabled
  EXPECT_EQ(kept(row).size(), 3u);
}

// apply_top_k's one-pass selection keeps exactly the k first ids of a full
// sort by (logit desc, id asc): rows with many ties, masked entries, ±0, and
// every k from 1 to the unmasked count.
TEST(Processors, TopKEqualsTheFullSortOnLargeRows) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  ProcessorScratch s;
  for (int shape = 0; shape < 4; ++shape) {
    std::vector<float> base(shape == 3 ? 300 : 20000);
    for (size_t i = 0; i < base.size(); ++i) {
      float v = dist(rng);
      if (shape >= 1) v = std::round(v);        // many exact ties
      if (shape == 2 && i % 5 == 0) v = -kInf;  // masked entries
      if (shape == 3 && i % 7 == 0) v = (i % 2) ? 0.0f : -0.0f;
      base[i] = v;
    }
    std::vector<int> order;
    for (size_t i = 0; i < base.size(); ++i)
      if (base[i] != -kInf) order.push_back(static_cast<int>(i));
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return base[a] != base[b] ? base[a] > base[b] : a < b; });
    for (int k : {1, 2, 3, 40, 41, 299, static_cast<int>(order.size()) - 1, static_cast<int>(order.size())}) {
      if (k < 1 || k > static_cast<int>(order.size())) continue;
      std::vector<float> row = base;
      apply_top_k(row, k, s);
      std::vector<int> want(order.begin(), order.begin() + k);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(kept(row), want) << "shape " << shape << " k " << k;
      for (int id : want) EXPECT_EQ(std::memcmp(&row[id], &base[id], sizeof(float)), 0);  // values untouched
    }
  }
}

// apply_top_p (its prefix picked from a threshold, no heap over the row) keeps exactly what the
// full sort gives: the smallest prefix by (logit desc, id asc) whose mass — e^(l - max) / total,
// total over the unmasked entries in index order, added in sorted order — reaches p. Rows with
// ties, masked entries, ±0, a peak (a short nucleus), and a flat one (a nucleus past 2,048).
TEST(Processors, TopPEqualsTheFullSortOnLargeRows) {
  std::mt19937 rng(12);
  ProcessorScratch s;
  for (int shape = 0; shape < 5; ++shape) {
    std::normal_distribution<float> dist(0.0f, shape == 4 ? 0.05f : 3.0f);
    std::vector<float> base(30000);
    for (size_t i = 0; i < base.size(); ++i) {
      float v = dist(rng);
      if (shape == 1) v = std::round(v);        // many exact ties
      if (shape == 2 && i % 5 == 0) v = -kInf;  // masked entries
      if (shape == 2 && i % 7 == 0) v = (i % 2) ? 0.0f : -0.0f;
      if (shape == 3 && i % 1000 == 0) v = 12.0f + static_cast<float>(i % 3);  // a peak
      base[i] = v;
    }
    std::vector<int> order;
    for (size_t i = 0; i < base.size(); ++i)
      if (base[i] != -kInf) order.push_back(static_cast<int>(i));
    float max_l = -kInf;
    for (float v : base) max_l = std::max(max_l, v);
    double total = 0.0;
    for (int i : order) total += std::exp(static_cast<double>(base[i] - max_l));
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return base[a] != base[b] ? base[a] > base[b] : a < b; });
    for (const float p : {0.05f, 0.5f, 0.9f, 0.95f, 0.999f}) {
      double mass = 0.0;
      size_t keep = 0;
      while (keep < order.size()) {
        mass += std::exp(static_cast<double>(base[order[keep]] - max_l)) / total;
        ++keep;
        if (mass >= p) break;
      }
      std::vector<int> want(order.begin(), order.begin() + keep);
      std::sort(want.begin(), want.end());
      std::vector<float> row = base;
      apply_top_p(row, p, s);
      EXPECT_EQ(kept(row), want) << "shape " << shape << " p " << p << " (nucleus " << keep << ")";
      for (int id : want) EXPECT_EQ(std::memcmp(&row[id], &base[id], sizeof(float)), 0);  // values untouched
    }
  }
}

TEST(Processors, TopPKeepsSmallestPrefixReachingTheMass) {
  ProcessorScratch s;
  auto row = log_probs({0.05, 0.5, 0.15, 0.3});
  apply_top_p(row, 0.75f, s);
  EXPECT_EQ(kept(row), (std::vector<int>{1, 3}));
  row = log_probs({0.05, 0.5, 0.15, 0.3});
  apply_top_p(row, 0.5f, s);
  EXPECT_EQ(kept(row), (std::vector<int>{1}));
  row = log_probs({0.05, 0.5, 0.15, 0.3});
  apply_top_p(row, 0.9f, s);
  EXPECT_EQ(kept(row), (std::vector<int>{1, 2, 3}));
}

TEST(Processors, TopPOnALargeVocabularyMatchesAFullSort) {
  std::mt19937 rng(7);
  std::normal_distribution<float> dist(0.0f, 1.0f);  // flat enough that the nucleus exceeds 2048 tokens
  std::vector<float> row(50000);
  for (float& v : row) v = dist(rng);
  std::vector<float> expected = row;
  {
    std::vector<int> order(row.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(),
              [&](int a, int b) { return row[a] != row[b] ? row[a] > row[b] : a < b; });
    const float mx = row[order[0]];
    double total = 0;
    for (float v : row) total += std::exp(double(v - mx));
    double mass = 0;
    size_t keep = 0;
    while (keep < order.size()) {
      mass += std::exp(double(row[order[keep]] - mx)) / total;
      ++keep;
      if (mass >= 0.9) break;
    }
    for (size_t i = keep; i < order.size(); ++i) expected[order[i]] = -kInf;
  }
  ProcessorScratch s;
  apply_top_p(row, 0.9f, s);
  EXPECT_GT(kept(row).size(), 2048u);
  EXPECT_EQ(kept(row), kept(expected));
}

TEST(Processors, MinPMasksBelowFractionOfTheBest) {
  auto row = log_probs({0.5, 0.3, 0.15, 0.05});
  apply_min_p(row, 0.25f);  // threshold 0.125
  EXPECT_EQ(kept(row), (std::vector<int>{0, 1, 2}));
}

TEST(Processors, RepetitionPenaltyDividesPositiveAndMultipliesNegativeOnce) {
  ProcessorScratch s;
  std::vector<float> row = {2, -2, 1};
  std::vector<int32_t> prompt = {0, 1}, generated = {0};
  apply_repetition_penalty(row, {prompt, generated}, 2.0f, s);
  EXPECT_EQ(row, (std::vector<float>{1, -4, 1}));
  // Scratch is clean for the next call.
  std::vector<float> row2 = {2, -2, 1};
  apply_repetition_penalty(row2, {{}, {}}, 2.0f, s);
  EXPECT_EQ(row2, (std::vector<float>{2, -2, 1}));
}

TEST(Processors, PresenceAndFrequencyFollowOpenAI) {
  ProcessorScratch s;
  std::vector<float> row = {1, 1, 1};
  std::vector<int32_t> prompt = {1, 1}, generated = {2, 2, 0};
  apply_presence_frequency(row, {prompt, generated}, 0.5f, 0.25f, s);
  EXPECT_FLOAT_EQ(row[0], 1 - (0.25f * 1 + 0.5f));
  EXPECT_FLOAT_EQ(row[1], 1);  // prompt tokens are not penalised
  EXPECT_FLOAT_EQ(row[2], 1 - (0.25f * 2 + 0.5f));
  std::vector<float> again = {1, 1, 1};
  apply_presence_frequency(again, {prompt, {}}, 0.5f, 0.25f, s);
  EXPECT_EQ(again, (std::vector<float>{1, 1, 1}));
}

TEST(Processors, LogitBiasAndTemperature) {
  SamplingParams p;
  p.logit_bias = {{2, -100.0f}, {0, 5.0f}};
  std::vector<float> row = {1, 2, 3};
  apply_logit_bias(row, p);
  EXPECT_EQ(row, (std::vector<float>{6, 2, -97}));
  apply_temperature(row, 0.5f);
  EXPECT_EQ(row, (std::vector<float>{12, 4, -194}));
}

TEST(Params, ValidationNamesTheField) {
  SamplingParams p;
  EXPECT_TRUE(validate(p, 100).ok());
  p.temperature = 3;
  EXPECT_NE(validate(p, 100).message().find("temperature"), std::string::npos);
  p = {};
  p.top_p = 0;
  EXPECT_NE(validate(p, 100).message().find("top_p"), std::string::npos);
  p = {};
  p.logit_bias = {{100, 1.0f}};
  EXPECT_NE(validate(p, 100).message().find("logit_bias"), std::string::npos);
  p = {};
  p.top_logprobs = 21;
  EXPECT_NE(validate(p, 100).message().find("top_logprobs"), std::string::npos);
  p = {};
  p.presence_penalty = -2.5f;
  EXPECT_NE(validate(p, 100).message().find("presence_penalty"), std::string::npos);
}

// The field comes back as data, not as the first word of the message.
TEST(Params, CheckReturnsTheFieldAsData) {
  SamplingParams p;
  EXPECT_FALSE(check(p, 100).has_value());
  EXPECT_FALSE(check_ranges(p).has_value());
  struct Case {
    void (*set)(SamplingParams&);
    const char* field;
  };
  const Case cases[] = {
      {[](SamplingParams& q) { q.temperature = 2.5f; }, "temperature"},
      {[](SamplingParams& q) { q.temperature = std::numeric_limits<float>::infinity(); }, "temperature"},
      {[](SamplingParams& q) { q.top_k = -2; }, "top_k"},
      {[](SamplingParams& q) { q.top_p = 0.0f; }, "top_p"},
      {[](SamplingParams& q) { q.min_p = 1.5f; }, "min_p"},
      {[](SamplingParams& q) { q.repetition_penalty = 0.0f; }, "repetition_penalty"},
      {[](SamplingParams& q) { q.presence_penalty = 2.5f; }, "presence_penalty"},
      {[](SamplingParams& q) { q.frequency_penalty = -2.5f; }, "frequency_penalty"},
      {[](SamplingParams& q) {
         q.logit_bias = {{1, 101.0f}};
       },
       "logit_bias"},
      {[](SamplingParams& q) { q.top_logprobs = 21; }, "top_logprobs"},
  };
  for (const auto& c : cases) {
    SamplingParams q;
    c.set(q);
    auto e = check_ranges(q);
    ASSERT_TRUE(e.has_value()) << c.field;
    EXPECT_EQ(e->field, c.field);
    EXPECT_NE(e->message.find(c.field), std::string::npos) << e->message;
    auto full = check(q, 100);
    ASSERT_TRUE(full.has_value()) << c.field;
    EXPECT_EQ(full->field, c.field);
  }
  // A token id outside the vocabulary needs the vocabulary: check() only.
  p.logit_bias = {{100, 1.0f}};
  EXPECT_FALSE(check_ranges(p).has_value());
  auto e = check(p, 100);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "logit_bias");
  // The limits themselves are inside.
  p = {};
  p.temperature = 2.0f;
  p.top_p = 1.0f;
  p.min_p = 1.0f;
  p.presence_penalty = -2.0f;
  p.frequency_penalty = 2.0f;
  p.logit_bias = {{0, -100.0f}, {99, 100.0f}};
  p.top_logprobs = 20;
  EXPECT_FALSE(check(p, 100).has_value());
}

// kNeverProduced (llama-server's logit_bias false) is the one non-finite bias; +infinity and NaN
// stay out of range. Banning every token of the vocabulary leaves nothing to sample: check() says so.
TEST(Params, NeverProducedIsTheOneNonFiniteBias) {
  SamplingParams p;
  p.logit_bias = {{3, kNeverProduced}, {3, 5.0f}};
  EXPECT_FALSE(check(p, 100).has_value());
  for (float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
    p.logit_bias = {{3, bad}};
    ASSERT_TRUE(check_ranges(p).has_value());
    EXPECT_EQ(check_ranges(p)->field, "logit_bias");
  }
  p.logit_bias.clear();
  for (int32_t t = 0; t < 100; ++t) p.logit_bias.emplace_back(t, kNeverProduced);
  p.logit_bias.emplace_back(7, kNeverProduced);  // twice: still 100 distinct tokens
  EXPECT_FALSE(check_ranges(p).has_value());
  auto e = check(p, 100);
  ASSERT_TRUE(e.has_value());
  EXPECT_EQ(e->field, "logit_bias");
  EXPECT_NE(e->message.find("every token"), std::string::npos) << e->message;
  p.logit_bias.erase(p.logit_bias.begin() + 42);  // token 42 stays possible
  EXPECT_FALSE(check(p, 100).has_value());
}

TEST(Params, RandomSeedsDiffer) {
  // 64 random bits twice: equal with probability 2^-64.
  EXPECT_NE(random_seed(), random_seed());
}

}  // namespace
}  // namespace tandem::sampling
