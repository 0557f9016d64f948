// The engine on a real (fixture) model: a request's tokens are identical
// alone, among 8 concurrent different requests, and with a drafter
// configured (greedy and seeded sampling) — bitwise isolation.
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "spec/draft_model.h"

namespace tandem::scheduler {
namespace {

std::string fixture_dir(const std::string& name) {
  const char* root = std::getenv("TANDEM_SOURCE_DIR");
  return std::string(root ? root : ".") + "/tests/fixtures/models/" + name;
}

constexpr const char* kModel = "qwen3_qknorm_bf16_tied";

std::unique_ptr<Engine> make_engine(bool with_drafter, int max_running = 8) {
  auto target = model::Model::load(fixture_dir(kModel));
  EXPECT_TRUE(target.ok()) << target.status().to_string();
  std::unique_ptr<spec::Drafter> drafter;
  if (with_drafter) {
    auto d = spec::DraftModelDrafter::load(fixture_dir(kModel), nullptr, 1024);
    EXPECT_TRUE(d.ok());
    drafter = std::move(*d);
  }
  EngineConfig config;
  config.max_running = max_running;
  config.prefill_budget = 16;  // forces chunked prefill interleaved with decode
  config.context = 256;
  config.threads = 2;
  auto e = Engine::create(config, std::move(*target), std::move(drafter));
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  PolicyEnv forced;  // speculate whenever possible; no hint files
  forced.force = true;
  (*e)->set_policy_env(forced);
  (*e)->start();
  return std::move(*e);
}

std::shared_ptr<EngineRequest> request(uint64_t id, float temperature) {
  auto r = std::make_shared<EngineRequest>();
  r->id = id;
  for (int i = 0; i < 5 + static_cast<int>(id % 7) * 6; ++i) r->prompt.push_back(static_cast<int32_t>((id * 31 + i * 7) % 256));
  r->params.temperature = temperature;
  r->params.top_p = 0.9f;
  r->params.seed = 1000 + id;
  r->max_tokens = 40;
  return r;
}

struct Result {
  std::vector<int32_t> tokens;
  FinishReason finish = FinishReason::none;
  RequestStats stats;
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
      if (u.finish != FinishReason::none) {
        out.finish = u.finish;
        out.stats = u.stats;
      }
    }
  }
  return out;
}

std::vector<Result> run_all(Engine& e, const std::vector<std::shared_ptr<EngineRequest>>& reqs) {
  for (auto& r : reqs) EXPECT_TRUE(e.submit(r).ok());
  std::vector<Result> out;
  for (auto& r : reqs) out.push_back(collect(r));
  return out;
}

TEST(Engine, OutputIsIndependentOfBatchAndDrafter) {
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::vector<Result> alone;
    {
      auto e = make_engine(false);
      for (uint64_t id = 1; id <= 8; ++id) alone.push_back(run_all(*e, {request(id, temperature)})[0]);
    }
    for (const auto& r : alone) {
      EXPECT_EQ(r.finish, FinishReason::length);
      EXPECT_EQ(r.tokens.size(), 40u);
    }
    {
      auto e = make_engine(false);
      std::vector<std::shared_ptr<EngineRequest>> reqs;
      for (uint64_t id = 1; id <= 8; ++id) reqs.push_back(request(id, temperature));
      auto together = run_all(*e, reqs);
      for (size_t i = 0; i < 8; ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i + 1;
    }
    {
      auto e = make_engine(true);
      int64_t rounds = 0;
      for (uint64_t id = 1; id <= 8; ++id) {
        Result r = run_all(*e, {request(id, temperature)})[0];
        EXPECT_EQ(r.tokens, alone[id - 1].tokens) << "request " << id << " with a drafter";
        rounds += r.stats.spec_rounds;
        EXPECT_EQ(r.stats.accepted_tokens, r.stats.draft_tokens) << "a copy of the target accepts everything";
      }
      EXPECT_GT(rounds, 0) << "a lone request must have speculated";
      std::vector<std::shared_ptr<EngineRequest>> reqs;
      for (uint64_t id = 1; id <= 8; ++id) reqs.push_back(request(id, temperature));
      auto together = run_all(*e, reqs);
      for (size_t i = 0; i < 8; ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i + 1;
    }
  }
}

TEST(Engine, StopTokensAndLimits) {
  auto e = make_engine(false);
  auto probe = request(3, 0.0f);
  Result full = run_all(*e, {probe})[0];
  ASSERT_GE(full.tokens.size(), 10u);
  auto r = request(3, 0.0f);
  r->stop_tokens = {full.tokens[5]};
  Result stopped = run_all(*e, {r})[0];
  EXPECT_EQ(stopped.finish, FinishReason::stop);
  const auto first = std::find(full.tokens.begin(), full.tokens.end(), full.tokens[5]) - full.tokens.begin();
  EXPECT_EQ(stopped.tokens, std::vector<int32_t>(full.tokens.begin(), full.tokens.begin() + first));
  auto too_long = request(4, 0.0f);
  too_long->max_tokens = 1000;
  Status s = e->submit(too_long);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("256"), std::string::npos);
}

TEST(Engine, CancelReleasesKv) {
  auto e = make_engine(false, 2);
  auto r = request(5, 0.0f);
  r->max_tokens = 200;
  ASSERT_TRUE(e->submit(r).ok());
  std::vector<RequestUpdate> updates;
  ASSERT_TRUE(r->channel->pop_all(updates, std::chrono::seconds(30)));
  EXPECT_GT(e->metrics().kv_blocks_used.load(), 0);
  r->channel->cancel();
  Result rest = collect(r);
  EXPECT_EQ(rest.finish, FinishReason::cancelled);
  for (int i = 0; i < 100 && e->metrics().kv_blocks_used.load() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(e->metrics().kv_blocks_used.load(), 0);
  EXPECT_EQ(e->metrics().requests_cancelled.load(), 1u);
}

}  // namespace
}  // namespace tandem::scheduler
