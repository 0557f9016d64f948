// The engine drives the adaptive policy end to end on the fixture model
// (real timings, so the verdict itself is not asserted): it profiles, settles,
// keeps feeding the settled policy (ADR 0005) — served samples for an
// enable, a spot check for a decline — and the output never changes.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "engine_test_util.h"
#include "scheduler/engine.h"

namespace tandem::scheduler {
namespace {

std::unique_ptr<Engine> engine(bool with_drafter, const PolicyEnv& env) {
  EngineConfig config;
  config.max_running = 4;
  config.context = 256;
  config.threads = 2;
  return testing::start_engine(config, testing::load_target(),
                               with_drafter ? testing::load_copy_drafter() : nullptr, env);
}

std::vector<int32_t> generate(Engine& e, uint64_t id) {
  auto r = std::make_shared<EngineRequest>();
  r->id = id;
  for (int i = 0; i < 6 + static_cast<int>(id % 5) * 4; ++i) r->prompt.push_back((id * 17 + i * 5) % 256);
  r->params.temperature = 0.7f;
  r->params.seed = 77 + id;
  r->max_tokens = 32;
  EXPECT_TRUE(e.submit(r).ok());
  std::vector<int32_t> tokens;
  for (bool done = false; !done;) {
    std::vector<RequestUpdate> updates;
    if (!r->channel->pop_all(updates, std::chrono::seconds(30))) {
      ADD_FAILURE() << "timed out";
      break;
    }
    for (auto& u : updates) {
      for (auto& t : u.tokens) tokens.push_back(t.token);
      done = done || u.finish != FinishReason::none;
    }
  }
  return tokens;
}

TEST(PolicyEngine, ASettledPolicyKeepsBeingFedAndOutputNeverChanges) {
  PolicyEnv env;
  env.cache_dir = ::testing::TempDir() + "tandem_policy_engine";
  std::filesystem::remove_all(env.cache_dir);
  constexpr int kRequests = kSamplesMax + kDeclineCheckEvery + kMonitorWindow + 2;
  std::vector<std::vector<int32_t>> plain;
  {
    auto e = engine(false, env);
    for (uint64_t id = 1; id <= kRequests; ++id) plain.push_back(generate(*e, id));
  }
  auto e = engine(true, env);
  int settled_at = 0;
  bool fed_after_settling = false;
  for (uint64_t id = 1; id <= kRequests && !fed_after_settling; ++id) {
    ASSERT_EQ(generate(*e, id), plain[id - 1]) << "request " << id;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the engine publishes after the last update
    const PolicyReport r = e->policy_board().read();
    ASSERT_TRUE(r.state == "profiling" || r.state == "settled") << r.state;
    if (r.state == "profiling") {
      ASSERT_EQ(settled_at, 0) << "re-profiled: " << r.reprofile_reason.value_or("?");
      continue;
    }
    if (settled_at == 0) {
      settled_at = static_cast<int>(id);
      EXPECT_GE(r.samples, kSamplesRequired);
      EXPECT_LE(r.samples, kSamplesMax);
      ASSERT_TRUE(r.speedup_low && r.speedup_high && r.settle_reason);
      EXPECT_LE(*r.speedup_low, *r.speedup);
      EXPECT_GE(*r.speedup_high, *r.speedup);
      continue;
    }
    // An enable's served requests are sampled (a window fills); a decline's
    // spot check turns speculation on for the next B=1 request.
    fed_after_settling = *r.verdict == "enable" ? r.served_speedup.has_value() : r.mtp_enabled == true;
  }
  EXPECT_GT(settled_at, 0) << "never settled";
  EXPECT_TRUE(fed_after_settling);
}

// The policy's environment comes in with EngineConfig (the app fills it from
// the process's); the engine reads no environment variable itself.
TEST(PolicyEngine, ThePolicyEnvComesFromTheConfig) {
  auto create = [](const PolicyEnv& env) {
    EngineConfig config;
    config.context = 256;
    config.threads = 2;
    config.policy_env = env;
    return testing::create_engine(config, testing::load_target(), testing::load_copy_drafter());
  };
  PolicyEnv on;
  on.force = true;
  PolicyReport r = create(on)->policy_board().read();
  EXPECT_EQ(r.state, "forced");
  EXPECT_EQ(r.mtp_enabled, std::optional<bool>(true));
  PolicyEnv off;
  off.force = false;
  r = create(off)->policy_board().read();
  EXPECT_EQ(r.state, "forced");
  EXPECT_EQ(r.mtp_enabled, std::optional<bool>(false));
  PolicyEnv static_default;
  static_default.adaptive = false;
  r = create(static_default)->policy_board().read();
  EXPECT_EQ(r.state, "unavailable");
  EXPECT_EQ(r.reason, std::optional<std::string>("adaptive_disabled"));
  // The default config: adaptive, no hint files (no cache directory) -> profiling.
  r = create(PolicyEnv{})->policy_board().read();
  EXPECT_EQ(r.state, "profiling");
}

}  // namespace
}  // namespace tandem::scheduler
