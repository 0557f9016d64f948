// A position whose constraints leave no token: the sampler says so (kNoToken) on the greedy and
// the seeded path instead of returning token 0, and no_allowed_token() names the cause.
#include "sampling/dead_end.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "sampling/sampler.h"

namespace tandem::sampling {
namespace {

// Allows only `allowed` (a grammar's mask, in miniature).
class OnlyThese final : public TokenConstraint {
 public:
  explicit OnlyThese(std::vector<int32_t> allowed) : allowed_(std::move(allowed)) {}
  void mask(std::span<float> logits, std::span<const int32_t>) override {
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::find(allowed_.begin(), allowed_.end(), static_cast<int32_t>(i)) == allowed_.end())
        logits[i] = -INFINITY;
  }

 private:
  std::vector<int32_t> allowed_;
};

const std::vector<float> kLogits = {5.0f, 1.0f, 2.0f, 0.5f, -1.0f, 3.0f};

SamplingParams grammar_banned_by_bias(float temperature) {
  SamplingParams p;
  p.temperature = temperature;
  p.seed = 7;
  p.constraint = std::make_shared<OnlyThese>(std::vector<int32_t>{2, 3});
  p.logit_bias = {{2, kNeverProduced}, {3, kNeverProduced}};
  return p;
}

TEST(DeadEnd, EveryTokenMaskedIsNoTokenNotTokenZero) {
  Sampler s;
  const std::vector<int32_t> generated = {4, 1};
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    SamplingParams p = grammar_banned_by_bias(temperature);
    p.top_logprobs = 2;
    for (int64_t position = 10; position < 20; ++position)
      EXPECT_EQ(s.pick(kLogits, p, {{}, generated}, position), kNoToken);
    const SampleResult r = s.sample(kLogits, p, {{}, generated}, 12, true);
    EXPECT_EQ(r.token, kNoToken);
    EXPECT_TRUE(r.top.empty());
    // One token left open: that one, on both paths.
    p.logit_bias.pop_back();
    EXPECT_EQ(s.pick(kLogits, p, {{}, generated}, 12), 3);
  }
}

TEST(DeadEnd, ARowOfNaNOrMinusInfinityHasNoToken) {
  Sampler s;
  SamplingParams p;
  for (float temperature : {0.0f, 1.0f}) {
    p.temperature = temperature;
    EXPECT_EQ(s.pick(std::vector<float>(6, NAN), p, {}, 3), kNoToken);
    EXPECT_EQ(s.pick(std::vector<float>(6, -INFINITY), p, {}, 3), kNoToken);
    // NaN is never picked, even next to -infinity; a finite logit still is.
    EXPECT_EQ(s.pick(std::vector<float>{NAN, -INFINITY, -50.0f}, p, {}, 3), 2);
  }
}

TEST(DeadEnd, TheMessageNamesTheCause) {
  const std::vector<int32_t> generated = {4, 1, 0};
  SamplingParams p = grammar_banned_by_bias(0.0f);
  Status st = no_allowed_token(kLogits, p, {{}, generated});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "no token is allowed after 3 generated tokens: the grammar's next tokens 2, 3 are all banned by "
            "logit_bias");
  EXPECT_EQ(dead_end_cause(st), DeadEndCause::logit_bias);

  p.constraint = std::make_shared<OnlyThese>(std::vector<int32_t>{});
  st = no_allowed_token(kLogits, p, {{}, generated});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("the grammar (grammar, json_schema or response_format) allows no token"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(dead_end_cause(st), DeadEndCause::grammar);

  p.constraint = nullptr;
  p.logit_bias.clear();
  for (int32_t t = 0; t < 6; ++t) p.logit_bias.push_back({t, kNeverProduced});
  st = no_allowed_token(kLogits, p, {{}, generated});
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("logit_bias bans every token"), std::string::npos) << st.message();
  EXPECT_EQ(dead_end_cause(st), DeadEndCause::logit_bias);

  // Neither: what is left is the chain's overflow (a repetition penalty too large for floats).
  p.logit_bias.clear();
  p.repetition_penalty = 1e38f;
  const std::vector<int32_t> all = {0, 1, 2, 3, 4, 5};
  st = no_allowed_token(std::vector<float>(6, -5.0f), p, {{}, all});
  EXPECT_NE(st.message().find("penalties and temperature"), std::string::npos) << st.message();
  EXPECT_EQ(dead_end_cause(st), DeadEndCause::penalties);

  // The model's own row, not the request: the server's fault.
  p.logit_bias.clear();
  st = no_allowed_token(std::vector<float>(6, NAN), p, {{}, generated});
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.message();
  EXPECT_EQ(dead_end_cause(st), DeadEndCause::unknown);
  EXPECT_EQ(dead_end_cause(invalid_argument("'logit_bias' must be an object")), DeadEndCause::unknown);
}

}  // namespace
}  // namespace tandem::sampling
