// The adaptive policy's state machine, estimator and hint files, with an
// injected environment (no server, no model).
#include "scheduler/policy.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tandem::scheduler {
namespace {

namespace fs = std::filesystem;

PolicyKey key() { return {"/m/target", "/m/draft", "cpu:Test CPU|t2|avx512", 4}; }

PolicyEnv env_in(const std::string& name) {
  PolicyEnv e;
  e.cache_dir = ::testing::TempDir() + "tandem_policy_" + name;
  fs::remove_all(e.cache_dir);
  return e;
}

// Feeds one profiled request: two plain steps of `step_ms`, then `rounds`
// rounds of `round_ms` accepting `accepted` of 3 drafts each.
// One profiled request as the engine drives it (ADR 0003): kWarmupRounds
// speculative rounds, then the plain steps, then the rest of its rounds.
void feed(AdaptivePolicy& p, uint64_t id, double step_ms, double round_ms, int rounds, int accepted) {
  ASSERT_GE(rounds, kWarmupRounds);
  for (int r = 0; r < kWarmupRounds; ++r) {
    ASSERT_FALSE(p.wants_plain_step(id)) << "round " << r;
    p.record_round(id, round_ms, 3, accepted);
  }
  ASSERT_TRUE(p.wants_plain_step(id));
  p.record_plain_step(id, step_ms);
  ASSERT_TRUE(p.wants_plain_step(id));
  p.record_plain_step(id, step_ms);
  ASSERT_FALSE(p.wants_plain_step(id));
  for (int r = kWarmupRounds; r < rounds; ++r) p.record_round(id, round_ms, 3, accepted);
  p.request_finished(id);
}

TEST(AdaptivePolicy, ForcedAndDisabled) {
  PolicyEnv e = env_in("forced");
  e.force = true;
  auto on = AdaptivePolicy::create(key(), e);
  ASSERT_TRUE(on);
  EXPECT_EQ(on->state(), PolicyState::forced);
  EXPECT_TRUE(on->should_run());
  EXPECT_FALSE(on->wants_plain_step(1));
  e.force = false;
  EXPECT_FALSE(AdaptivePolicy::create(key(), e)->should_run());
  PolicyEnv off = env_in("off");
  off.adaptive = false;
  EXPECT_FALSE(AdaptivePolicy::create(key(), off).has_value());
  off.force = true;  // a pin wins over disabled adaptation
  EXPECT_EQ(AdaptivePolicy::create(key(), off)->state(), PolicyState::forced);
}

TEST(AdaptivePolicy, ProfilesFourSamplesThenSettlesAndPersists) {
  PolicyEnv e = env_in("settle");
  auto p = AdaptivePolicy::create(key(), e);
  ASSERT_TRUE(p);
  EXPECT_EQ(p->state(), PolicyState::profiling);
  EXPECT_TRUE(p->should_run());
  // A request that never ran a real round does not count.
  p->record_plain_step(99, 10);
  p->request_finished(99);
  EXPECT_EQ(p->snapshot().samples, 0);
  for (uint64_t id = 1; id <= 3; ++id) {
    feed(*p, id, 10.0, 12.0, 5, 2);
    EXPECT_EQ(p->snapshot().samples, static_cast<int>(id));
    EXPECT_EQ(p->state(), PolicyState::profiling);
  }
  feed(*p, 4, 10.0, 12.0, 5, 2);
  // speedup = (2 + 1) * 10 / 12 = 2.5 -> enable; acceptance 2/3.
  EXPECT_EQ(p->state(), PolicyState::settled);
  auto s = p->snapshot();
  EXPECT_EQ(s.verdict, std::optional<bool>(true));
  EXPECT_DOUBLE_EQ(*s.last_speedup, 2.5);
  EXPECT_DOUBLE_EQ(*s.acceptance_rate, 0.67);
  EXPECT_EQ(s.samples, 4);
  ASSERT_TRUE(fs::exists(p->hint_path()));
  // A restart with the same cache settles at once, without profiling.
  auto again = AdaptivePolicy::create(key(), e);
  EXPECT_EQ(again->state(), PolicyState::settled);
  EXPECT_TRUE(again->should_run());
  EXPECT_FALSE(again->wants_plain_step(1));
  // Another key (block size) does not reuse it.
  PolicyKey k8 = key();
  k8.block_size = 8;
  EXPECT_EQ(AdaptivePolicy::create(k8, e)->state(), PolicyState::profiling);
}

TEST(AdaptivePolicy, EstimatorZones) {
  struct Case {
    double step_ms, round_ms;
    int accepted;
    bool verdict;
  };
  // speedup = (accepted + 1) * step / round
  const Case cases[] = {
      {10, 40, 1, false},  // 0.5: decline
      {10, 20, 1, false},  // 1.0: decline (<= 1.0)
      {10, 16, 1, true},   // 1.25: static default for a CPU = enable
      {10, 12, 1, true},   // 1.67: enable
  };
  int n = 0;
  for (const auto& c : cases) {
    auto p = AdaptivePolicy::create(key(), env_in("zone" + std::to_string(n++)));
    for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, c.step_ms, c.round_ms, 3, c.accepted);
    EXPECT_EQ(p->snapshot().verdict, std::optional<bool>(c.verdict)) << c.step_ms << " " << c.round_ms;
  }
  EXPECT_FALSE(static_default_for("gpu:Some GPU|sm132"));
}

TEST(AdaptivePolicy, BadHintsMeanReprofileNeverACrash) {
  PolicyEnv e = env_in("bad");
  auto p = AdaptivePolicy::create(key(), e);
  const std::string path = p->hint_path();
  fs::create_directories(fs::path(path).parent_path());
  const char* bodies[] = {
      "",                                 // empty / truncated
      "{\"version\": 1, \"target\"",      // truncated JSON
      "[1, 2, 3]",                        // not an object
      "{\"version\": 99, \"target\": \"/m/target\", \"drafter\": \"/m/draft\", \"hardware\": \"cpu:Test CPU|t2|avx512\", "
      "\"block_size\": 4, \"verdict\": \"enable\", \"acceptance_rate\": 0.5, \"samples\": 4}",  // wrong version
      "{\"version\": 1, \"target\": \"/other\", \"drafter\": \"/m/draft\", \"hardware\": \"cpu:Test CPU|t2|avx512\", "
      "\"block_size\": 4, \"verdict\": \"enable\", \"acceptance_rate\": 0.5, \"samples\": 4}",  // other key
      "{\"version\": 1, \"target\": \"/m/target\", \"drafter\": \"/m/draft\", \"hardware\": \"cpu:Test CPU|t2|avx512\", "
      "\"block_size\": 4, \"verdict\": 7, \"acceptance_rate\": 0.5, \"samples\": 4}",  // mistyped field
  };
  for (const char* body : bodies) {
    std::ofstream(path, std::ios::trunc) << body;
    auto q = AdaptivePolicy::create(key(), e);
    EXPECT_EQ(q->state(), PolicyState::profiling) << body;
  }
}

TEST(AdaptivePolicy, UnwritableCacheKeepsTheVerdictInMemory) {
  PolicyEnv e;
  e.cache_dir = "/proc/tandem-cannot-write-here";
  auto p = AdaptivePolicy::create(key(), e);
  for (uint64_t id = 1; id <= 4; ++id) feed(*p, id, 10, 12, 3, 2);
  EXPECT_EQ(p->state(), PolicyState::settled);
  EXPECT_TRUE(p->should_run());
}

TEST(HardwareLabel, NamesCpuThreadsAndIsa) {
  const std::string l = hardware_label(3);
  EXPECT_EQ(l.rfind("cpu:", 0), 0u);
  EXPECT_NE(l.find("|t3|"), std::string::npos);
  EXPECT_NE(hardware_label(1), hardware_label(2));
}

}  // namespace
}  // namespace tandem::scheduler
