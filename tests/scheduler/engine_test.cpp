// The engine on a real (fixture) model: a request's tokens are identical
// alone, among 8 concurrent different requests, and with a drafter
// configured (greedy and seeded sampling) — bitwise isolation.
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "../speculative/random_mtp_head.h"
#include "engine_test_util.h"
#include "speculative/mtp.h"

namespace tandem::scheduler {
namespace {

// The tests' engine settings; tests change fields before make_engine().
EngineConfig test_config(int max_running = 8) {
  EngineConfig config;
  config.max_running = max_running;
  config.prefill_budget = 16;  // forces chunked prefill interleaved with decode
  config.context = 256;
  config.threads = 2;
  return config;
}

enum class TestDrafter { none, copy, mtp };

// A copy of the target as draft model (acceptance 1.0) whose cache holds
// `drafter_positions`, or a random MTP head.
std::unique_ptr<Engine> make_engine(TestDrafter kind, const EngineConfig& config,
                                    int64_t drafter_positions = 1024,
                                    model::WeightsQuant weights = model::WeightsQuant::stored) {
  auto target = testing::load_target(weights);
  std::unique_ptr<speculative::Drafter> drafter;
  if (kind == TestDrafter::copy) {
    drafter = testing::load_copy_drafter(drafter_positions, weights);
  } else if (kind == TestDrafter::mtp) {
    auto d =
        speculative::MtpDrafter::load(speculative::testing::write_random_mtp_head(target->config(), "engine"),
                                      *target, nullptr, drafter_positions);
    EXPECT_TRUE(d.ok()) << d.status().to_string();
    drafter = std::move(*d);
  }
  PolicyEnv forced;  // speculate whenever possible; no hint files
  forced.force = true;
  return testing::start_engine(config, std::move(target), std::move(drafter), forced);
}

std::unique_ptr<Engine> make_engine(bool with_drafter, const EngineConfig& config = test_config()) {
  return make_engine(with_drafter ? TestDrafter::copy : TestDrafter::none, config);
}

std::shared_ptr<EngineRequest> request(uint64_t id, float temperature) {
  auto r = std::make_shared<EngineRequest>();
  r->id = id;
  for (int i = 0; i < 5 + static_cast<int>(id % 7) * 6; ++i)
    r->prompt.push_back(static_cast<int32_t>((id * 31 + i * 7) % 256));
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

// Rows per forward chunk (ADR 0051): 256 on the CPU whatever is asked; on a GPU one whole
// tick unless TANDEM_CUDA_CHUNK_ROWS (forward_rows) says otherwise, within [256, 4096].
TEST(Engine, ForwardRowsTakeAWholeTickOnAGpu) {
  EngineConfig c;
  c.max_running = 64;
  c.prefill_budget = 2048;
  EXPECT_EQ(engine_forward_rows(c, false), 256);
  EXPECT_EQ(engine_forward_rows(c, true), 2112);
  c.forward_rows = 512;
  EXPECT_EQ(engine_forward_rows(c, true), 512);
  EXPECT_EQ(engine_forward_rows(c, false), 256);
  c.forward_rows = 100000;
  EXPECT_EQ(engine_forward_rows(c, true), 4096);
  c.forward_rows = 0;
  c.max_running = 4;
  c.prefill_budget = 64;
  EXPECT_EQ(engine_forward_rows(c, true), 256);
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

// MTP layers stored inside the target's checkpoint (MiMo's layout, ADR 0027)
// drive the speculative slot like a separate head: each request's tokens are
// classic decoding's, greedy and seeded, alone and among others.
TEST(Engine, TheTargetsOwnMtpLayersMatchClassic) {
  auto engine_for = [](bool with_layers) {
    auto target = model::Model::load(testing::fixture_dir("mimo_mtp_bf16"));
    EXPECT_TRUE(target.ok()) << target.status().to_string();
    std::unique_ptr<speculative::Drafter> drafter;
    if (with_layers) {
      auto d = speculative::MtpDrafter::load_embedded(**target, nullptr, 1024);
      EXPECT_TRUE(d.ok()) << d.status().to_string();
      drafter = std::move(*d);
    }
    PolicyEnv forced;
    forced.force = true;
    return testing::start_engine(test_config(), std::move(*target), std::move(drafter), forced);
  };
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::vector<Result> alone;
    {
      auto e = engine_for(false);
      for (uint64_t id = 1; id <= 4; ++id) alone.push_back(run_all(*e, {request(id, temperature)})[0]);
    }
    auto e = engine_for(true);
    int64_t rounds = 0;
    for (uint64_t id = 1; id <= 4; ++id) {
      Result r = run_all(*e, {request(id, temperature)})[0];
      EXPECT_EQ(r.tokens, alone[id - 1].tokens) << "request " << id;
      rounds += r.stats.spec_rounds;
    }
    EXPECT_GT(rounds, 0) << "a lone request must have speculated";
    std::vector<std::shared_ptr<EngineRequest>> reqs;
    for (uint64_t id = 1; id <= 4; ++id) reqs.push_back(request(id, temperature));
    auto together = run_all(*e, reqs);
    for (size_t i = 0; i < 4; ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i + 1;
  }
}

// The same with quantized weights (--weights; q4_k takes q4_0 on this
// fixture's 64-wide rows): batch-independent and speculation-independent bits.
TEST(Engine, QuantizedOutputIsIndependentOfBatchAndDrafter) {
  for (model::WeightsQuant w : {model::WeightsQuant::q8_0, model::WeightsQuant::q4_k}) {
    for (float temperature : {0.0f, 0.8f}) {
      SCOPED_TRACE(std::string(model::weights_quant_name(w)) + " temperature " + std::to_string(temperature));
      std::vector<Result> alone;
      {
        auto e = make_engine(TestDrafter::none, test_config(), 1024, w);
        for (uint64_t id = 1; id <= 4; ++id) alone.push_back(run_all(*e, {request(id, temperature)})[0]);
      }
      auto e = make_engine(TestDrafter::copy, test_config(), 1024, w);
      int64_t rounds = 0;
      for (uint64_t id = 1; id <= 4; ++id) {
        Result r = run_all(*e, {request(id, temperature)})[0];
        EXPECT_EQ(r.tokens, alone[id - 1].tokens) << "request " << id << " with a drafter";
        rounds += r.stats.spec_rounds;
      }
      EXPECT_GT(rounds, 0);
      std::vector<std::shared_ptr<EngineRequest>> reqs;
      for (uint64_t id = 1; id <= 4; ++id) reqs.push_back(request(id, temperature));
      auto together = run_all(*e, reqs);
      for (size_t i = 0; i < 4; ++i) EXPECT_EQ(together[i].tokens, alone[i].tokens) << "request " << i + 1;
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
  auto e = make_engine(false, test_config(2));
  // The request must still be running when it is cancelled: on a busy machine
  // the test thread can be descheduled while all 200 tokens are generated, so
  // a request that finished before its cancel landed is retried (a new id).
  Result rest;
  int64_t held = 0;  // kv_blocks_used while the cancelled request ran
  int attempts = 0;
  for (; attempts < 8 && rest.finish != FinishReason::cancelled; ++attempts) {
    auto r = request(5 + attempts, 0.0f);
    r->max_tokens = 200;
    ASSERT_TRUE(e->submit(r).ok());
    std::vector<RequestUpdate> updates;
    ASSERT_TRUE(r->channel->pop_all(updates, std::chrono::seconds(30)));
    if (std::any_of(updates.begin(), updates.end(),
                    [](const RequestUpdate& u) { return u.finish != FinishReason::none; }))
      continue;
    held = e->metrics().kv_blocks_used.load();  // it still ran at the cancel, so it ran here
    r->channel->cancel();
    rest = collect(r);
  }
  ASSERT_EQ(rest.finish, FinishReason::cancelled)
      << "no request was still running when cancelled, " << attempts << " attempts";
  EXPECT_GT(held, 0);
  for (int i = 0; i < 100 && e->metrics().kv_blocks_used.load() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_EQ(e->metrics().kv_blocks_used.load(), 0);
  EXPECT_EQ(e->metrics().requests_cancelled.load(), 1u);
}

// Logprobs ride the speculative path too: every token's logprob and
// top_logprobs are bitwise those of plain decoding.
TEST(Engine, LogprobsAreIdenticalWithAndWithoutSpeculation) {
  auto with_logprobs = [](uint64_t id, float temperature) {
    auto r = request(id, temperature);
    r->want_logprobs = true;
    r->params.top_logprobs = 3;
    return r;
  };
  auto details = [](Engine& e, const std::shared_ptr<EngineRequest>& r, int64_t* rounds) {
    EXPECT_TRUE(e.submit(r).ok());
    std::vector<GeneratedToken> out;
    for (bool done = false; !done;) {
      std::vector<RequestUpdate> updates;
      if (!r->channel->pop_all(updates, std::chrono::seconds(30))) {
        ADD_FAILURE() << "timed out";
        break;
      }
      for (auto& u : updates) {
        for (auto& t : u.tokens) out.push_back(t);
        if (u.finish != FinishReason::none) {
          done = true;
          *rounds += u.stats.spec_rounds;
        }
      }
    }
    return out;
  };
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    auto plain = make_engine(false);
    auto spec = make_engine(true);
    int64_t rounds = 0, no_rounds = 0;
    for (uint64_t id = 1; id <= 3; ++id) {
      const auto a = details(*plain, with_logprobs(id, temperature), &no_rounds);
      const auto b = details(*spec, with_logprobs(id, temperature), &rounds);
      ASSERT_EQ(a.size(), b.size());
      for (size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].token, b[i].token) << "request " << id << " token " << i;
        EXPECT_EQ(std::memcmp(&a[i].logprob, &b[i].logprob, sizeof(float)), 0)
            << "request " << id << " token " << i;
        ASSERT_EQ(a[i].top.size(), 3u);
        ASSERT_EQ(b[i].top.size(), 3u);
        for (size_t k = 0; k < 3; ++k) {
          EXPECT_EQ(a[i].top[k].token, b[i].top[k].token);
          EXPECT_EQ(std::memcmp(&a[i].top[k].logprob, &b[i].top[k].logprob, sizeof(float)), 0);
        }
      }
    }
    EXPECT_GT(rounds, 0) << "the logprob requests speculated";
    EXPECT_EQ(no_rounds, 0);
  }
}

// Speculation never fails a request that classic decoding serves: requests
// that fill the context exactly, on one sequence's worth of KV (-np 1: the
// pool is one context, no headroom) with a drafter whose cache holds exactly
// the context (as `tandem serve` sizes it) or an MTP head, at K = 2, 4 and
// 16, emit classic decoding's tokens and finish with "length" — the rounds
// near the end shrink, or become classic steps.
TEST(Engine, SpeculationNearTheContextEndMatchesClassic) {
  EngineConfig config = test_config(1);
  config.context = 128;
  auto near_end = [&](uint64_t id, int64_t prompt, float temperature) {
    auto r = request(id, temperature);
    r->prompt.clear();
    for (int64_t i = 0; i < prompt; ++i) r->prompt.push_back(static_cast<int32_t>((id * 29 + i * 11) % 256));
    r->max_tokens = static_cast<int32_t>(config.context - prompt);
    r->want_logprobs = id % 2 == 0;  // the classic fallback keeps per-token details aligned too
    r->params.top_logprobs = r->want_logprobs ? 2 : 0;
    return r;
  };
  const std::vector<int64_t> prompts = {60, 113, 126, 127};
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::vector<Result> reference;
    {
      auto e = make_engine(TestDrafter::none, config);
      for (size_t i = 0; i < prompts.size(); ++i) {
        reference.push_back(run_all(*e, {near_end(i + 1, prompts[i], temperature)})[0]);
        EXPECT_EQ(reference.back().finish, FinishReason::length) << "prompt " << prompts[i];
        EXPECT_EQ(static_cast<int64_t>(reference.back().tokens.size()) + prompts[i], config.context);
      }
    }
    for (int k : {2, 4, 16}) {
      for (TestDrafter kind : {TestDrafter::copy, TestDrafter::mtp}) {
        SCOPED_TRACE(std::string(kind == TestDrafter::copy ? "draft model" : "MTP head") +
                     " K=" + std::to_string(k));
        config.block_size = k;
        auto e = make_engine(kind, config, config.context);
        ASSERT_EQ(e->drafter()->position_limit(),
                  kind == TestDrafter::copy ? config.context : config.context + 32);
        int64_t rounds = 0;
        for (size_t i = 0; i < prompts.size(); ++i) {
          Result r = run_all(*e, {near_end(i + 1, prompts[i], temperature)})[0];
          EXPECT_EQ(r.finish, FinishReason::length) << "prompt " << prompts[i];
          EXPECT_EQ(r.tokens, reference[i].tokens) << "prompt " << prompts[i];
          rounds += r.stats.spec_rounds;
          if (kind == TestDrafter::copy) {
            EXPECT_EQ(r.stats.accepted_tokens, r.stats.draft_tokens);
            // Rounds touch only the positions classic decoding feeds: no draft past max_tokens.
            EXPECT_LT(r.stats.draft_tokens, r.stats.generated_tokens) << "prompt " << prompts[i];
          }
        }
        EXPECT_GT(rounds, 0);
        EXPECT_EQ(e->metrics().requests_failed.load(), 0u);
      }
    }
  }
}

// Prefix caching is exact: requests that start on cached prompt blocks emit
// exactly what they emit with the cache off, greedy and seeded, with and
// without a drafter; a pool too small to keep everything reclaims cached
// blocks and still serves every request right.
EngineConfig cache_config(bool prefix_cache, int64_t kv_tokens = 0) {
  EngineConfig config = test_config(4);
  config.prefill_budget = 24;  // chunks that do not line up with the 32-token blocks
  config.kv_tokens = kv_tokens;
  config.prefix_cache = prefix_cache;
  return config;
}

// Prompts sharing a 100-token prefix (3 full blocks) plus `id`-dependent tails;
// prompt 0 is the bare prefix.
std::shared_ptr<EngineRequest> shared_prefix_request(uint64_t id, float temperature, int family = 0) {
  auto r = std::make_shared<EngineRequest>();
  r->id = id;
  for (int i = 0; i < 100; ++i) r->prompt.push_back(static_cast<int32_t>((i * 13 + family * 101 + 5) % 256));
  for (uint64_t i = 0; i < (id % 8) * 5; ++i)
    r->prompt.push_back(static_cast<int32_t>((id * 17 + i * 3) % 256));
  r->params.temperature = temperature;
  r->params.top_p = 0.9f;
  r->params.seed = 7 + id;
  r->max_tokens = 24;
  return r;
}

TEST(Engine, PrefixCacheIsExact) {
  for (float temperature : {0.0f, 0.8f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    std::vector<Result> reference;
    {
      auto e = make_engine(false, cache_config(false));
      for (uint64_t id = 0; id < 8; ++id) {
        reference.push_back(run_all(*e, {shared_prefix_request(id, temperature)})[0]);
        EXPECT_EQ(reference.back().stats.cached_tokens, 0);
      }
    }
    for (bool drafter : {false, true}) {
      SCOPED_TRACE(drafter ? "with a drafter" : "no drafter");
      auto e = make_engine(drafter, cache_config(true));
      Result first = run_all(*e, {shared_prefix_request(3, temperature)})[0];
      EXPECT_EQ(first.tokens, reference[3].tokens);
      EXPECT_EQ(first.stats.cached_tokens, 0) << "nothing cached yet";
      for (uint64_t id = 0; id < 8; ++id) {  // one at a time: each finds the prefix
        Result r = run_all(*e, {shared_prefix_request(id, temperature)})[0];
        EXPECT_EQ(r.tokens, reference[id].tokens) << "request " << id;
        // Prompt 0 is exactly the 100-token prefix; its cache stops at 96 tokens
        // anyway (3 full blocks; the last prompt token is always prefilled).
        EXPECT_EQ(r.stats.cached_tokens, 96) << "request " << id;
      }
      std::vector<std::shared_ptr<EngineRequest>> reqs;  // and all at once
      for (uint64_t id = 0; id < 8; ++id) reqs.push_back(shared_prefix_request(id, temperature));
      auto together = run_all(*e, reqs);
      for (size_t i = 0; i < 8; ++i) EXPECT_EQ(together[i].tokens, reference[i].tokens) << "request " << i;
      EXPECT_GT(e->metrics().prefix_cache_hits.load(), 0u);
    }
  }
}

TEST(Engine, PrefixCacheReclaimsBlocksWhenThePoolIsShort) {
  // 12 blocks in all: a request needs up to 5 (130 prompt + 24 tokens), and
  // the 6 prompt families leave 19 full prompt blocks behind, so the index must give some back.
  std::vector<Result> reference;
  {
    auto e = make_engine(false, cache_config(false, 12 * 32));
    for (int family = 0; family < 6; ++family)
      reference.push_back(run_all(*e, {shared_prefix_request(family + 1, 0.0f, family)})[0]);
  }
  auto e = make_engine(false, cache_config(true, 12 * 32));
  for (int round = 0; round < 2; ++round) {
    for (int family = 0; family < 6; ++family) {
      Result r = run_all(*e, {shared_prefix_request(family + 1, 0.0f, family)})[0];
      EXPECT_EQ(r.finish, FinishReason::length);
      EXPECT_EQ(r.tokens, reference[family].tokens) << "round " << round << " family " << family;
    }
  }
  // The engine publishes its gauges right after the tick that finished the last request.
  for (int i = 0; i < 200 && e->metrics().kv_blocks_used.load() != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(e->metrics().kv_blocks_used.load(), 0) << "cached blocks no request uses count as free";
  EXPECT_GT(e->metrics().prefix_cache_blocks.load(), 0);
  EXPECT_LE(e->metrics().prefix_cache_blocks.load(), 12) << "evicted: at most the pool";
}

}  // namespace
}  // namespace tandem::scheduler
