// A request whose constraints leave no token at some position (a grammar's next tokens all banned
// by logit_bias) ends with an InvalidArgument error after the tokens before that position — never
// with a made-up token — on the classic and the speculative path alike, and the request beside it
// in the batch is untouched.
#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "../speculative/random_mtp_head.h"
#include "engine_test_util.h"
#include "scheduler/engine.h"
#include "speculative/mtp.h"

namespace tandem::scheduler {
namespace {

// Allows every token for the first `free` positions, then only `only` (a grammar that has
// reached a point where a few tokens may follow, in miniature). A function of the prefix.
class OnlyAfter final : public sampling::TokenConstraint {
 public:
  OnlyAfter(size_t free, std::vector<int32_t> only) : free_(free), only_(std::move(only)) {}
  void mask(std::span<float> logits, std::span<const int32_t> generated) override {
    if (generated.size() < free_) return;
    for (size_t i = 0; i < logits.size(); ++i)
      if (std::find(only_.begin(), only_.end(), static_cast<int32_t>(i)) == only_.end())
        logits[i] = -std::numeric_limits<float>::infinity();
  }

 private:
  size_t free_;
  std::vector<int32_t> only_;
};

enum class Drafter { none, copy, mtp };

std::unique_ptr<Engine> make_engine(Drafter kind) {
  EngineConfig config;
  config.max_running = 4;
  config.prefill_budget = 16;
  config.context = 256;
  config.threads = 2;
  auto target = testing::load_target();
  std::unique_ptr<speculative::Drafter> drafter;
  if (kind == Drafter::copy) drafter = testing::load_copy_drafter();
  if (kind == Drafter::mtp) {
    auto d = speculative::MtpDrafter::load(
        speculative::testing::write_random_mtp_head(target->config(), "dead_end"), *target, nullptr, 1024);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    drafter = std::move(*d);
  }
  PolicyEnv forced;  // speculate whenever one request decodes alone
  forced.force = true;
  return testing::start_engine(config, std::move(target), std::move(drafter), forced);
}

const std::vector<int32_t> kOnly = {11, 12, 13};

constexpr int kNone = -1;

// `dead_end_at` >= 0: the constraint allows only kOnly from that generated position on, and
// logit_bias bans kOnly everywhere, so that position has no token. kNone: an ordinary request.
std::shared_ptr<EngineRequest> request(uint64_t id, float temperature, int dead_end_at) {
  auto r = std::make_shared<EngineRequest>();
  r->id = id;
  for (int i = 0; i < 9 + static_cast<int>(id) * 5; ++i) r->prompt.push_back((id * 37 + i * 11) % 256);
  r->params.temperature = temperature;
  r->params.seed = 500 + id;
  r->max_tokens = 30;
  r->want_logprobs = id % 2 == 0;
  if (dead_end_at != kNone) {
    r->params.constraint = std::make_shared<OnlyAfter>(static_cast<size_t>(dead_end_at), kOnly);
    for (int32_t t : kOnly) r->params.logit_bias.push_back({t, sampling::kNeverProduced});
  }
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::none;
  Status error;
  int64_t spec_rounds = 0;
};

Result collect(const std::shared_ptr<EngineRequest>& r) {
  Result out;
  while (out.finish == FinishReason::none) {
    std::vector<RequestUpdate> updates;
    if (!r->channel->pop_all(updates, std::chrono::seconds(30))) {
      ADD_FAILURE() << "timed out";
      break;
    }
    for (auto& u : updates) {
      for (auto& t : u.tokens) out.tokens.push_back(t.token);
      if (u.finish == FinishReason::none) continue;
      out.finish = u.finish;
      out.error = u.error;
      out.spec_rounds = u.stats.spec_rounds;
    }
  }
  return out;
}

Result run_one(Engine& e, std::shared_ptr<EngineRequest> r) {
  EXPECT_TRUE(e.submit(r).ok());
  return collect(r);
}

TEST(EngineDeadEnd, EndsWithTheReasonAfterTheTokensBeforeIt) {
  for (float temperature : {0.0f, 0.9f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    auto classic = make_engine(Drafter::none);
    // The same request without the constraint: its first 7 tokens are what may come out.
    auto open = request(1, temperature, kNone);
    for (int32_t t : kOnly) open->params.logit_bias.push_back({t, sampling::kNeverProduced});
    const Result free = run_one(*classic, open);
    ASSERT_EQ(free.tokens.size(), 30u);
    const std::vector<int32_t> before(free.tokens.begin(), free.tokens.begin() + 7);

    const Result r = run_one(*classic, request(1, temperature, 7));
    EXPECT_EQ(r.finish, FinishReason::error);
    EXPECT_EQ(r.tokens, before) << "the tokens before the dead end, and no other";
    EXPECT_EQ(r.error.code(), StatusCode::kInvalidArgument) << r.error.to_string();
    EXPECT_EQ(r.error.message(),
              "no token is allowed after 7 generated tokens: the grammar's next tokens 11, 12, 13 are all "
              "banned by logit_bias");
    // At the first position too (the token the prefill samples): no token at all.
    const Result first = run_one(*classic, request(1, temperature, 0));
    EXPECT_TRUE(first.tokens.empty());
    EXPECT_EQ(first.finish, FinishReason::error);
    EXPECT_NE(first.error.message().find("after 0 generated tokens"), std::string::npos)
        << first.error.message();
  }
}

TEST(EngineDeadEnd, TheOtherRequestsOfTheBatchAreUntouched) {
  auto e = make_engine(Drafter::none);
  const Result alone = run_one(*e, request(2, 0.8f, kNone));
  ASSERT_EQ(alone.finish, FinishReason::length);
  std::vector<std::shared_ptr<EngineRequest>> reqs = {request(1, 0.8f, 4), request(2, 0.8f, kNone),
                                                      request(3, 0.0f, 9)};
  for (auto& r : reqs) ASSERT_TRUE(e->submit(r).ok());
  const Result dead1 = collect(reqs[0]), other = collect(reqs[1]), dead3 = collect(reqs[2]);
  EXPECT_EQ(dead1.finish, FinishReason::error);
  EXPECT_EQ(dead1.tokens.size(), 4u);
  EXPECT_EQ(dead3.finish, FinishReason::error);
  EXPECT_EQ(dead3.tokens.size(), 9u);
  EXPECT_EQ(other.finish, FinishReason::length);
  EXPECT_EQ(other.tokens, alone.tokens);
  // The client's constraints, not an engine failure: counted apart.
  EXPECT_EQ(e->metrics().requests_failed.load(), 0u);
  EXPECT_EQ(e->metrics().requests_no_allowed_token.load(), 2u);
}

// Speculation reaches the same error at the same position: the drafter stops proposing where
// nothing is allowed, and a verify row with no token ends the walk. A stop token just before the
// dead end wins on both paths (classic never samples past it; a round that did, discards it).
TEST(EngineDeadEnd, SpeculationEndsExactlyAsClassicDoes) {
  auto classic = make_engine(Drafter::none);
  auto copy = make_engine(Drafter::copy);
  auto mtp = make_engine(Drafter::mtp);
  for (float temperature : {0.0f, 0.9f}) {
    for (int at : {0, 1, 2, 5, 8, 13}) {
      for (bool stop_before : {false, true}) {
        SCOPED_TRACE("temperature " + std::to_string(temperature) + ", dead end at " + std::to_string(at) +
                     (stop_before ? ", a stop token just before" : ""));
        auto make = [&] {
          auto r = request(at % 2 ? 1 : 2, temperature, at);
          return r;
        };
        std::shared_ptr<EngineRequest> probe = make();
        const Result expected_first = run_one(*classic, probe);
        ASSERT_EQ(expected_first.tokens.size(), static_cast<size_t>(at));
        if (stop_before && at == 0) continue;  // no token before it to stop on
        auto with_stop = [&](std::shared_ptr<EngineRequest> r) {
          if (stop_before) r->stop_tokens = {expected_first.tokens.back()};
          return r;
        };
        const Result expected = run_one(*classic, with_stop(make()));
        EXPECT_EQ(expected.finish, stop_before ? FinishReason::stop : FinishReason::error);
        for (Engine* spec : {copy.get(), mtp.get()}) {
          const Result got = run_one(*spec, with_stop(make()));
          EXPECT_EQ(got.tokens, expected.tokens) << (spec == copy.get() ? "copy" : "mtp");
          EXPECT_EQ(got.finish, expected.finish);
          EXPECT_EQ(got.error.to_string(), expected.error.to_string());
          if (at > 2) EXPECT_GT(got.spec_rounds, 0) << "the request must have speculated";
        }
      }
    }
  }
}

}  // namespace
}  // namespace tandem::scheduler
