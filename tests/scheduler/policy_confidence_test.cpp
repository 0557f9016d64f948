// The policy's confidence rule and served-speedup monitoring
// (docs/adr/0005-policy-confidence.md), driven by injected timings: a seeded
// deterministic "noisy clock" stands in for a loaded machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "scheduler/policy.h"
#include "scheduler/policy_report.h"

namespace tandem::scheduler {
namespace {

namespace fs = std::filesystem;

PolicyKey cpu_key() { return {"/m/target", "/m/draft", "cpu:Test CPU|t2|avx512", 4}; }

PolicyEnv env_in(const std::string& name) {
  PolicyEnv e;
  e.cache_dir = ::testing::TempDir() + "tandem_confidence_" + name;
  fs::remove_all(e.cache_dir);
  return e;
}

// A deterministic noisy clock: splitmix64, so every platform draws the same
// numbers (std:: distributions are implementation-defined).
class NoisyClock {
 public:
  explicit NoisyClock(uint64_t seed) : state_(seed) {}
  // `ms` scaled by a uniform factor in [1 - spread, 1 + spread].
  double time(double ms, double spread) { return ms * (1.0 + spread * (2.0 * uniform() - 1.0)); }

 private:
  double uniform() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * 0x1.0p-53;
  }
  uint64_t state_;
};

// One request as the engine drives it (ADR 0003): kWarmupRounds rounds, the
// plain steps, then the rest; each round drafts 3 and accepts `accepted`.
// Returns whether the policy asked for the plain steps.
bool serve(AdaptivePolicy& p, uint64_t id, double step_ms, double round_ms, int accepted, int rounds = 5) {
  int r = 0;
  for (; r < kWarmupRounds; ++r) p.record_round(id, round_ms, 3, accepted);
  const bool sampled = p.wants_plain_step(id);
  while (p.wants_plain_step(id)) p.record_plain_step(id, step_ms);
  for (; r < rounds; ++r) p.record_round(id, round_ms, 3, accepted);
  p.request_finished(id);
  return sampled;
}

// A request whose own speedup is `speedup` exactly: 1 accepted per round,
// plain steps of 10 ms, rounds of 20 / speedup ms.
bool serve_at(AdaptivePolicy& p, uint64_t id, double speedup) {
  return serve(p, id, 10.0, 20.0 / speedup, 1);
}

TEST(PolicyEstimate, StudentTTable) {
  EXPECT_DOUBLE_EQ(t_quantile_975(1), 12.706);
  EXPECT_DOUBLE_EQ(t_quantile_975(3), 3.182);
  EXPECT_DOUBLE_EQ(t_quantile_975(11), 2.201);
  EXPECT_DOUBLE_EQ(t_quantile_975(30), 2.042);
  EXPECT_DOUBLE_EQ(t_quantile_975(500), 1.96);
}

TEST(PolicyEstimate, PooledPointAndIntervalFromPerRequestSpread) {
  // Per-request speedups 1, 2, 3 (rounds of 20, 10 and 20/3 ms, one round each).
  std::vector<PolicySample> samples;
  for (double round : {20.0, 10.0, 20.0 / 3.0}) {
    PolicySample s;
    s.plain_ms = {10.0, 10.0};
    s.rounds = 1;
    s.round_ms = round;
    s.drafted = 3;
    s.accepted = 1;
    samples.push_back(s);
  }
  const SpeedupEstimate e = estimate_speedup(samples);
  // Pooled (SPEC §4): (1 + 1) * 10 / mean(20, 10, 6.667) = 20 / 12.222 = 1.636.
  EXPECT_NEAR(e.speedup, 20.0 / ((20.0 + 10.0 + 20.0 / 3.0) / 3.0), 1e-12);
  // The spread of ln 1, ln 2, ln 3, and the multiplicative interval around the pooled point.
  const double l1 = 0.0, l2 = std::log(2.0), l3 = std::log(3.0), m = (l1 + l2 + l3) / 3.0;
  const double sd = std::sqrt(((l1 - m) * (l1 - m) + (l2 - m) * (l2 - m) + (l3 - m) * (l3 - m)) / 2.0);
  EXPECT_NEAR(e.log_stddev, sd, 1e-12);
  const double half = 4.303 * sd / std::sqrt(3.0);
  EXPECT_NEAR(e.high, e.speedup * std::exp(half), 1e-12);
  EXPECT_NEAR(e.low, e.speedup * std::exp(-half), 1e-12);
  EXPECT_TRUE(e.has_interval);
  EXPECT_NEAR(e.acceptance_rate, 1.0 / 3.0, 1e-12);
}

TEST(VerdictRuleTest, OneThresholdPerStaticDefault) {
  const VerdictRule cpu{true}, gpu{false};
  EXPECT_EQ(cpu.threshold(), 1.0);
  EXPECT_EQ(gpu.threshold(), 1.5);
  EXPECT_FALSE(cpu.verdict(1.0));
  EXPECT_TRUE(cpu.verdict(1.01));
  EXPECT_FALSE(gpu.verdict(1.49));
  EXPECT_TRUE(gpu.verdict(1.5));
  SpeedupEstimate e;
  e.has_interval = true;
  e.low = 1.1, e.high = 1.4;  // above 1.0, below 1.5: each rule is sure, differently
  EXPECT_EQ(cpu.confident(e), std::optional<bool>(true));
  EXPECT_EQ(gpu.confident(e), std::optional<bool>(false));
  e.low = 0.9;
  EXPECT_EQ(cpu.confident(e), std::nullopt);
}

TEST(PolicyConfidence, ClearCasesSettleAtTheMinimum) {
  struct Case {
    double speedup;
    bool verdict;
  };
  for (const Case c : {Case{2.5, true}, Case{0.6, false}}) {
    NoisyClock clock(7);
    auto p = AdaptivePolicy::create(cpu_key(), env_in("clear"));
    for (uint64_t id = 1; id <= kSamplesRequired; ++id) {
      ASSERT_EQ(p->state(), PolicyState::profiling) << id;
      serve(*p, id, clock.time(10.0, 0.05), clock.time(20.0 / c.speedup, 0.05), 1);
    }
    const PolicySnapshot s = p->snapshot();
    ASSERT_EQ(s.state, PolicyState::settled) << c.speedup;
    EXPECT_EQ(s.verdict, std::optional<bool>(c.verdict));
    EXPECT_EQ(s.samples, kSamplesRequired);
    EXPECT_EQ(s.settle_reason, std::optional<std::string>("interval_cleared"));
    EXPECT_GT(*s.speedup_log_stddev, 0.0);
    EXPECT_TRUE(c.verdict ? *s.speedup_low > 1.0 : *s.speedup_high <= 1.0);
  }
}

TEST(PolicyConfidence, AStraddlingIntervalSamplesMoreUntilItClears) {
  auto p = AdaptivePolicy::create(cpu_key(), env_in("more"));
  uint64_t id = 0;
  for (double s : {0.8, 1.6, 0.8, 1.6}) serve_at(*p, ++id, s);
  PolicySnapshot s = p->snapshot();
  ASSERT_EQ(s.state, PolicyState::profiling);  // 4 samples, but [0.4, 1.9] straddles 1.0
  EXPECT_EQ(s.samples, 4);
  EXPECT_LE(*s.speedup_low, 1.0);
  EXPECT_GT(*s.speedup_high, 1.0);
  PolicyReport r;
  describe_policy(s, r);
  EXPECT_EQ(r.samples_remaining, std::optional<int>(kSamplesMax - 4));  // at most this many more
  EXPECT_EQ(r.speedup_threshold, std::optional<double>(1.0));
  while (p->state() == PolicyState::profiling) serve_at(*p, ++id, 1.25);
  s = p->snapshot();
  EXPECT_GT(s.samples, 4);
  EXPECT_LT(s.samples, kSamplesMax);
  EXPECT_EQ(s.verdict, std::optional<bool>(true));
  EXPECT_EQ(s.settle_reason, std::optional<std::string>("interval_cleared"));
  EXPECT_GT(*s.speedup_low, 1.0);
}

TEST(PolicyConfidence, NeverClearingSettlesAtTheCapByThePointEstimate) {
  PolicyEnv e = env_in("cap");
  auto p = AdaptivePolicy::create(cpu_key(), e);
  uint64_t id = 0;
  while (p->state() == PolicyState::profiling) {
    ASSERT_LT(id, static_cast<uint64_t>(kSamplesMax));
    ++id;
    serve_at(*p, id, id % 2 ? 0.7 : 1.3);
  }
  const PolicySnapshot s = p->snapshot();
  EXPECT_EQ(s.samples, kSamplesMax);
  EXPECT_EQ(s.settle_reason, std::optional<std::string>("max_samples"));
  EXPECT_LE(*s.speedup_low, 1.0);
  EXPECT_GT(*s.speedup_high, 1.0);
  // Pooled: 2 * 10 / mean(20/0.7, 20/1.3) = 0.91 -> decline.
  EXPECT_NEAR(*s.speedup, 20.0 / ((20.0 / 0.7 + 20.0 / 1.3) / 2.0), 1e-9);
  EXPECT_EQ(s.verdict, std::optional<bool>(false));
  // The hint says so, and a restart trusts it.
  auto again = AdaptivePolicy::create(cpu_key(), e);
  EXPECT_EQ(again->snapshot().settle_reason, std::optional<std::string>("max_samples"));
  EXPECT_EQ(again->state(), PolicyState::settled);
}

// Issue 13: on a loaded machine a 4-sample rule settled one pairing decline
// three times and enable once. Here: a pairing whose true speedup is 1.3
// (enable on a CPU) under heavy timing noise (each request's plain step and
// round time uniformly +-40%), restarted 40 times.
TEST(PolicyConfidence, ANoisyMachineSettlesOnlyWhenTheIntervalClearsOrAtTheCap) {
  const VerdictRule rule{true};
  int sampled_more = 0, at_cap = 0, wrong_cleared = 0, wrong_at_cap = 0, wrong_by_four = 0;
  for (uint64_t seed = 1; seed <= 40; ++seed) {
    NoisyClock clock(seed);
    auto p = AdaptivePolicy::create(cpu_key(), env_in("noisy"));
    uint64_t id = 0;
    while (p->state() == PolicyState::profiling) {
      ASSERT_LT(id, static_cast<uint64_t>(kSamplesMax)) << seed;
      serve(*p, ++id, clock.time(10.0, 0.4), clock.time(20.0 / 1.3, 0.4), 1);
      const PolicySnapshot s = p->snapshot();
      if (s.samples == kSamplesRequired) wrong_by_four += !rule.verdict(*s.speedup);  // what 4 samples said
      if (s.state == PolicyState::profiling) {
        if (s.samples >= kSamplesRequired) {
          EXPECT_TRUE(*s.speedup_low <= 1.0 && *s.speedup_high > 1.0) << seed;
        }
        continue;
      }
      ASSERT_GE(s.samples, kSamplesRequired) << seed;
      if (*s.settle_reason == "interval_cleared") {
        EXPECT_TRUE(*s.speedup_low > 1.0 || *s.speedup_high <= 1.0) << seed;  // clear of the threshold
        wrong_cleared += *s.verdict != true;
      } else {
        EXPECT_EQ(*s.settle_reason, "max_samples") << seed;
        EXPECT_EQ(s.samples, kSamplesMax) << seed;
        ++at_cap;
        wrong_at_cap += *s.verdict != true;
      }
      sampled_more += s.samples > kSamplesRequired;
    }
  }
  // Deterministic for these 40 seeds: the noise made most
  // restarts sample more than 4; every verdict the interval cleared is
  // right; only a cap-settled one (flagged max_samples on the endpoint) can
  // be wrong, and fewer are than by the old 4-sample rule.
  EXPECT_GT(sampled_more, 20);
  EXPECT_EQ(wrong_cleared, 0);
  EXPECT_LT(wrong_at_cap, wrong_by_four);
  EXPECT_LE(wrong_at_cap, at_cap);
  RecordProperty("at_cap", at_cap);
  RecordProperty("wrong_at_cap", wrong_at_cap);
  RecordProperty("wrong_by_four", wrong_by_four);
  std::printf(
      "noisy restarts: %d sampled more than %d, %d at the cap (%d wrong there); the 4-sample rule: %d "
      "wrong\n",
      sampled_more, kSamplesRequired, at_cap, wrong_at_cap, wrong_by_four);
}

TEST(PolicyMonitoring, AServedEnableThatTurnsSlowIsReprofiledAndTheHintRewritten) {
  PolicyEnv e = env_in("monitor");
  auto p = AdaptivePolicy::create(cpu_key(), e);
  uint64_t id = 0;
  for (int i = 0; i < kSamplesRequired; ++i) serve_at(*p, ++id, 2.5);
  ASSERT_EQ(p->snapshot().verdict, std::optional<bool>(true));
  const std::string hint = p->hint_path();
  auto hint_verdict = [&] {
    std::ifstream in(hint);
    return nlohmann::json::parse(in).at("verdict").get<std::string>();
  };
  ASSERT_EQ(hint_verdict(), "enable");
  // Served requests of an enable are sampled too (their plain steps are real output).
  EXPECT_TRUE(serve_at(*p, ++id, 2.5));
  for (int i = 1; i < kMonitorWindow; ++i) serve_at(*p, ++id, 2.5);
  EXPECT_NEAR(*p->snapshot().served_speedup, 2.5, 1e-9);
  EXPECT_EQ(p->snapshot().contradicting_windows, 0);
  // The machine gets loaded: one slow window is not enough (hysteresis) ...
  for (int i = 0; i < kMonitorWindow; ++i) serve_at(*p, ++id, 0.6);
  EXPECT_EQ(p->state(), PolicyState::settled);
  EXPECT_EQ(p->snapshot().contradicting_windows, 1);
  // ... a good window in between resets the count ...
  for (int i = 0; i < kMonitorWindow; ++i) serve_at(*p, ++id, 2.5);
  EXPECT_EQ(p->snapshot().contradicting_windows, 0);
  for (int i = 0; i < kMonitorWindow; ++i) serve_at(*p, ++id, 0.6);
  EXPECT_EQ(p->state(), PolicyState::settled);
  // ... two in a row re-profile, and the contradicted hint is gone meanwhile.
  for (int i = 0; i < kMonitorWindow; ++i) serve_at(*p, ++id, 0.6);
  PolicySnapshot s = p->snapshot();
  ASSERT_EQ(s.state, PolicyState::profiling);
  EXPECT_EQ(s.samples, 0);
  EXPECT_EQ(s.reprofiles, 1);
  EXPECT_EQ(*s.reprofile_reason,
            "served speedup 0.60 [0.60, 0.60] contradicts verdict enable (threshold 1.00) in 2 consecutive "
            "windows");
  EXPECT_FALSE(fs::exists(hint));
  EXPECT_EQ(AdaptivePolicy::create(cpu_key(), e)->state(), PolicyState::profiling);
  for (int i = 0; i < kSamplesRequired; ++i) serve_at(*p, ++id, 0.6);
  s = p->snapshot();
  EXPECT_EQ(s.state, PolicyState::settled);
  EXPECT_EQ(s.verdict, std::optional<bool>(false));
  EXPECT_EQ(s.reprofiles, 1);
  EXPECT_EQ(hint_verdict(), "decline");
  PolicyReport r;
  describe_policy(s, r);
  EXPECT_EQ(r.reprofiles, 1);
  EXPECT_EQ(r.verdict_source, std::optional<std::string>("measured"));
  EXPECT_TRUE(r.reprofile_reason);
}

TEST(PolicyMonitoring, ADeclineIsSpotCheckedAndReprofiledWhenSpeculationGotFaster) {
  PolicyEnv e = env_in("spot");
  auto p = AdaptivePolicy::create(cpu_key(), e);
  uint64_t id = 0;
  for (int i = 0; i < kSamplesRequired; ++i) serve_at(*p, ++id, 0.6);
  ASSERT_EQ(p->snapshot().verdict, std::optional<bool>(false));
  int checks = 0;
  while (p->state() == PolicyState::settled) {
    ASSERT_LT(checks, kMonitorWindow * kContradictingWindows);
    // Classic requests (no rounds) until a spot check is due.
    for (int i = 0; i < kDeclineCheckEvery; ++i) {
      ASSERT_FALSE(p->should_run()) << i;
      ASSERT_FALSE(p->wants_plain_step(id + 1));
      p->request_finished(++id);
    }
    ASSERT_TRUE(p->should_run());  // the next B=1 request speculates and is timed
    ASSERT_TRUE(serve_at(*p, ++id, 2.0));
    ++checks;
  }
  EXPECT_EQ(checks, kMonitorWindow * kContradictingWindows);
  EXPECT_EQ(p->state(), PolicyState::profiling);
  EXPECT_NE(p->snapshot().reprofile_reason->find("contradicts verdict decline"), std::string::npos);
  for (int i = 0; i < kSamplesRequired; ++i) serve_at(*p, ++id, 2.0);
  EXPECT_EQ(p->snapshot().verdict, std::optional<bool>(true));
}

TEST(PolicyMonitoring, ForcedPoliciesNeverSample) {
  PolicyEnv e = env_in("forcednosample");
  e.force = true;
  auto p = AdaptivePolicy::create(cpu_key(), e);
  EXPECT_FALSE(serve_at(*p, 1, 0.5));
  EXPECT_EQ(p->snapshot().samples, 0);
  EXPECT_EQ(p->state(), PolicyState::forced);
}

}  // namespace
}  // namespace tandem::scheduler
